"""`iqp data replay`: files land whole, on the profile's schedule, and a replay can resume."""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from airflow_iqp.commands import data as data_command
from airflow_iqp.tpch.generate import generate
from airflow_iqp.tpch.manifest import MANIFEST_NAME, load_manifest, part_name
from airflow_iqp.tpch.replay import PROFILES, arrival_offset, landed_files, replay

FILES = 6
STREAMS = ("orders", "lineitem")


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("replay") / "data"
    generate(out, scale=0.01, files=FILES, seconds_per_file=1.0)
    return out


def offsets(profile: str, files: int, seconds_per_file: float = 1.0) -> list[float]:
    return [arrival_offset(profile, i, files, seconds_per_file) for i in range(files)]


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("files", [1, 2, 7, 60, 4500])
def test_arrivals_never_go_backwards(profile: str, files: int) -> None:
    times = offsets(profile, files)
    assert times[0] >= 0
    assert all(a <= b for a, b in zip(times, times[1:]))


def test_fixed_rate_is_one_file_per_slot() -> None:
    assert offsets("FR", 5, 2.0) == [0.0, 2.0, 4.0, 6.0, 8.0]


def test_fast_profiles_finish_early_and_vr2_is_bursty() -> None:
    fixed_end = arrival_offset("FR", 4499, 4500)
    assert arrival_offset("VR1", 4499, 4500) < fixed_end
    assert arrival_offset("VR2", 4499, 4500) < fixed_end
    vr1, vr2 = offsets("VR1", 4500), offsets("VR2", 4500)
    assert len(set(vr1)) == 4500  # steady
    assert len(set(vr2)) == 30  # bursts of many files at once
    assert max(b - a for a, b in zip(vr2, vr2[1:])) > 100 * max(b - a for a, b in zip(vr1, vr1[1:]))


@pytest.mark.parametrize(("profile", "late"), [("VR3", 20.0), ("VR4", 7.0)])
def test_slow_profiles_end_late_by_the_papers_seconds(profile: str, late: float) -> None:
    assert arrival_offset(profile, 4499, 4500) == pytest.approx(4499 + late)
    # Behind the fixed rate mid-stream, which is what makes the scheduler trigger on time.
    assert arrival_offset(profile, 2250, 4500) > arrival_offset("FR", 2250, 4500) + 100
    # Lateness scales with the stream's span: 45 files of 1 s are late by 1/100 as much.
    assert arrival_offset(profile, 44, 45) == pytest.approx(44 + late / 100)


def test_bad_profile_or_index_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown profile 'VR9'"):
        arrival_offset("VR9", 0, 10)
    with pytest.raises(ValueError, match="outside 0..9"):
        arrival_offset("FR", 10, 10)


def landed_names(landing: Path) -> dict[str, list[str]]:
    return {s: [p.name for p in landed_files(landing, s)] for s in STREAMS}


def test_replay_lands_every_file_on_schedule(source: Path, tmp_path: Path) -> None:
    landing = tmp_path / "landing"
    started = time.monotonic()
    assert replay(source, landing, "FR", speedup=20.0) == FILES
    assert time.monotonic() - started >= (FILES - 1) / 20.0
    assert landed_names(landing) == {s: [part_name(i) for i in range(FILES)] for s in STREAMS}
    manifest = load_manifest(source / MANIFEST_NAME)
    for stream in STREAMS:
        for entry in manifest.streams[stream]:
            assert pq.read_metadata(landing / stream / entry.name).num_rows == entry.rows
        assert [p.name for p in (landing / stream).iterdir() if p.name.startswith(".")] == []


def test_no_reader_sees_a_partly_written_file(source: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    landing = tmp_path / "landing"
    real_copy = shutil.copyfile
    seen_while_copying: list[tuple[str, list[str]]] = []

    def watched_copy(src: Path, dest: Path) -> None:
        real_copy(src, dest)  # the bytes are in place but not yet renamed
        seen_while_copying.append((Path(dest).name, [p.name for p in landed_files(landing, Path(dest).parent.name)]))
        assert not Path(dest).with_name(Path(src).name).exists()

    monkeypatch.setattr("airflow_iqp.tpch.replay.shutil.copyfile", watched_copy)
    replay(source, landing, "FR", speedup=1000.0)
    assert len(seen_while_copying) == 2 * FILES
    for temp_name, visible in seen_while_copying:
        assert temp_name.startswith(".")
        final = temp_name[1:].removesuffix(".tmp")
        assert final not in visible


def test_orders_and_lineitem_of_an_index_land_together(
    source: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    landing = tmp_path / "landing"
    snapshots = []
    monkeypatch.setattr("airflow_iqp.tpch.replay.time.sleep", lambda s: snapshots.append(landed_names(landing)))
    replay(source, landing, "VR3", speedup=1.0)
    for snap in snapshots:  # between indexes, both streams hold the same files
        assert snap["orders"] == snap["lineitem"]
    assert len(snapshots) == FILES


def test_replay_resumes_at_an_index_without_waiting_for_earlier_slots(source: Path, tmp_path: Path) -> None:
    landing = tmp_path / "landing"
    started = time.monotonic()
    assert replay(source, landing, "FR", speedup=1.0, start_index=FILES - 1) == 1
    assert time.monotonic() - started < 1.0  # the last file's slot is 5 s in; resume starts now
    assert landed_names(landing) == {s: [part_name(FILES - 1)] for s in STREAMS}
    replay(source, landing, "FR", speedup=1000.0, start_index=3)
    assert landed_names(landing) == {s: [part_name(i) for i in range(3, FILES)] for s in STREAMS}


def test_landed_files_ignores_dot_files(tmp_path: Path) -> None:
    (tmp_path / "orders").mkdir()
    (tmp_path / "orders" / ".part-00001.parquet.tmp").write_bytes(b"half")
    (tmp_path / "orders" / "part-00000.parquet").write_bytes(b"whole")
    assert [p.name for p in landed_files(tmp_path, "orders")] == ["part-00000.parquet"]
    assert landed_files(tmp_path, "lineitem") == []


def test_bad_replay_arguments_are_refused(source: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="--start-index 6 is outside 0..5"):
        replay(source, tmp_path, start_index=FILES)
    with pytest.raises(ValueError, match="--speedup"):
        replay(source, tmp_path, speedup=0)
    with pytest.raises(ValueError, match="holds no manifest.json"):
        replay(tmp_path, tmp_path / "landing")


def test_cli_replay(source: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser(prog="iqp")
    data_command.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(
        [
            "data",
            "replay",
            "--source",
            str(source),
            "--landing",
            str(tmp_path / "l"),
            "--profile",
            "VR2",
            "--speedup",
            "1000",
            "--start-index",
            "2",
        ]
    )
    assert args.func(args) == 0
    assert "landed 4 file indexes" in capsys.readouterr().out
    assert landed_names(tmp_path / "l")["orders"] == [part_name(i) for i in range(2, FILES)]
