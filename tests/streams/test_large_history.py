"""A stream with a long generated history (tens of thousands of small files on local disk): a
waiting look at one window sees exactly the window's input, a late file included, while it lists
a handful of directories where the whole listing lists them all.
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from sqlalchemy import update

from airflow_iqp.constants import Mode
from airflow_iqp.ledger import session_scope, store
from airflow_iqp.ledger.models import StreamFile
from airflow_iqp.planning.record import PlanRecord
from airflow_iqp.runtime.inputs import InputSpec
from airflow_iqp.streams.files import DataFile
from airflow_iqp.streams.spec import FileStream
from airflow_iqp.streams.watch import LOOK_TTL

if TYPE_CHECKING:
    from pathlib import Path

    import pytest

HOUR = timedelta(hours=1)
MINUTE = timedelta(minutes=1)
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


def record_history(url: str, dag_id: str, root: Path, first: datetime, hours: int) -> None:
    """Each hour of `hive_history` a window whose one batch froze that hour's files, recorded
    by the ledger ten minutes after the hour (what a live run's freeze would have stamped).
    """
    with session_scope(url) as s:
        store.register_query(s, dag_id=dag_id, name="events", sql="SELECT 1", mode=Mode.STATIC, params={})
        for h in range(hours):
            at = first + h * HOUR
            batch = {"index": 0, "first_tuple": 1, "last_tuple": 1, "release": at, "latest_start": at}
            row = {**batch, "planned_start": at, "predicted_cost": 1.0}
            window_id = store.record_plan(s, dag_id, at, at + HOUR, at + 2 * HOUR, 1, PlanRecord(), [row])
            relative = f"dt={at:%Y-%m-%d}/hour={at:%H}"
            files = [
                DataFile("events", f"file://{root}/{relative}/part-{i:03d}.parquet", "", 0, at + timedelta(seconds=i))
                for i in range(PER_HOUR)
            ]
            store.freeze_files(s, window_id, 0, {"events": files})
            s.execute(update(StreamFile).where(StreamFile.window_id == window_id).values(recorded_at=at + 70 * MINUTE))


def test_an_ordered_arrival_stream_lists_what_landed_since_not_its_history(
    tmp_path: Path, ls_calls: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two ordered streams, 24 and 240 hours of history, each recorded in a real SQLite ledger:
    a task's look and a fresh process's first waiting look list as many directories for both,
    and the window's units are the whole listing's, a file landed late in a partition inside
    the history included.
    """
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    monkeypatch.setenv("AIRFLOW_CONN_IQP_DEFAULT", url)
    start = datetime(2026, 3, 10, 12, tzinfo=UTC)  # the window [12:00, 13:00); its files land from now on
    now = start + 50 * MINUTE
    history = 2 * HOUR
    calls = {}
    for hours in (24, 240):
        root = tmp_path / f"events-{hours}"
        hive_history(root, start - hours * HOUR, hours=hours, modified=True)  # ends with hour=11
        record_history(url, f"iqp_{hours}", root, start - hours * HOUR, hours)
        current = root / f"dt={start:%Y-%m-%d}" / f"hour={start:%H}"
        current.mkdir()
        landed = [current / "a.parquet", root / f"dt={start:%Y-%m-%d}" / "hour=10" / "late.parquet"]
        for i, path in enumerate(landed):  # the second in a partition quiet for 1 h 50 min: inside the history
            path.touch()
            os.utime(path, ((start + (i + 1) * MINUTE).timestamp(),) * 2)
        stream = FileStream(str(root), lateness=5 * MINUTE, history=history, ordered=True)
        spec = InputSpec.of({"events": stream}, start, HOUR)

        ls_calls.clear()
        own = spec.look_own(now=now)
        own_calls = list(ls_calls)
        ls_calls.clear()
        waiting = spec.look_window(now=now)  # this process's first look at the stream
        first_look = len(ls_calls)
        ls_calls.clear()
        whole = spec.look(now=now)
        calls[hours] = (len(own_calls), first_look, len(ls_calls))

        relatives = {unit.relative for unit in own.units}
        assert relatives == {str(path.relative_to(root)) for path in landed}
        assert own.units == whole.units == waiting.units
        assert not own.final
        # The anchor is hour=08, the newest partition with a file recorded before 10:00 (the
        # window's start less the history): its day and the days before it are not listed.
        assert str(root / f"dt={start - 24 * HOUR:%Y-%m-%d}") not in own_calls
        assert str(root / f"dt={start:%Y-%m-%d}" / "hour=08") in own_calls
        assert str(root / f"dt={start:%Y-%m-%d}" / "hour=07") not in own_calls

        ls_calls.clear()
        back = spec.look_back(now=now)  # a plan's check of a past window: its units and earlier ones
        assert back.units == whole.units
        assert back.earlier
        assert len(ls_calls) == len(own_calls)

        since = now - history  # late files: the windows that ended within the history
        recent = spec.recent_units(now=now)
        assert recent == [u for u in (*whole.earlier, *whole.units) if u.window_start + HOUR > since]

        against = root / f"dt={start:%Y-%m-%d}" / "hour=05" / "against.parquet"
        against.touch()  # in a partition quiet for longer than the history: what `ordered` declares does not happen
        os.utime(against, ((start + 3 * MINUTE).timestamp(),) * 2)
        assert str(against.relative_to(root)) not in {u.relative for u in spec.look_own(now=now).units}
        assert str(against.relative_to(root)) in {u.relative for u in spec.look(now=now).units}

    assert calls[24][:2] == calls[240][:2]  # the same directories listed, whatever the history
    assert calls[24][0] <= 7  # the stream, its day, and the hours from 08 on
    assert calls[24][1] <= 8  # the stream, its day, and the hours from 07 on: twice the history back
    assert calls[240][2] > 240  # the whole listing: every partition
