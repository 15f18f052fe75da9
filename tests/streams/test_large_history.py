"""A stream with a long generated history (tens of thousands of small files on local disk): a
waiting look at one window sees exactly the window's input, a late file included, while it lists
a handful of directories where the whole listing lists them all.
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from airflow_iqp.runtime.inputs import InputSpec
from airflow_iqp.streams.spec import FileStream
from airflow_iqp.streams.watch import LOOK_TTL

if TYPE_CHECKING:
    from pathlib import Path

HOUR = timedelta(hours=1)
PER_HOUR = 50


def hive_history(root: Path, first: datetime, hours: int, modified: bool) -> None:
    """`PER_HOUR` empty files in each `dt=/hour=` partition from `first` on; with `modified`,
    each file and partition gets the time of its hour (as an arrival stream's would).
    """
    for h in range(hours):
        at = first + h * HOUR
        directory = root / f"dt={at:%Y-%m-%d}" / f"hour={at:%H}"
        directory.mkdir(parents=True, exist_ok=True)
        for i in range(PER_HOUR):
            path = directory / f"part-{i:03d}.parquet"
            path.touch()
            if modified:
                stamp = (at + timedelta(seconds=i)).timestamp()
                os.utime(path, (stamp, stamp))
        if modified:
            for changed in (directory, directory.parent):
                os.utime(changed, (at.timestamp(), at.timestamp()))


def test_a_path_window_sees_exactly_its_files_over_twenty_thousand(tmp_path: Path, ls_calls: list[str]) -> None:
    first = datetime(2026, 1, 1, tzinfo=UTC)
    hive_history(tmp_path, first, hours=400, modified=False)  # 20,000 files over 17 days
    start = first + 200 * HOUR
    stream = FileStream(str(tmp_path), window_by="path", pattern="dt={date}/hour={hour}", lateness=HOUR)
    spec = InputSpec.of({"events": stream}, start, HOUR)
    late = tmp_path / f"dt={start:%Y-%m-%d}" / f"hour={start:%H}" / "late.parquet"
    late.touch()  # written now, long after its window's end: its path puts it in the window

    waiting = spec.look_window(now=start + HOUR / 2)
    pruned_calls = len(ls_calls)
    whole = spec.look(now=start + HOUR / 2)

    expected = {f"dt={start:%Y-%m-%d}/hour={start:%H}/part-{i:03d}.parquet" for i in range(PER_HOUR)}
    assert {unit.relative for unit in waiting.units} == expected | {str(late.relative_to(tmp_path))}
    assert waiting.units == whole.units
    assert not waiting.final
    assert spec.look_window(now=start + 2 * HOUR).final
    assert pruned_calls == 3  # the stream, its day, its hour
    assert len(ls_calls) - pruned_calls > 400  # the whole listing: every partition


def test_an_arrival_window_sees_what_lands_and_settled_partitions_are_not_listed(
    tmp_path: Path, ls_calls: list[str]
) -> None:
    now = datetime.now(UTC)
    start = now.replace(minute=0, second=0, microsecond=0)
    hive_history(tmp_path, start - 200 * HOUR, hours=200, modified=True)  # 10,000 files, the last an hour ago
    stream = FileStream(str(tmp_path), lateness=timedelta(minutes=5), history=2 * HOUR)
    spec = InputSpec.of({"sales": stream}, start, HOUR)

    assert spec.look_window(now=now).units == ()
    first_look = len(ls_calls)
    current = tmp_path / f"dt={start:%Y-%m-%d}" / f"hour={start:%H}"
    current.mkdir(parents=True, exist_ok=True)
    (current / "a.parquet").touch()
    copied = tmp_path / "backfill" / "b.parquet"  # copied later, keeping a time inside the window
    copied.parent.mkdir()
    copied.touch()
    os.utime(copied, (start.timestamp() + 1, start.timestamp() + 1))
    time.sleep(LOOK_TTL)  # the next tick's look
    waiting = spec.look_window(now=now)
    second_look = len(ls_calls) - first_look

    assert {unit.relative for unit in waiting.units} == {
        f"{current.relative_to(tmp_path)}/a.parquet",
        "backfill/b.parquet",
    }
    assert waiting.units == spec.look(now=now).units
    assert first_look > 200  # the first look of a process lists every partition once
    assert second_look <= 8  # then the stream, and the partitions that received files within the horizon


def test_a_task_looks_at_its_path_window_only_and_late_files_back_to_the_horizon(
    tmp_path: Path, ls_calls: list[str]
) -> None:
    first = datetime(2026, 1, 1, tzinfo=UTC)
    hive_history(tmp_path, first, hours=400, modified=False)  # 20,000 files over 17 days
    start = first + 300 * HOUR
    history = timedelta(days=2)
    stream = FileStream(str(tmp_path), window_by="path", pattern="dt={date}/hour={hour}", history=history)
    spec = InputSpec.of({"events": stream}, start, HOUR)
    now = start + 2 * HOUR
    late = tmp_path / f"dt={start - 24 * HOUR:%Y-%m-%d}" / f"hour={start - 24 * HOUR:%H}" / "late.parquet"
    late.touch()  # a day late: inside the two days files may land in
    too_late = tmp_path / f"dt={start - 72 * HOUR:%Y-%m-%d}" / f"hour={start - 72 * HOUR:%H}" / "late.parquet"
    too_late.touch()  # three days late: its window is beyond the horizon

    own = spec.look_own(now=now)
    own_calls = len(ls_calls)
    recent = spec.recent_units(now=now)
    recent_calls = len(ls_calls) - own_calls
    whole = spec.look(now=now)

    assert own.units == whole.units
    assert len(own.units) == PER_HOUR
    assert own.final
    assert own_calls == 3  # the stream, its day, its hour
    since = now - history
    expected = [u for u in (*whole.earlier, *whole.units) if u.window_start + HOUR > since]
    assert recent == expected
    assert len(recent) == PER_HOUR * 47 + 1  # the hours that ended within two days of now, and the late file
    assert str(late.relative_to(tmp_path)) in {u.relative for u in recent}
    assert str(too_late.relative_to(tmp_path)) not in {u.relative for u in recent}
    assert recent_calls < 60  # the stream, three days, 48 hours; the whole listing reads every partition
