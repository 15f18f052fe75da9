"""The `plan` task on a real SQLite ledger: which plan a window gets (historical, calibration,
no rate yet, the paper's static plan, dynamic slots) and what it hands to `partial_aggregate`."""

from __future__ import annotations

import json
import os
import re
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, cast

import pytest
from airflow.sdk.api.datamodels._generated import DagRunType

from airflow_iqp.constants import ExecutionPath, Mode
from airflow_iqp.dag_files import plan_tasks
from airflow_iqp.declaration import LEARN, ArrivalRate, declare
from airflow_iqp.exceptions import InputGone, InvalidSetting
from airflow_iqp.ledger import session_scope, store
from airflow_iqp.operators.plan import PlanWindowOperator
from airflow_iqp.planning.admission import admit
from airflow_iqp.queries import EXAMPLE_QUERIES
from airflow_iqp.runtime.costs import prior_model
from airflow_iqp.runtime.demand import window_demand
from airflow_iqp.runtime.descriptors import DynamicSlot, descriptor
from airflow_iqp.runtime.inputs import ORIGIN, InputSpec
from airflow_iqp.runtime.sizing import dynamic_batching, file_costs, plan_files
from airflow_iqp.streams.assign import window_start
from airflow_iqp.streams.spec import FileStream

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_iqp.declaration import Declaration

DAGS = Path(__file__).resolve().parents[2] / "dags"  # the example DAG files
WINDOW = timedelta(seconds=20)
PAST = datetime(2026, 1, 1, 10, 0, tzinfo=UTC)
RATE = ArrivalRate(files_per_second=2, rows_per_file=430)
MODEL: dict[str, Any] = {
    "query": "q6",
    "paths": {
        "spark_submit": {"partial": {"points": [[430, 6.5], [17200, 26.0]]}, "merge": {"points": [[1, 5.0], [8, 6.0]]}}
    },
}


def future_window() -> datetime:
    """A window that starts tomorrow: its input is not final when it is planned."""
    return window_start(datetime.now(UTC) + timedelta(days=1), WINDOW, ORIGIN)


@pytest.fixture
def url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The task's ledger connection, as a worker gets it, and a spark-submit Spark connection."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    monkeypatch.setenv("AIRFLOW_CONN_IQP_DEFAULT", url)
    monkeypatch.setenv("AIRFLOW_CONN_IQP_SPARK", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    return url


def declaration(tmp_path: Path, **overrides: Any) -> Declaration:
    (tmp_path / "q6.json").write_text(json.dumps(MODEL))
    arguments: dict[str, Any] = {
        "dag_id": "iqp_q6",
        "query": "q6",
        "window": WINDOW,
        "deadline": timedelta(seconds=30),
        "streams": {"lineitem": FileStream(str(tmp_path / "lineitem"))},
        "output": "/results/{dag_id}/{window_start}",
        "rate": RATE,
        "cost_model": "q6.json",
        "base_dir": tmp_path,
    }
    return declare(**(arguments | overrides))


def plan(
    decl: Declaration, start: datetime, run_id: str = "scheduled__w", run_type: DagRunType = DagRunType.SCHEDULED
) -> list[dict[str, Any]]:
    task = PlanWindowOperator(task_id="plan", declaration=decl, spark_conn_id="iqp_spark")
    return run_plan(task, start, run_id, run_type)


def run_plan(
    task: PlanWindowOperator,
    start: datetime,
    run_id: str = "scheduled__w",
    run_type: DagRunType = DagRunType.SCHEDULED,
) -> list[dict[str, Any]]:
    """The plan task run for the window that opens at `start`."""
    context = cast(
        "Context",
        {
            "data_interval_start": start,
            "data_interval_end": start + task.declaration.window,
            "run_id": run_id,
            "dag_run": SimpleNamespace(run_type=run_type),
        },
    )
    return task.execute(context)


def land(directory: Path, count: int, start: datetime) -> list[Path]:
    """`count` files that landed one second apart from `start`."""
    directory.mkdir(parents=True, exist_ok=True)
    files = []
    for i in range(count):
        path = directory / f"part-{i:03d}.parquet"
        path.write_bytes(b"PAR1")
        at = (start + timedelta(seconds=1 + i)).timestamp()
        os.utime(path, (at, at))
        files.append(path)
    return files


def recorded(url: str, decl: Declaration, start: datetime) -> store.WindowRow:
    with session_scope(url) as s:
        window_id = store.window_id(s, decl.dag_id, start)
        assert window_id is not None
        return store.window_summary(s, window_id)


def test_a_past_window_is_one_batch_now(tmp_path: Path, url: str) -> None:
    decl = declaration(tmp_path)
    [batch] = plan(decl, PAST, run_id="manual__past")
    assert (batch["index"], batch["upto"], batch["predicted_cost"]) == (0, None, 0.0)
    assert datetime.fromisoformat(batch["planned_start"]) == PAST
    assert InputSpec.from_dict(batch["input"]) == InputSpec.of(decl.streams, PAST, WINDOW)
    window = recorded(url, decl, PAST)
    assert window.id == batch["window_id"]
    assert window.run_id == "manual__past"
    assert window.deadline == PAST + WINDOW + timedelta(seconds=30)
    assert window.plan.how.startswith("historical")
    assert [b.index for b in window.batches] == [0]


def test_a_backfill_of_a_dynamic_query_runs_batches_of_at_most_tau_max(tmp_path: Path, url: str) -> None:
    tau_max = timedelta(seconds=7.1)
    decl = declaration(tmp_path, mode=Mode.DYNAMIC, alpha=0.5, tau_max=tau_max)
    per_batch = file_costs(decl.fitted_model(ExecutionPath.SPARK_SUBMIT), RATE.rows_per_file).max_tuples(7.1)
    assert per_batch == 2  # the model's second file fits in tau_max, the third does not
    land(tmp_path / "lineitem", 5, PAST)
    batches = plan(decl, PAST, run_id="backfill__w", run_type=DagRunType.BACKFILL)
    assert [(b["index"], b["upto"]) for b in batches] == [(0, 2), (1, 4), (2, None)]
    window = recorded(url, decl, PAST)
    assert window.backfill
    assert window.plan.how == "backfill: 5 file(s) in 3 batches of at most 2 (tau_max)"


def test_a_backfill_of_a_static_query_is_one_batch(tmp_path: Path, url: str) -> None:
    land(tmp_path / "lineitem", 5, PAST)
    [batch] = plan(declaration(tmp_path), PAST, run_type=DagRunType.BACKFILL)
    assert batch["upto"] is None


def test_a_backfill_of_a_window_whose_files_are_gone_fails_and_writes_nothing(tmp_path: Path, url: str) -> None:
    decl = declaration(tmp_path)
    land(tmp_path / "lineitem", 2, PAST + 10 * WINDOW)  # only later windows' files are kept
    with pytest.raises(
        InputGone, match=re.escape(f"window {PAST.isoformat()}..") + ".* of iqp_q6: no input file for it"
    ):
        plan(decl, PAST, run_type=DagRunType.BACKFILL)
    with session_scope(url) as s:
        assert store.window_id(s, decl.dag_id, PAST) is None


def test_a_window_run_again_after_some_of_its_files_went_fails_naming_one(tmp_path: Path, url: str) -> None:
    decl = declaration(tmp_path)
    files = land(tmp_path / "lineitem", 3, PAST)
    [batch] = plan(decl, PAST)
    with session_scope(url) as s:
        listed = InputSpec.from_dict(batch["input"]).look()
        store.freeze_files(s, batch["window_id"], 0, {"lineitem": [f for u in listed.units for f in u.files]})
    files[1].unlink()
    with pytest.raises(InputGone, match=r"1 file\(s\) its last run read are no longer listed .*part-001"):
        plan(decl, PAST, run_type=DagRunType.BACKFILL)
    assert not recorded(url, decl, PAST).backfill  # the window was left as it was


def test_learning_with_no_model_yet_runs_the_calibration(tmp_path: Path, url: str) -> None:
    (tmp_path / "q6.sql").write_text((EXAMPLE_QUERIES / "q6.sql").read_text())  # a user's own: no prior
    decl = declaration(tmp_path, cost_model=LEARN, query="q6.sql")
    start = future_window()
    batches = plan(decl, start)
    assert [(b["index"], b["upto"]) for b in batches] == [(0, 1), (1, None)]  # one unit first, then the rest
    assert datetime.fromisoformat(batches[1]["planned_start"]) == start + WINDOW
    window = recorded(url, decl, start)
    assert window.plan.how.startswith("calibration")
    assert window.predicted_finish is None
    assert window.plan.merge_start is None  # no model: nothing prices the batches before it


def test_no_rate_learned_yet_runs_one_batch_once_the_input_is_final(tmp_path: Path, url: str) -> None:
    decl = declaration(tmp_path, rate=LEARN)
    start = future_window()
    [batch] = plan(decl, start)
    assert batch["upto"] is None
    assert datetime.fromisoformat(batch["planned_start"]) == start + WINDOW
    window = recorded(url, decl, start)
    assert window.plan.files_per_second is None
    assert window.plan.merge_start == WINDOW.total_seconds()  # after the one batch, once the input is final


def test_a_declared_rate_and_model_give_the_papers_plan_cut_by_count(tmp_path: Path, url: str) -> None:
    decl = declaration(tmp_path)
    start = future_window()
    batches = plan(decl, start)
    expected = plan_files(decl, RATE, decl.fitted_model(ExecutionPath.SPARK_SUBMIT)).plan.batches
    assert len(batches) == len(expected) == 2
    assert [b["upto"] for b in batches] == [expected[0].last, None]  # the last batch takes whatever is left
    assert [b["predicted_cost"] for b in batches] == pytest.approx([b.cost for b in expected])
    assert [datetime.fromisoformat(b["planned_start"]) for b in batches] == [
        start + timedelta(seconds=b.start) for b in expected
    ]
    window = recorded(url, decl, start)
    assert (window.plan.expected_files, window.plan.rows_per_file) == (40, 430)
    assert window.plan.merge_start == pytest.approx(expected[-1].start + expected[-1].cost)  # the last batch's end
    assert [(b.first_tuple, b.last_tuple) for b in window.batches] == [
        (1, expected[0].last),
        (expected[0].last + 1, 40),
    ]


def test_planning_a_window_again_keeps_its_id(tmp_path: Path, url: str) -> None:
    decl = declaration(tmp_path)
    start = future_window()
    first = plan(decl, start, run_id="scheduled__a")
    again = plan(decl, start, run_id="scheduled__b")
    assert {b["window_id"] for b in first} == {b["window_id"] for b in again}
    assert recorded(url, decl, start).run_id == "scheduled__b"


def test_dynamic_mode_hands_out_slots(tmp_path: Path, url: str) -> None:
    decl = declaration(tmp_path, mode=Mode.DYNAMIC, alpha=0.5, tau_max=timedelta(seconds=20))
    start = future_window()
    slots = [slot for s in plan(decl, start) if isinstance(slot := descriptor(s), DynamicSlot)]
    batching = dynamic_batching(decl, RATE, decl.fitted_model(ExecutionPath.SPARK_SUBMIT))
    assert [s.slot for s in slots] == list(range(batching.slots))
    assert {(s.min_batch, s.max_batch, s.expected_files, s.slots) for s in slots} == {
        (batching.min_batch.size, batching.max_batch, 40, batching.slots)
    }
    assert slots[0].window_input == InputSpec.of(decl.streams, start, WINDOW)
    window = recorded(url, decl, start)
    assert window.id == slots[0].window_id
    assert window.plan.mode is Mode.DYNAMIC
    assert window.plan.dynamic is not None
    assert (window.plan.dynamic.min_batch, window.plan.dynamic.slots) == (batching.min_batch.size, batching.slots)
    assert window.plan.merge_start is None  # slots cut batches live: nothing plans the merge ahead
    assert window.batches == ()  # slots cut their batches when granted


def test_the_spark_connections_type_picks_the_cost_model_of_its_path(
    tmp_path: Path, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One window each on spark-submit and on Spark Connect, where jobs cost a tenth: each is
    planned with its own path's section of the same model file."""
    connect = {"partial": {"points": [[430, 0.65], [17200, 2.6]]}, "merge": {"points": [[1, 0.5], [8, 0.6]]}}
    (tmp_path / "both.json").write_text(json.dumps({"paths": {**MODEL["paths"], "spark_connect": connect}}))
    decl = declaration(tmp_path, cost_model="both.json")
    start = future_window()
    planned = {}
    connections = {
        ExecutionPath.SPARK_SUBMIT: {"conn_type": "spark", "host": "local[2]"},
        ExecutionPath.SPARK_CONNECT: {"conn_type": "spark_connect", "host": "localhost", "port": 15002},
    }
    for path, conn in connections.items():
        monkeypatch.setenv("AIRFLOW_CONN_IQP_SPARK", json.dumps(conn))
        window = start if path is ExecutionPath.SPARK_SUBMIT else start + WINDOW
        planned[path] = [b["predicted_cost"] for b in plan(decl, window)]
        expected = plan_files(decl, RATE, decl.fitted_model(path)).plan.batches
        assert planned[path] == pytest.approx([b.cost for b in expected])
    assert len(planned[ExecutionPath.SPARK_SUBMIT]) == 2
    assert len(planned[ExecutionPath.SPARK_CONNECT]) == 1  # cheap jobs: one batch after the window


def test_a_spark_connection_of_another_type_is_refused(
    tmp_path: Path, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_IQP_SPARK", json.dumps({"conn_type": "livy", "host": "x"}))
    with pytest.raises(InvalidSetting, match="'iqp_spark' has type 'livy'.*'spark'.*'spark_connect'"):
        plan(declaration(tmp_path), future_window())


def test_a_static_plan_leaves_room_for_another_querys_longest_job(tmp_path: Path, url: str) -> None:
    """A dynamic query planned first records its longest job (a batch within its tau_max of
    10 s, or its merge); q6, planned next in the same ledger, finishes that much before its
    deadline, so the job granted just before its last batch cannot make it late.
    """
    other = declaration(tmp_path, dag_id="iqp_other", mode=Mode.DYNAMIC, alpha=0.5, tau_max=timedelta(seconds=10))
    plan(other, future_window())
    model = other.fitted_model(ExecutionPath.SPARK_SUBMIT)
    with session_scope(url) as s:
        [recorded_other] = store.demands(s)
    assert recorded_other == window_demand(other, RATE, model)
    room = recorded_other.longest_job
    assert 0 < room <= 10

    decl = declaration(tmp_path, deadline=timedelta(seconds=40))
    start = future_window()
    batches = plan(decl, start)
    planned = plan_files(decl, RATE, model, blocking=room)
    assert planned.plan.feasible
    assert planned.finish + room <= (WINDOW + decl.deadline).total_seconds()
    assert [b["predicted_cost"] for b in batches] == pytest.approx([b.cost for b in planned.plan.batches])
    alone = plan_files(decl, RATE, model)
    assert alone.finish + room > (WINDOW + decl.deadline).total_seconds()  # without the room, no room
    window = recorded(url, decl, start)
    assert f"{room:.1f} s left for iqp_other's longest job" in window.plan.how
    assert window.plan.blocking == room  # what a replan of its batches leaves room for (runtime.replan)
    with session_scope(url) as s:
        demands = {q.name: q for q in store.demands(s)}
    assert demands["iqp_q6"] == window_demand(decl, RATE, model, room)
    assert demands["iqp_q6"].longest_job == pytest.approx(planned.longest_job)
    verdict = admit(list(demands.values()))
    assert window.plan.admission is not None
    assert window.plan.admission.startswith("feasible" if verdict.feasible else "iqp_")


def test_planning_a_window_tests_admission_and_records_a_deadline_that_cannot_hold(tmp_path: Path, url: str) -> None:
    """A second query whose window holds a 26 s job (deadline 60 s after it), planned after q6,
    whose last batch and merge are due 30 s after its window closes: admission finds q6 short.
    """
    plan(declaration(tmp_path), future_window())
    other = declaration(tmp_path, dag_id="iqp_other", deadline=timedelta(seconds=60))
    start = future_window()
    plan(other, start)
    with session_scope(url) as s:
        verdict = admit(store.demands(s))
    assert verdict.first_miss is not None
    assert verdict.first_miss.name == "iqp_q6"
    text = recorded(url, other, start).plan.admission
    assert text is not None
    assert text.startswith(f"iqp_q6 misses a deadline by {-verdict.first_miss.slack:.1f} s")


def test_the_first_window_of_a_fresh_ledger_leaves_the_room_the_next_one_does(
    tmp_path: Path, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The three example DAG files in one DAG folder, a fresh ledger: q6's first window is
    planned before q1 and q14 have planned anything, and still leaves room for the longest job
    either may hold the resource for (the queries declared beside it, priced from their
    declarations with their priors); its next window, once all three recorded their demands,
    leaves the same room, and admission says the same of both.
    """
    dags = tmp_path / "dags"
    dags.mkdir()
    for example in DAGS.glob("iqp_*.py"):
        shutil.copy(example, dags)
    for name in ("LANDING", "STATIC", "RESULTS"):
        monkeypatch.setenv(f"IQP_{name}", str(tmp_path / name.lower()))
    connect = {"conn_type": "spark_connect", "host": "localhost", "port": 15002}
    monkeypatch.setenv("AIRFLOW_CONN_IQP_SPARK", json.dumps(connect))
    tasks = {dag_id: task for path in sorted(dags.glob("*.py")) for dag_id, task in plan_tasks(path).items()}
    assert set(tasks) == {"iqp_q1", "iqp_q6", "iqp_q14"}
    q6 = tasks["iqp_q6"].declaration
    first = window_start(datetime.now(UTC) + timedelta(days=1), q6.window, ORIGIN)

    run_plan(tasks["iqp_q6"], first)
    with session_scope(url) as s:
        assert [q.name for q in store.demands(s)] == ["iqp_q6"], "q6 planned first, on a fresh ledger"
    run_plan(tasks["iqp_q1"], first)
    run_plan(tasks["iqp_q14"], first)
    run_plan(tasks["iqp_q6"], first + q6.window)

    planned, next_one = recorded(url, q6, first).plan, recorded(url, q6, first + q6.window).plan
    others = [tasks[dag_id].declaration for dag_id in ("iqp_q1", "iqp_q14")]
    alone = {
        d.dag_id: window_demand(d, d.rate, prior).longest_job
        for d in others
        if isinstance(d.rate, ArrivalRate) and (prior := prior_model(d, ExecutionPath.SPARK_CONNECT)) is not None
    }
    assert max(alone.values()) > 0
    assert planned.blocking == pytest.approx(max(alone.values()))
    assert f"left for {max(alone, key=alone.__getitem__)}'s longest job" in planned.how
    assert (planned.how, planned.blocking, planned.admission) == (next_one.how, next_one.blocking, next_one.admission)
    with session_scope(url) as s:
        assert [q.name for q in store.demands(s)] == ["iqp_q1", "iqp_q14", "iqp_q6"]
    assert planned.admission is not None
    assert "3 queries" in planned.admission
