"""An arrival stream watched incrementally on a local disk: old directories settle and are not
listed again, what lands in a directory still receiving files is seen at the next look.
"""

from __future__ import annotations

import os
import shutil
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from airflow_iqp.streams.arrivals import ArrivalWatch
from airflow_iqp.streams.spec import FileStream

if TYPE_CHECKING:
    from pathlib import Path

NOW = datetime.now(UTC).replace(microsecond=0)
HISTORY = timedelta(hours=1)


def land(root: Path, relative: str, at: datetime) -> Path:
    """A file modified at `at`, and its directories changed then, as its landing changes them."""
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"rows")
    for changed in [path, *path.relative_to(root).parents][:-1]:
        os.utime(root / changed, (at.timestamp(), at.timestamp()))
    return path


def history(root: Path, days: int) -> None:
    """A day-and-hour layout, one file an hour, ending a day ago."""
    for hour in range(days * 24):
        at = NOW - timedelta(days=days + 1) + timedelta(hours=hour)
        land(root, f"dt={at:%Y-%m-%d}/hour={at:%H}/{hour}.parquet", at)


def relatives(watch: ArrivalWatch) -> set[str]:
    return {file.relative for file in watch.look(NOW - HISTORY).files}


def test_old_directories_settle_and_are_not_listed_again(tmp_path: Path, ls_calls: list[str]) -> None:
    history(tmp_path, days=3)
    land(tmp_path, f"dt={NOW:%Y-%m-%d}/hour={NOW:%H}/now-1.parquet", NOW - timedelta(minutes=5))
    watch = ArrivalWatch("sales", FileStream(str(tmp_path), history=HISTORY))

    assert relatives(watch) == {f"dt={NOW:%Y-%m-%d}/hour={NOW:%H}/now-1.parquet"}
    first = len(ls_calls)
    assert first > 3 * 24  # the first look lists the whole history once

    land(tmp_path, f"dt={NOW:%Y-%m-%d}/hour={NOW:%H}/now-2.parquet", NOW)
    seen = relatives(watch)

    assert seen == {f"dt={NOW:%Y-%m-%d}/hour={NOW:%H}/now-{i}.parquet" for i in (1, 2)}
    assert len(ls_calls) - first == 3  # the stream's directory, today's, this hour's

    third = len(ls_calls)
    assert relatives(watch) == seen
    assert len(ls_calls) - third == 1  # nothing landed: the stream's directory only (the others' times are read)


def test_a_file_landing_in_a_settled_directory_below_a_listed_one_is_seen(tmp_path: Path, ls_calls: list[str]) -> None:
    land(tmp_path, "producer-a/1.parquet", NOW - timedelta(days=2))
    land(tmp_path, "producer-b/1.parquet", NOW - timedelta(minutes=1))
    watch = ArrivalWatch("sales", FileStream(str(tmp_path), history=HISTORY))
    assert relatives(watch) == {"producer-b/1.parquet"}

    land(tmp_path, "producer-a/2.parquet", NOW)  # the directory's time moves with the new entry

    assert relatives(watch) == {"producer-a/1.parquet", "producer-a/2.parquet", "producer-b/1.parquet"}


def test_a_removed_directory_is_forgotten_with_its_files(tmp_path: Path) -> None:
    land(tmp_path, "a/1.parquet", NOW)
    land(tmp_path, "b/1.parquet", NOW)
    watch = ArrivalWatch("sales", FileStream(str(tmp_path), history=HISTORY))
    assert relatives(watch) == {"a/1.parquet", "b/1.parquet"}
    shutil.rmtree(tmp_path / "a")
    assert relatives(watch) == {"b/1.parquet"}


def test_hidden_directories_and_markers(tmp_path: Path) -> None:
    land(tmp_path, "dt=1/_SUCCESS", NOW)
    land(tmp_path, "dt=1/part-0.parquet", NOW)
    land(tmp_path, "_temporary/0/part-0.parquet", NOW)
    watch = ArrivalWatch("sales", FileStream(str(tmp_path), history=HISTORY, close_marker="_SUCCESS"))
    listing = watch.look(NOW - HISTORY)
    assert [file.relative for file in listing.files] == ["dt=1/part-0.parquet"]
    assert [marker.relative for marker in listing.markers] == ["dt=1/_SUCCESS"]
