"""The tests' own window oracle (tests/oracle.py) against hand-written windows."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from tests.oracle import arrived_in, hive_hour, landed, units_in, window_of

if TYPE_CHECKING:
    from pathlib import Path

T0 = datetime(2026, 1, 1, 10, 0, tzinfo=UTC)
ORIGIN = datetime(2000, 1, 1, tzinfo=UTC)
TEN = timedelta(minutes=10)
US = timedelta(microseconds=1)


def land(path: Path, at: datetime) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"rows")
    ns = (at - datetime(1970, 1, 1, tzinfo=UTC)) // US * 1000
    os.utime(path, ns=(ns, ns))
    return path


def test_a_window_holds_its_start_and_not_its_end() -> None:
    assert window_of(T0, TEN, ORIGIN) == T0
    assert window_of(T0 + TEN - US, TEN, ORIGIN) == T0
    assert window_of(T0 + TEN, TEN, ORIGIN) == T0 + TEN
    assert window_of(T0 - US, TEN, ORIGIN) == T0 - TEN
    assert window_of(T0, TEN, ORIGIN + timedelta(minutes=3)) == T0 - timedelta(minutes=7)


def test_landed_files_by_modification_time_without_what_writers_leave_beside(tmp_path: Path) -> None:
    land(tmp_path / "a.parquet", T0)
    land(tmp_path / "day=1" / "b.parquet", T0 + TEN - US)
    land(tmp_path / ".a.parquet.tmp", T0)
    land(tmp_path / "_SUCCESS", T0)
    land(tmp_path / "_temporary" / "0" / "c.parquet", T0)
    assert landed(tmp_path) == {"a.parquet": T0, "day=1/b.parquet": T0 + TEN - US}


def test_arrived_in_is_half_open_and_aligns_streams_by_relative_path(tmp_path: Path) -> None:
    orders, lineitem = tmp_path / "orders", tmp_path / "lineitem"
    land(orders / "p1.parquet", T0)
    land(lineitem / "p1.parquet", T0 + TEN - US)
    land(orders / "p2.parquet", T0 + timedelta(minutes=1))
    land(lineitem / "p2.parquet", T0 + TEN)  # the latest member is in the next window
    land(orders / "p3.parquet", T0)  # no lineitem partner
    window = arrived_in({"orders": orders, "lineitem": lineitem}, T0, T0 + TEN)
    assert window == {"orders": [f"{orders}/p1.parquet"], "lineitem": [f"{lineitem}/p1.parquet"]}
    assert arrived_in({"orders": orders}, T0 - TEN, T0) == {}


def test_units_by_path_need_a_time_in_every_stream() -> None:
    assert hive_hour("dt=2026-01-01/hour=3/part-0.parquet") == datetime(2026, 1, 1, 3, tzinfo=UTC)
    assert hive_hour("stray.parquet") is None
    hour = timedelta(hours=1)
    start = datetime(2026, 1, 1, 3, tzinfo=UTC)
    times: dict[str, dict[str, datetime | None]] = {
        "a": {"x": start, "y": start + hour, "z": None},
        "b": {"x": start - hour, "y": start, "z": start},
    }
    assert units_in(times, start, start + hour) == ["x"]
    assert units_in(times, start + hour, start + 2 * hour) == ["y"]
