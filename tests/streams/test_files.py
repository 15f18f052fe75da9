"""Which names are data, and a listed file's identity."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from airflow_iqp.streams.files import DataFile, is_data
from tests.streams import T0, data_file


@pytest.mark.parametrize(
    ("relative", "data"),
    [
        ("part-0001.parquet", True),
        ("dt=2026-01-01/hour=10/part-0.parquet", True),
        ("_SUCCESS", False),
        (".part-0.parquet.crc", False),
        ("_temporary/0/part-0.parquet", False),
        ("dt=2026-01-01/.tmp-xyz", False),
        ("dt=2026-01-01/_temporary/part-0.parquet", False),
        ("a_b/c.d", True),
    ],
)
def test_hidden_names_are_not_data(relative: str, data: bool) -> None:
    assert is_data(relative) is data


def test_modified_is_normalised_to_utc_and_must_be_aware() -> None:
    local = datetime(2026, 1, 1, 12, tzinfo=timezone(timedelta(hours=2)))
    file = data_file("a.parquet", local)
    assert file.modified == T0 + timedelta(hours=10)
    assert file.modified.utcoffset() == timedelta(0)
    with pytest.raises(ValueError, match="timezone-aware"):
        data_file("a.parquet", datetime(2026, 1, 1))


def test_identity_tells_a_rewrite_apart() -> None:
    first = data_file("a.parquet", timedelta(0), size=10)
    assert first.identity != data_file("a.parquet", timedelta(0), size=11).identity
    assert first.identity != data_file("a.parquet", timedelta(seconds=1), size=10).identity
    assert first.identity == data_file("a.parquet", timedelta(0), size=10).identity


def test_dict_round_trip_through_json() -> None:
    file = DataFile("sales", "s3://b/sales/a.parquet", "a.parquet", 5, T0 + timedelta(microseconds=7), "abc")
    assert DataFile.from_dict(json.loads(json.dumps(file.to_dict()))) == file
