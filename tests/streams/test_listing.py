"""Listing local stream directories that no iqp command wrote: random names, hidden files, Hive
partitions; then cutting them into windows.
"""

from __future__ import annotations

import os
import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_iqp.streams.assign import select_window
from airflow_iqp.streams.listing import ListingError, _etag, _modified, list_files
from airflow_iqp.streams.spec import FileStream
from tests.streams import ORIGIN, T0

if TYPE_CHECKING:
    from pathlib import Path

TEN = timedelta(minutes=10)


def write_parquet(path: Path, rows: int, modified: datetime) -> Path:
    """A made-up schema; the file's modification time is set to `modified`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.table({"sale_id": list(range(rows)), "amount": [1.5 * i for i in range(rows)]})
    pq.write_table(table, path)
    os.utime(path, (modified.timestamp(), modified.timestamp()))
    return path


def hidden_files(directory: Path) -> None:
    """What writers leave beside data: markers, temp names, a job's temporary directory."""
    (directory / "_temporary" / "0").mkdir(parents=True, exist_ok=True)
    (directory / "_temporary" / "0" / "part-0.parquet").write_bytes(b"half written")
    (directory / ".tmp-upload.parquet").write_bytes(b"half written")
    (directory / ".part-0.parquet.crc").write_bytes(b"crc")


def test_arrival_stream_lists_data_in_arrival_order_and_skips_hidden_files(tmp_path: Path) -> None:
    sales = tmp_path / "sales"
    arrivals = [T0 + timedelta(minutes=m) for m in (7, 1, 12, 4)]
    written = [write_parquet(sales / f"{uuid.uuid4().hex}.parquet", 3 + i, at) for i, at in enumerate(arrivals)]
    hidden_files(sales)
    marker = sales / "_SUCCESS"
    marker.write_bytes(b"")
    os.utime(marker, ((T0 + TEN - timedelta(seconds=1)).timestamp(),) * 2)

    listing = list_files("sales", FileStream(str(sales), close_marker="_SUCCESS"))

    by_arrival = sorted(written, key=lambda path: path.stat().st_mtime)
    assert [file.uri for file in listing.files] == [f"file://{path}" for path in by_arrival]
    assert [file.relative for file in listing.files] == [path.name for path in by_arrival]
    assert [file.modified for file in listing.files] == sorted(arrivals)
    assert [file.size for file in listing.files] == [path.stat().st_size for path in by_arrival]
    assert {file.stream for file in listing.files} == {"sales"}
    assert [marker.relative for marker in listing.markers] == ["_SUCCESS"]

    stream = FileStream(str(sales), close_marker="_SUCCESS", lateness=TEN)
    selection = select_window({"sales": stream}, {"sales": listing}, start=T0, window=TEN, origin=ORIGIN, now=T0)
    assert [unit.relative for unit in selection.units] == [path.name for path in by_arrival[:3]]
    assert [unit.relative for unit in selection.later] == [by_arrival[3].name]
    assert selection.final, "the marker modified inside the window closes it before its lateness passed"


def test_hive_partitions_by_path(tmp_path: Path) -> None:
    events = tmp_path / "events"
    late = T0 + timedelta(hours=5)  # written long after its hour: the path decides
    ten = [write_parquet(events / "dt=2026-01-01" / "hour=10" / f"part-{uuid.uuid4().hex}.parquet", 2, late)]
    ten.append(write_parquet(events / "dt=2026-01-01" / "hour=10" / f"part-{uuid.uuid4().hex}.parquet", 2, T0))
    eleven = write_parquet(events / "dt=2026-01-01" / "hour=11" / "part-0.parquet", 2, T0)
    stray = write_parquet(events / "misc" / "part-0.parquet", 2, T0)
    hidden_files(events / "dt=2026-01-01" / "hour=10")
    (events / "dt=2026-01-01" / "hour=10" / "_SUCCESS").write_bytes(b"")
    (events / "dt=2026-01-01" / "hour=10" / "_temporary" / "_SUCCESS").write_bytes(b"")

    stream = FileStream(
        f"file://{events}/",
        window_by="path",
        pattern="dt={date}/hour={hour}",
        lateness=timedelta(days=1),
        close_marker="_SUCCESS",
    )
    listing = list_files("events", stream)
    assert len(listing.files) == 4
    assert [marker.relative for marker in listing.markers] == ["dt=2026-01-01/hour=10/_SUCCESS"]
    assert all(file.uri == f"file://{events}/{file.relative}" for file in listing.files)

    hour = timedelta(hours=1)
    start = T0 + 10 * hour
    selection = select_window({"events": stream}, {"events": listing}, start=start, window=hour, origin=ORIGIN, now=T0)
    assert [unit.relative for unit in selection.units] == [str(path.relative_to(events)) for path in reversed(ten)]
    assert [unit.relative for unit in selection.later] == [str(eleven.relative_to(events))]
    assert [file.relative for file in selection.unassigned] == [str(stray.relative_to(events))]
    assert selection.final, "hour=10's _SUCCESS closes it; the one in _temporary/ is no marker"
    next_hour = select_window(
        {"events": stream}, {"events": listing}, start=start + hour, window=hour, origin=ORIGIN, now=T0
    )
    assert not next_hour.final


def test_a_missing_directory_is_empty_only_if_its_parent_exists(tmp_path: Path) -> None:
    assert list_files("sales", FileStream(str(tmp_path / "not-yet"))).files == ()
    with pytest.raises(ListingError, match=r"stream 'sales': cannot list .*/no-such-mount/sales"):
        list_files("sales", FileStream(str(tmp_path / "no-such-mount" / "sales")))


def test_a_scheme_no_filesystem_serves_is_an_error() -> None:
    with pytest.raises(ListingError, match=r"stream 'sales': cannot list nosuchfs://bucket/sales/"):
        list_files("sales", FileStream("nosuchfs://bucket/sales/"))


def test_a_file_is_no_stream_directory(tmp_path: Path) -> None:
    path = write_parquet(tmp_path / "one.parquet", 1, T0)
    with pytest.raises(ListingError, match="is a file; give the directory"):
        list_files("sales", FileStream(str(path)))


def test_a_new_file_shows_up_in_the_next_listing(tmp_path: Path) -> None:
    stream = FileStream(str(tmp_path))
    write_parquet(tmp_path / "a.parquet", 1, T0)
    assert len(list_files("sales", stream).files) == 1
    write_parquet(tmp_path / "b.parquet", 1, T0)
    assert len(list_files("sales", stream).files) == 2


@pytest.mark.parametrize(
    "info",
    [
        {"mtime": T0.timestamp(), "created": 0.0},
        {"LastModified": T0.astimezone(timezone(timedelta(hours=-7)))},  # s3fs: the client's local zone
        {"last_modified": T0.replace(tzinfo=None)},
        {"updated": "2026-01-01T00:00:00Z"},
        {"updated": "2026-01-01T01:00:00+01:00"},
        {"created": T0.timestamp()},
    ],
)
def test_modification_time_from_any_filesystem(info: dict[str, object]) -> None:
    assert _modified(info, "sales", "x://b/a") == T0


def test_no_modification_time_is_an_error_naming_the_fields() -> None:
    with pytest.raises(ListingError, match=r"no modification time for x://b/a.*\['name', 'size'\]"):
        _modified({"name": "b/a", "size": 1}, "sales", "x://b/a")
    with pytest.raises(ListingError, match="updated='last tuesday', no ISO 8601 time"):
        _modified({"updated": "last tuesday"}, "sales", "x://b/a")


def test_etag_without_quotes() -> None:
    assert _etag({"ETag": '"abc"'}) == "abc"
    assert _etag({"etag": "abc"}) == "abc"
    assert _etag({"mtime": 1.0}) is None
    assert datetime.fromtimestamp(0, UTC) < T0
