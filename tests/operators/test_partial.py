"""Static batches are cut by count on a real SQLite ledger: batch i freezes the untaken units
among the window's first `upto` in arrival order, leaving those an earlier batch has yet to take,
the last batch everything left once the input is final, and a retry keeps its first freeze."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, cast

import pytest
from airflow.sdk.exceptions import AirflowSkipException

from airflow_iqp.constants import BatchStatus, ExecutionPath, JobKind, Mode
from airflow_iqp.declaration import declare
from airflow_iqp.learning import LearnedCost
from airflow_iqp.ledger import session_scope, store
from airflow_iqp.operators import partial
from airflow_iqp.operators.partial import PartialAggregateOperator
from airflow_iqp.planning.record import PlanRecord, ReplanNote
from airflow_iqp.runtime.costs import expected_model, observe
from airflow_iqp.runtime.descriptors import StaticBatch
from airflow_iqp.runtime.inputs import ORIGIN, InputSpec
from airflow_iqp.streams.assign import select_window
from airflow_iqp.streams.files import DataFile, StreamListing
from airflow_iqp.streams.spec import FileStream
from tests.runtime.test_replan import PLANNED, planned_window, run_first_batch
from tests.runtime.test_replan import at as replanned_at

if TYPE_CHECKING:
    from pathlib import Path

    from airflow.sdk import Context

    from airflow_iqp.declaration import Declaration
    from airflow_iqp.streams.assign import WindowSelection

T0 = datetime(2026, 1, 1, 10, 0, tzinfo=UTC)
WINDOW = timedelta(minutes=2)
STREAMS = {"lineitem": FileStream("/data/lineitem")}


def landed(name: str, seconds: float) -> DataFile:
    return DataFile("lineitem", f"file:///data/lineitem/{name}", name, 10, T0 + timedelta(seconds=seconds))


def seen(files: list[DataFile], seconds: float) -> WindowSelection:
    """The window as a listing `seconds` after its start shows it."""
    return select_window(
        STREAMS,
        {"lineitem": StreamListing("lineitem", tuple(files))},
        start=T0,
        window=WINDOW,
        origin=ORIGIN,
        now=T0 + timedelta(seconds=seconds),
    )


@pytest.fixture(autouse=True)
def spark_submit(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tasks' Spark connection: their jobs run with spark-submit (none runs here)."""
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[1]"}))


@pytest.fixture
def declaration() -> Declaration:
    return declare(
        dag_id="iqp_q6",
        query="q6",
        window=WINDOW,
        deadline=WINDOW,
        streams=STREAMS,
        output="/results/{dag_id}/{window_start}",
    )


def batch_rows(bounds: list[tuple[int, int, int]]) -> list[dict[str, Any]]:
    """Ledger rows of planned batches, (index, first unit, last unit) each."""
    return [
        {
            "index": index,
            "first_tuple": first,
            "last_tuple": last,
            "release": T0,
            "latest_start": T0,
            "planned_start": T0,
            "predicted_cost": 1.0,
        }
        for index, first, last in bounds
    ]


def plan_window(url: str, bounds: list[tuple[int, int, int]], plan: PlanRecord | None = None) -> int:
    """A window of iqp_q6 planned as `bounds` (see `batch_rows`); its id."""
    with session_scope(url) as s:
        store.register_query(s, dag_id="iqp_q6", name="q6", sql="SELECT 1", mode=Mode.STATIC, params={})
        units = max(last for _, _, last in bounds)
        record = plan or PlanRecord()
        return store.record_plan(s, "iqp_q6", T0, T0 + WINDOW, T0 + 2 * WINDOW, units, record, batch_rows(bounds))


@pytest.fixture
def window(tmp_path: Path) -> tuple[str, int]:
    """A window planned as two batches: the first 2 units, then the rest."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    return url, plan_window(url, [(0, 1, 2), (1, 3, 4)])


def batch(declaration: Declaration, window_id: int, index: int, upto: int | None) -> PartialAggregateOperator:
    planned = StaticBatch(
        window_id=window_id,
        index=index,
        upto=upto,
        planned_start=T0,
        predicted_cost=1.0,
        input=InputSpec.of(STREAMS, T0, WINDOW).to_dict(),
    )
    return PartialAggregateOperator(
        task_id="partial_aggregate", batch=planned.to_dict(), declaration=declaration, work_dir="/tmp/work"
    )


def freeze(url: str, task: PartialAggregateOperator, selection: WindowSelection) -> dict[str, list[str]] | None:
    with session_scope(url) as s:
        index = task.work.take(s, selection)
        return next(b for b in store.window_summary(s, task.window_id).batches if b.index == index).files


def names(files: dict[str, list[str]] | None) -> list[str]:
    assert files is not None
    return [uri.rsplit("/", 1)[-1] for uri in files.get("lineitem", [])]


def test_batches_take_units_by_count_in_arrival_order(declaration: Declaration, window: tuple[str, int]) -> None:
    url, window_id = window
    files = [landed("z.parquet", 1), landed("a.parquet", 5), landed("m.parquet", 3)]
    assert names(freeze(url, batch(declaration, window_id, 0, 2), seen(files, 10))) == ["z.parquet", "m.parquet"]
    files += [landed("b.parquet", 30), landed("c.parquet", 119)]
    last = freeze(url, batch(declaration, window_id, 1, None), seen(files, 120))
    assert names(last) == ["a.parquet", "b.parquet", "c.parquet"]


def test_a_retry_keeps_the_first_freeze(declaration: Declaration, window: tuple[str, int]) -> None:
    url, window_id = window
    task = batch(declaration, window_id, 0, 2)
    first = freeze(url, task, seen([landed("a.parquet", 1), landed("b.parquet", 2)], 10))
    again = freeze(url, task, seen([landed("0.parquet", 0), landed("a.parquet", 1), landed("b.parquet", 2)], 20))
    assert names(again) == names(first) == ["a.parquet", "b.parquet"]


def test_a_later_batch_leaves_the_units_of_an_earlier_one_not_yet_frozen(
    declaration: Declaration, window: tuple[str, int]
) -> None:
    """A past window's batches are all ready at once and may run in any order: the plan's sizes hold."""
    url, window_id = window
    files = [landed(f"{n}.parquet", n) for n in range(1, 6)]
    assert names(freeze(url, batch(declaration, window_id, 1, None), seen(files, 120))) == [
        "3.parquet",
        "4.parquet",
        "5.parquet",
    ]
    assert names(freeze(url, batch(declaration, window_id, 0, 2), seen(files, 121))) == ["1.parquet", "2.parquet"]


def test_a_batch_whose_units_were_all_taken_is_skipped(declaration: Declaration, window: tuple[str, int]) -> None:
    url, window_id = window
    files = [landed("a.parquet", 1), landed("b.parquet", 2)]
    assert names(freeze(url, batch(declaration, window_id, 0, 2), seen(files, 10))) == ["a.parquet", "b.parquet"]
    with pytest.raises(AirflowSkipException, match="batch 1: none of the window's 2 unit"):
        freeze(url, batch(declaration, window_id, 1, None), seen(files, 120))


def test_a_skipped_batch_is_recorded_as_skipped(declaration: Declaration, window: tuple[str, int]) -> None:
    url, window_id = window
    files = [landed("a.parquet", 1), landed("b.parquet", 2)]
    freeze(url, batch(declaration, window_id, 0, 2), seen(files, 10))
    with pytest.raises(AirflowSkipException):
        freeze(url, batch(declaration, window_id, 1, None), seen(files, 120))
    with session_scope(url) as s:
        statuses = [b.status for b in store.window_summary(s, window_id).batches]
    assert statuses == [BatchStatus.PLANNED, BatchStatus.SKIPPED]


def test_fewer_units_than_planned_go_to_the_earlier_batch_whatever_the_order(
    declaration: Declaration, window: tuple[str, int]
) -> None:
    url, window_id = window
    files = [landed("a.parquet", 1)]
    with pytest.raises(AirflowSkipException):
        freeze(url, batch(declaration, window_id, 1, None), seen(files, 120))
    assert names(freeze(url, batch(declaration, window_id, 0, 2), seen(files, 121))) == ["a.parquet"]


def test_an_empty_window_runs_its_last_batch_over_no_files(declaration: Declaration, window: tuple[str, int]) -> None:
    url, window_id = window
    other_window = [landed("early.parquet", -5), landed("next.parquet", 130)]
    with pytest.raises(AirflowSkipException):
        freeze(url, batch(declaration, window_id, 0, 2), seen(other_window, 120))
    assert freeze(url, batch(declaration, window_id, 1, None), seen(other_window, 120)) == {}


def test_a_batch_the_ledger_holds_done_is_not_run_again(
    declaration: Declaration, window: tuple[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Airflow 3.3 may fail an attempt that finished (a deferral's stale exit event): the retry
    returns the batch's output at once, without waiting for input or the resource."""
    url, window_id = window
    monkeypatch.setenv("AIRFLOW_CONN_IQP_DEFAULT", url)
    with session_scope(url) as s:
        store.start_batch(s, window_id, 0)
        store.finish_batch(s, window_id, 0, T0, T0 + timedelta(seconds=3), 20, 3.0, "/data/iqp/batch-0000-f4")
    pushed: dict[str, Any] = {}
    context = cast("Context", {"ti": SimpleNamespace(xcom_push=lambda key, value: pushed.update({key: value}))})
    assert batch(declaration, window_id, 0, 2).execute(context) == "/data/iqp/batch-0000-f4"
    assert pushed == {"output_location": "/data/iqp/batch-0000-f4"}
    assert batch(declaration, window_id, 1, None).done_output() is None


def moved(url: str, window_id: int, rows: list[tuple[int, int, int]]) -> None:
    """A replan (runtime.replan) of the batches not frozen: (index, first, last) each."""
    with session_scope(url) as s:
        note = ReplanNote(
            at=T0, after_batch=0, why="test", batches=len(rows), feasible=True, reason=None, blocking_left=0.0
        )
        store.record_replan(s, window_id, batch_rows(rows), T0 + WINDOW, note)


def test_a_batch_takes_units_as_far_as_its_replanned_end(declaration: Declaration, window: tuple[str, int]) -> None:
    """The descriptor's `upto` is the first plan's; the ledger's end is the one that counts."""
    url, window_id = window
    moved(url, window_id, [(0, 1, 3), (1, 4, 4)])
    files = [landed(f"{n}.parquet", n) for n in range(1, 6)]
    assert names(freeze(url, batch(declaration, window_id, 0, 2), seen(files, 10))) == [
        "1.parquet",
        "2.parquet",
        "3.parquet",
    ]
    assert names(freeze(url, batch(declaration, window_id, 1, None), seen(files, 120))) == ["4.parquet", "5.parquet"]


def test_a_batch_a_replan_left_without_units_skips_and_the_last_takes_the_rest(
    declaration: Declaration, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    window_id = plan_window(url, [(0, 1, 2), (1, 3, 4), (2, 5, 6)])
    files = [landed(f"{n}.parquet", n) for n in range(1, 7)]
    assert names(freeze(url, batch(declaration, window_id, 0, 2), seen(files, 10))) == ["1.parquet", "2.parquet"]
    moved(url, window_id, [(1, 3, 2), (2, 3, 6)])
    with pytest.raises(AirflowSkipException, match="batch 1: none"):
        freeze(url, batch(declaration, window_id, 1, 4), seen(files, 10))
    assert names(freeze(url, batch(declaration, window_id, 2, None), seen(files, 120))) == [
        f"{n}.parquet" for n in range(3, 7)
    ]


def test_a_frozen_batch_is_not_replanned(declaration: Declaration, window: tuple[str, int]) -> None:
    url, window_id = window
    freeze(url, batch(declaration, window_id, 0, 2), seen([landed("a.parquet", 1), landed("b.parquet", 2)], 10))
    with pytest.raises(ValueError, match="batch 0 has frozen its files"):
        moved(url, window_id, [(0, 1, 3)])


def test_a_static_batch_that_ended_late_replans_its_window(
    declaration: Declaration, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    monkeypatch.setenv("AIRFLOW_CONN_IQP_DEFAULT", url)
    window_id = planned_window(url)
    run_first_batch(url, window_id, start=6.5, seconds=7.0)
    task = batch(declaration, window_id, 0, 4)
    monkeypatch.setattr(task, "execution_path", lambda: ExecutionPath.SPARK_SUBMIT)
    monkeypatch.setattr(partial, "planning_model", lambda *_: PLANNED)
    task.work.recorded(0, replanned_at(13.5))
    with session_scope(url) as s:
        summary = store.window_summary(s, window_id)
    assert [r.after_batch for r in summary.plan.replans] == [0]
    assert summary.batches[1].last_tuple < 12


def test_a_replan_that_fails_leaves_the_batch_done_and_the_plan_as_it_was(
    declaration: Declaration, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    monkeypatch.setenv("AIRFLOW_CONN_IQP_DEFAULT", url)
    window_id = planned_window(url)
    run_first_batch(url, window_id, start=6.5, seconds=7.0)
    task = batch(declaration, window_id, 0, 4)
    monkeypatch.setattr(task, "execution_path", lambda: ExecutionPath.SPARK_SUBMIT)
    monkeypatch.setattr(partial, "planning_model", lambda *_: PLANNED)

    def refuse(*_: object) -> None:
        raise ValueError("total (3) is more than the arrival curve delivers (2)")

    monkeypatch.setattr(partial, "replan_window", refuse)
    task.work.recorded(0, replanned_at(13.5))
    with session_scope(url) as s:
        summary = store.window_summary(s, window_id)
    assert summary.batches[0].status == BatchStatus.DONE
    assert summary.plan.replans == ()
    assert [b.last_tuple for b in summary.batches] == [4, 12, 20]


def test_a_planned_batch_is_priced_again_when_it_is_cut(declaration: Declaration, tmp_path: Path) -> None:
    """A window is planned at its start, before the previous window's last jobs ran: a batch cut
    after a refit is priced by the model then (times the plan's margin), as a dynamic batch is,
    and a retry keeps the price of its cut."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    plan = PlanRecord(rows_per_file=10_000, margin={"partial": 0.25})
    window_id = plan_window(url, [(0, 1, 2), (1, 3, 4)], plan)
    files = [landed(f"{n}.parquet", n) for n in range(1, 6)]

    def learned(seconds: float) -> float:
        """Jobs of 20k and 40k rows and a merge took `seconds` (the merge 1 s): the stored model's 20k rows."""
        with session_scope(url) as s:
            for rows, took in ((20_000, seconds), (40_000, 1.5 * seconds)):
                observe(s, declaration, ExecutionPath.SPARK_SUBMIT, JobKind.PARTIAL, rows, took)
            observe(s, declaration, ExecutionPath.SPARK_SUBMIT, JobKind.MERGE, 2, 1.0)
            model = expected_model(s, declaration, ExecutionPath.SPARK_SUBMIT)
        assert isinstance(model, LearnedCost)
        return model.partial.cost(20_000)

    def price(index: int) -> float:
        with session_scope(url) as s:
            return store.window_summary(s, window_id).batches[index].predicted_cost

    expected = learned(2.0)
    first = batch(declaration, window_id, 0, 2)
    freeze(url, first, seen(files, 10))
    assert price(0) == pytest.approx(expected * 1.25)
    assert price(1) == 1.0  # not cut yet: the plan's price
    slower = learned(4.0)
    assert slower > 1.2 * expected
    freeze(url, first, seen(files, 20))  # a retry: the files and the price of its cut
    assert price(0) == pytest.approx(expected * 1.25)
    freeze(url, batch(declaration, window_id, 1, None), seen(files, 120))  # 3 units at 10k rows
    with session_scope(url) as s:
        now = expected_model(s, declaration, ExecutionPath.SPARK_SUBMIT)
    assert now is not None
    assert price(1) == pytest.approx(now.partial.cost(30_000) * 1.25)
