"""`late_files`: which listed units it records as late (and on which window), which it hands to a
re-merge, and which rewritten files it refuses, on a real SQLite ledger."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest
from sqlalchemy import select

from airflow_iqp.constants import FileStatus, Mode, WindowStatus
from airflow_iqp.declaration import declare
from airflow_iqp.ledger import session_scope, store
from airflow_iqp.ledger.models import StreamFile
from airflow_iqp.ledger.prune import prune
from airflow_iqp.operators.late import LateFilesOperator
from airflow_iqp.planning.record import PlanRecord
from airflow_iqp.runtime.inputs import InputSpec, retention
from airflow_iqp.streams.assign import InputUnit
from airflow_iqp.streams.files import DataFile
from airflow_iqp.streams.spec import FileStream

if TYPE_CHECKING:
    from pathlib import Path

    from sqlalchemy.orm import Session

DAG_ID = "iqp_q6"
WINDOW = timedelta(minutes=2)
W0 = datetime(2026, 1, 1, 10, 0, tzinfo=UTC)  # merged
W1 = W0 + WINDOW  # still running
W2 = W1 + WINDOW  # its merge failed
W3 = W2 + WINDOW  # never ran
FROZEN_AT = W0 + timedelta(seconds=30)


def data_file(name: str, size: int = 100, modified: datetime = FROZEN_AT) -> DataFile:
    return DataFile("lineitem", f"file:///data/lineitem/{name}", name, size, modified)


def unit(file: DataFile, window_start: datetime) -> InputUnit:
    return InputUnit(file.relative, (file,), file.modified, window_start)


def batch_row(start: datetime) -> dict[str, object]:
    return {
        "index": 0,
        "first_tuple": 1,
        "last_tuple": 1,
        "release": start,
        "latest_start": start,
        "planned_start": start,
        "predicted_cost": 1.0,
    }


def plan_window(session: Session, start: datetime) -> int:
    return store.record_plan(
        session, DAG_ID, start, start + WINDOW, start + 2 * WINDOW, 1, PlanRecord(), [batch_row(start)]
    )


@pytest.fixture
def ledger(tmp_path: Path) -> tuple[str, dict[datetime, int]]:
    """W0 merged with one frozen file, W1 running, W2 failed in its merge; W3 never planned."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with session_scope(url) as s:
        store.register_query(s, dag_id=DAG_ID, name="q6", sql="SELECT 1", mode=Mode.STATIC, params={})
        windows = {start: plan_window(s, start) for start in (W0, W1, W2)}
        store.freeze_files(s, windows[W0], 0, {"lineitem": [data_file("counted.parquet")]})
        store.start_batch(s, windows[W0], 0)
        store.finish_batch(s, windows[W0], 0, FROZEN_AT, FROZEN_AT, 10, 1.0, "/data/iqp/batch-0000")
        store.record_merge(s, windows[W0], W0 + WINDOW, 10, "/data/iqp/result")
        store.start_batch(s, windows[W1], 0)
        store.record_merge(s, windows[W2], W2 + WINDOW, None, None, status=WindowStatus.FAILED)
    return url, windows


@pytest.fixture
def late_files(tmp_path: Path) -> LateFilesOperator:
    declaration = declare(
        dag_id=DAG_ID,
        query="q6",
        window=WINDOW,
        deadline=WINDOW,
        streams={"lineitem": FileStream("/data/lineitem")},
        output="/results/{dag_id}/{window_start}",
    )
    return LateFilesOperator(task_id="late_files", declaration=declaration, work_dir=str(tmp_path / "work"))


def events(url: str) -> list[tuple[str, str, int | None, str | None]]:
    with session_scope(url) as s:
        rows = s.execute(
            select(StreamFile.uri, StreamFile.status, StreamFile.window_id, StreamFile.note)
            .where(StreamFile.status != FileStatus.FROZEN)
            .order_by(StreamFile.id)
        )
        return [(uri.rsplit("/", 1)[-1], status, window_id, note) for uri, status, window_id, note in rows]


def late_count(url: str, window_id: int) -> int:
    with session_scope(url) as s:
        return store.window_summary(s, window_id).late_files


def test_a_unit_of_a_merged_window_is_late_and_handed_to_the_remerge(
    ledger: tuple[str, dict[datetime, int]], late_files: LateFilesOperator
) -> None:
    url, windows = ledger
    late = unit(data_file("late.parquet", modified=W1 + timedelta(seconds=5)), W0)
    with session_scope(url) as s:
        found = late_files.record(s, [late])
    assert found == {W0: [late]}
    [(name, status, window_id, note)] = events(url)
    assert (name, status, window_id) == ("late.parquet", FileStatus.LATE, windows[W0])
    assert note is not None
    assert "after its window's merge started" in note
    assert late_count(url, windows[W0]) == 1


def test_a_late_file_is_recorded_once_however_often_it_is_listed(
    ledger: tuple[str, dict[datetime, int]], late_files: LateFilesOperator
) -> None:
    url, windows = ledger
    late = unit(data_file("late.parquet"), W0)
    for _ in range(3):
        with session_scope(url) as s:
            late_files.record(s, [late])
    assert [e[:2] for e in events(url)] == [("late.parquet", FileStatus.LATE)]
    assert late_count(url, windows[W0]) == 1


def test_a_unit_of_a_running_window_is_left_for_that_window(
    ledger: tuple[str, dict[datetime, int]], late_files: LateFilesOperator
) -> None:
    url, windows = ledger
    with session_scope(url) as s:
        assert late_files.record(s, [unit(data_file("coming.parquet"), W1)]) == {}
    assert events(url) == []
    assert late_count(url, windows[W1]) == 0


def test_a_unit_of_a_failed_window_is_recorded_but_not_remerged(
    ledger: tuple[str, dict[datetime, int]], late_files: LateFilesOperator
) -> None:
    url, windows = ledger
    with session_scope(url) as s:
        assert late_files.record(s, [unit(data_file("after-failure.parquet"), W2)]) == {}
    assert [e[:3] for e in events(url)] == [("after-failure.parquet", FileStatus.LATE, windows[W2])]
    assert late_count(url, windows[W2]) == 1


def test_a_unit_of_a_window_that_never_ran_is_recorded_without_a_window(
    ledger: tuple[str, dict[datetime, int]], late_files: LateFilesOperator
) -> None:
    url, _ = ledger
    with session_scope(url) as s:
        assert late_files.record(s, [unit(data_file("orphan.parquet"), W3)]) == {}
    [(name, status, window_id, note)] = events(url)
    assert (name, status, window_id) == ("orphan.parquet", FileStatus.LATE, None)
    assert note is not None
    assert "never ran" in note


def test_a_frozen_file_listed_again_unchanged_is_nothing_new(
    ledger: tuple[str, dict[datetime, int]], late_files: LateFilesOperator
) -> None:
    url, windows = ledger
    with session_scope(url) as s:
        assert late_files.record(s, [unit(data_file("counted.parquet"), W0)]) == {}
    assert events(url) == []
    assert late_count(url, windows[W0]) == 0


@pytest.mark.parametrize(
    "rewritten",
    [
        data_file("counted.parquet", size=101),
        data_file("counted.parquet", modified=FROZEN_AT + timedelta(seconds=1)),
    ],
)
def test_a_frozen_name_with_other_contents_is_refused_and_recorded_as_rewritten(
    ledger: tuple[str, dict[datetime, int]], late_files: LateFilesOperator, rewritten: DataFile
) -> None:
    url, windows = ledger
    with session_scope(url) as s:
        assert late_files.record(s, [unit(rewritten, W0)]) == {}
    [(name, status, window_id, note)] = events(url)
    assert (name, status, window_id) == ("counted.parquet", FileStatus.REWRITTEN, windows[W0])
    assert note is not None
    assert "the first version counted" in note
    with session_scope(url) as s:
        [frozen] = store.frozen_identities(s, DAG_ID, [rewritten.uri]).values()
    assert frozen.identity == data_file("counted.parquet").identity  # the first version still counts
    assert late_count(url, windows[W0]) == 0


def test_one_listing_sorts_every_kind_of_unit(
    ledger: tuple[str, dict[datetime, int]], late_files: LateFilesOperator
) -> None:
    url, windows = ledger
    late_a, late_b = unit(data_file("a.parquet"), W0), unit(data_file("b.parquet"), W0)
    listed = [
        late_a,
        unit(data_file("counted.parquet"), W0),
        unit(data_file("coming.parquet"), W1),
        late_b,
        unit(data_file("orphan.parquet"), W3),
    ]
    with session_scope(url) as s:
        assert late_files.record(s, listed) == {W0: [late_a, late_b]}
    assert sorted(e[:3] for e in events(url)) == sorted(
        [
            ("a.parquet", FileStatus.LATE, windows[W0]),
            ("b.parquet", FileStatus.LATE, windows[W0]),
            ("orphan.parquet", FileStatus.LATE, None),
        ]
    )
    assert late_count(url, windows[W0]) == 2


def test_a_file_of_a_pruned_window_beyond_the_horizon_is_not_late_again(tmp_path: Path) -> None:
    hour, old = timedelta(hours=1), datetime(2026, 1, 1, 10, tzinfo=UTC)
    landing = tmp_path / "lineitem"
    for start in (old, old + 200 * hour):
        partition = landing / f"dt={start:%Y-%m-%d}" / f"hour={start:%H}"
        partition.mkdir(parents=True)
        (partition / "part-0.parquet").touch()
    stream = FileStream(str(landing), window_by="path", pattern="dt={date}/hour={hour}", history=timedelta(days=1))
    declaration = declare(
        dag_id=DAG_ID,
        query="q6",
        window=hour,
        deadline=hour,
        streams={"lineitem": stream},
        output="/results/{dag_id}/{window_start}",
    )
    operator = LateFilesOperator(task_id="late_files", declaration=declaration, work_dir=str(tmp_path / "work"))
    now = old + 200 * hour + 2 * hour
    spec = InputSpec.of(declaration.streams, old + 200 * hour, hour)
    [counted] = [u for u in spec.look(now).earlier if u.window_start == old]
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with session_scope(url) as s:
        store.register_query(s, dag_id=DAG_ID, name="q6", sql="SELECT 1", mode=Mode.STATIC, params={})
        window_id = store.record_plan(s, DAG_ID, old, old + hour, old + 2 * hour, 1, PlanRecord(), [batch_row(old)])
        store.freeze_files(s, window_id, 0, {"lineitem": list(counted.files)})
        store.start_batch(s, window_id, 0)
        store.record_merge(s, window_id, old + hour, 1, "/data/iqp/result")
        current = old + 200 * hour  # this run's window, merged: its file counted
        window_id = store.record_plan(s, DAG_ID, current, current + hour, now, 1, PlanRecord(), [batch_row(current)])
        store.freeze_files(s, window_id, 0, {"lineitem": list(spec.look(now).units[0].files)})
        store.record_merge(s, window_id, now, 1, "/data/iqp/result")
    with session_scope(url) as s:
        prune(s, [retention(declaration)], timedelta(days=2), now)

    with session_scope(url) as s:
        assert operator.record(s, spec.recent_units(now)) == {}
    assert events(url) == []
    with session_scope(url) as s:  # what the whole listing of every earlier window did
        assert operator.record(s, list(spec.look(now).earlier)) == {old: [counted]}
