"""Atomic writes: a reader sees the old file or the new one, never half of one, and no leftovers."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from airflow_iqp.atomic import write_json
from airflow_iqp.tpch.manifest import Manifest, StreamFile, load_manifest, write_manifest

if TYPE_CHECKING:
    from pathlib import Path


def test_write_json_replaces_the_file_and_leaves_nothing_beside_it(tmp_path: Path) -> None:
    target = tmp_path / "doc.json"
    write_json(target, {"a": 1})
    write_json(target, {"a": [2, 3]})
    assert json.loads(target.read_text()) == {"a": [2, 3]}
    assert target.read_text().endswith("\n")
    assert [p.name for p in tmp_path.iterdir()] == ["doc.json"]


def test_a_failed_write_keeps_the_old_file_whole(tmp_path: Path) -> None:
    target = tmp_path / "doc.json"
    write_json(target, {"a": 1})
    with pytest.raises(TypeError):
        write_json(target, {"a": object()})  # not serialisable
    assert json.loads(target.read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["doc.json"]


def test_the_manifest_round_trips_through_the_one_writer(tmp_path: Path) -> None:
    manifest = Manifest(
        scale=0.01,
        files=1,
        seconds_per_file=1.0,
        base_time="2024-01-01T00:00:00+00:00",
        event_time_columns={"orders": "o_event_time"},
        streams={"orders": [StreamFile(0, "part-00000.parquet", 15)]},
        static={"nation": 25},
    )
    write_manifest(tmp_path / "manifest.json", manifest)
    assert load_manifest(tmp_path / "manifest.json") == manifest
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json"]
