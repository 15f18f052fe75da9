"""One listing per stream per look: looks of the same moment share it, the first look after the
TTL lists again; and each kind of stream is listed as narrowly as it allows.
"""

from __future__ import annotations

import os
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest

from airflow_iqp.streams.files import StreamListing
from airflow_iqp.streams.spec import FileStream
from airflow_iqp.streams.watch import LOOK_TTL, SharedListings, window_listing

if TYPE_CHECKING:
    from pathlib import Path


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def producer(calls: list[int]) -> StreamListing:
    calls.append(1)
    return StreamListing(stream=f"listing {len(calls)}", files=())


def test_a_listing_is_shared_within_the_ttl_and_listed_again_after_it() -> None:
    clock = Clock()
    shared = SharedListings(ttl=0.5, clock=clock)
    calls: list[int] = []
    first = shared.get("sales", lambda: producer(calls))
    clock.now += 0.4
    assert shared.get("sales", lambda: producer(calls)) is first
    assert shared.get("orders", lambda: producer(calls)).stream == "listing 2"  # another key lists on its own
    clock.now += 0.1
    assert shared.get("sales", lambda: producer(calls)).stream == "listing 3"


def test_looks_of_the_same_moment_wait_for_the_one_listing() -> None:
    shared = SharedListings(ttl=60)
    calls: list[int] = []
    started = threading.Event()

    def slow() -> StreamListing:
        started.set()
        time.sleep(0.2)
        return producer(calls)

    results: list[StreamListing] = []
    threads = [threading.Thread(target=lambda: results.append(shared.get("sales", slow))) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert started.is_set()
    assert calls == [1]
    assert {id(result) for result in results} == {id(results[0])}


def test_a_failed_listing_is_not_kept() -> None:
    shared = SharedListings(ttl=60)

    def fails() -> StreamListing:
        raise OSError("store down")

    with pytest.raises(OSError, match="store down"):
        shared.get("sales", fails)
    assert shared.get("sales", lambda: StreamListing("sales", ())).stream == "sales"


def land(root: Path, relative: str, at: datetime) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"rows")
    os.utime(path, (at.timestamp(), at.timestamp()))


def no_anchor(stream: FileStream, before: datetime) -> tuple[str, ...]:
    raise AssertionError("only an ordered stream's look asks for an anchor")


def test_each_kind_of_stream_lists_what_a_look_needs(tmp_path: Path) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    start = datetime(2026, 3, 4, 8, tzinfo=UTC)
    hour = timedelta(hours=1)
    land(tmp_path / "path", "dt=2026-03-04/hour=08/a.parquet", now)
    land(tmp_path / "path", "dt=2026-03-04/hour=09/b.parquet", now)
    land(tmp_path / "whole", "old/a.parquet", now - timedelta(days=30))
    os.utime(tmp_path / "whole" / "old", ((now - timedelta(days=30)).timestamp(),) * 2)
    by_path = FileStream(str(tmp_path / "path"), window_by="path", pattern="dt={date}/hour={hour}")
    whole = FileStream(str(tmp_path / "whole"))

    assert [f.relative for f in window_listing("p", by_path, start, hour, now, no_anchor).files] == [
        "dt=2026-03-04/hour=08/a.parquet"
    ]
    assert [f.relative for f in window_listing("w", whole, start, hour, now, no_anchor).files] == ["old/a.parquet"]

    watched = FileStream(str(tmp_path / "whole"), history=timedelta(days=1))
    assert window_listing("w", watched, start, hour, now, no_anchor).files == ()  # settled: older than the horizon
    time.sleep(LOOK_TTL)
    land(tmp_path / "whole", "new/b.parquet", now)
    assert [f.relative for f in window_listing("w", watched, start, hour, now, no_anchor).files] == ["new/b.parquet"]


def test_an_ordered_stream_s_look_passes_over_what_its_anchor_settles(tmp_path: Path, ls_calls: list[str]) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    hour = timedelta(hours=1)
    for relative in ("dt=01/a.parquet", "dt=02/b.parquet", "dt=03/c.parquet", "dt=04/d.parquet"):
        land(tmp_path, relative, now)
    stream = FileStream(str(tmp_path), history=hour, ordered=True)
    asked: list[datetime] = []

    def anchor(of: FileStream, before: datetime) -> tuple[str, ...]:
        asked.append(before)
        return ("dt=03",)

    listing = window_listing("o", stream, now - hour / 2, hour, now, anchor)

    assert [f.relative for f in listing.files] == ["dt=03/c.parquet", "dt=04/d.parquet"]
    assert asked == [now - 2 * stream.horizon(hour)]  # type: ignore[operator]
    assert sorted(ls_calls) == sorted([str(tmp_path), str(tmp_path / "dt=03"), str(tmp_path / "dt=04")])
