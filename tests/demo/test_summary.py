"""The demo's summary tables (from a real ledger) and its single-pass verification (tiny data)."""

from __future__ import annotations

import os
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_iqp.constants import BatchReason, BatchStatus, ExecutionPath, JobKind, Mode
from airflow_iqp.declaration import declare
from airflow_iqp.demo.summary import (
    batches_table,
    errors_table,
    file_count,
    format_table,
    wait_s,
    window_errors,
    window_row,
    windows_table,
)
from airflow_iqp.demo.verify import compare_rows, single_pass, verify_window
from airflow_iqp.ledger import session_scope, store
from airflow_iqp.planning.record import PlanRecord
from airflow_iqp.results.publish import publish
from airflow_iqp.streams.files import DataFile
from airflow_iqp.streams.spec import FileStream

if TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import SparkSession

START = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
END = START + timedelta(minutes=2)


def at(seconds: float) -> datetime:
    return START + timedelta(seconds=seconds)


def listed(name: str) -> DataFile:
    return DataFile("lineitem", f"file:///landing/lineitem/{name}", name, 100, START)


def test_format_table_aligns_text_left_and_numbers_right() -> None:
    table = format_table(("name", "n"), [("a", 1), ("bbb", 22), ("c", None)])
    assert table.splitlines() == ["name   n", "----  --", "a      1", "bbb   22", "c      -"]


@pytest.fixture
def ledger(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with session_scope(url) as session:
        store.register_query(session, dag_id="iqp_q6", name="q6", sql="SELECT 1", mode=Mode.STATIC, params={})
        window_id = store.record_plan(
            session,
            "iqp_q6",
            START,
            END,
            END + timedelta(seconds=90),
            expected_tuples=1000,
            plan=PlanRecord(merge_cost=25.0),
            batches=[
                {
                    "index": i,
                    "first_tuple": first,
                    "last_tuple": last,
                    "release": at(release),
                    "latest_start": at(start),
                    "planned_start": at(start),
                    "predicted_cost": cost,
                }
                for i, (first, last, release, start, cost) in enumerate(
                    [(1, 81, 40, 75, 45.0), (82, 240, 119.5, 120, 65.0)]
                )
            ],
            predicted_finish=at(210),
        )
        for index, (start, end, rows) in enumerate([(at(45), at(70), 400), (at(125), at(150), 600)]):
            names = ["b", "c"] if index else ["a"]
            store.freeze_files(session, window_id, index, {"lineitem": [listed(n) for n in names]})
            store.start_batch(session, window_id, index, start)
            store.finish_batch(
                session, window_id, index, start, end, rows, (end - start).total_seconds(), f"/out/{index}"
            )
        store.record_cost_observation(
            session, "iqp_q6", ExecutionPath.SPARK_SUBMIT, JobKind.MERGE, 2, 20.0, observed_at=at(175)
        )
        store.record_merge(session, window_id, at(175), 1000, "/out/result")
        store.record_result(session, window_id, "/results/iqp_q6/20260101T120000", 1000, at(176))
    return url


def test_window_row_and_tables_read_the_ledger(ledger: str) -> None:
    with session_scope(ledger) as session:
        row = window_row(session, "iqp_q6", START)
        assert window_row(session, "iqp_q6", END) is None
        assert window_row(session, "q6", START) is None  # rows are found by DAG id, not query name
    assert row is not None
    assert row.finished
    assert row.result_uri == "/results/iqp_q6/20260101T120000"  # the published result the demo verifies
    assert row.status == "merged"
    assert row.deadline_met
    assert [b.status for b in row.batches] == [BatchStatus.DONE, BatchStatus.DONE]
    assert row.actual_tuples == 1000
    assert row.predicted_cost == pytest.approx(45 + 65 + 25)
    assert row.actual_cost == pytest.approx(25 + 25 + 20)
    assert [wait_s(b) for b in row.batches] == [pytest.approx(5.0), pytest.approx(5.5)]
    assert [file_count(b) for b in row.batches] == [1, 2]

    windows = windows_table([row]).splitlines()
    assert windows[0].split() == [
        "query",
        "window",
        "(UTC)",
        "status",
        "batches",
        "tuples",
        "pred",
        "cost",
        "actual",
        "cost",
        "pred",
        "finish",
        "finish",
        "deadline",
        "met",
        "result",
        "rows",
        "=",
        "1-pass",
        "SQL",
    ]
    assert windows[2].split() == [
        "iqp_q6",
        "12:00:00-12:02:00",
        "merged",
        "2/2",
        "1,000",
        "135.0s",
        "70.0s",
        "+90s",
        "+55s",
        "+90s",
        "yes",
        "-",
        "-",
    ]
    batches = batches_table([row]).splitlines()
    assert len(batches) == 4
    assert batches[3].split() == [
        "iqp_q6",
        "1",
        "done",
        "1",
        "2",
        "600",
        "119.5s",
        "120.0s",
        "125.0s",
        "150.0s",
        "5.5s",
        "65.0s",
        "25.0s",
        "+160%",
    ]
    errors = errors_table([row]).splitlines()
    assert len(errors) == 3
    # batches 45 s and 65 s predicted, 25 s each taken; the merge 25 s predicted, 20 s taken
    assert errors[2].split()[-5:] == ["iqp_q6", "2/2", "120%", "+160%", "+25%"]
    assert window_errors([row]) == "window 12:00:00-12:02:00: 2 batch(es) predicted, median |error| 120%, worst +160%"


def test_errors_compare_what_the_model_expected_not_the_margin_its_plan_added(ledger: str) -> None:
    with session_scope(ledger) as session:
        row = window_row(session, "iqp_q6", START)
    assert row is not None
    # A refit model's plan prices every partial 30% and the merge 25% longer than it expects:
    # 45 s and 65 s planned are 34.6 s and 50 s expected (25 s taken), the merge 20 s (20 s taken).
    margin = {"k": 2.0, "partial": 0.3, "merge": 0.25}
    margined = replace(row, plan=row.plan.model_copy(update={"margin": margin}))
    assert batches_table([margined]).splitlines()[3].split()[-3:] == ["50.0s", "25.0s", "+100%"]
    assert errors_table([margined]).splitlines()[2].split()[-5:] == ["iqp_q6", "2/2", "69%", "+100%", "+0%"]
    assert window_errors([margined]).endswith("median |error| 69%, worst +100%")


def test_compare_rows_is_exact_for_ints_and_relative_for_numbers() -> None:
    assert (
        compare_rows([{"n": 3, "x": 1.0, "d": Decimal("2.50")}], [{"n": 3, "x": 1.0 + 1e-12, "d": Decimal("2.5")}])
        == []
    )
    assert compare_rows([{"x": 1.0}], [{"x": 1.0 + 1e-6}]) != []
    assert compare_rows([{"n": 3}], [{"n": 4}]) == ["row 0 n: 3 but single pass gives 4"]
    assert compare_rows([{"d": Decimal("1.000000001")}], [{"d": Decimal("1.000000002")}]) == []
    assert compare_rows([{"d": Decimal("1.00001")}], [{"d": Decimal("1.00002")}]) != []
    assert compare_rows([], [{"n": 1}]) == ["0 result rows, single pass has 1"]
    assert compare_rows([{"a": 1}], [{"b": 1}]) == ["row 0: columns ['a'] but single pass has ['b']"]
    assert compare_rows([{"s": "x", "v": None}], [{"s": "x", "v": None}]) == []


def _lineitem(orderkeys: list[int]) -> pa.Table:
    n = len(orderkeys)
    return pa.table(
        {
            "l_orderkey": pa.array(orderkeys, pa.int64()),
            "l_quantity": pa.array([Decimal("10.00")] * n, pa.decimal128(15, 2)),
            "l_extendedprice": pa.array([Decimal(f"{100 + k}.50") for k in orderkeys], pa.decimal128(15, 2)),
            "l_discount": pa.array([Decimal("0.06")] * n, pa.decimal128(15, 2)),
            "l_shipdate": pa.array([datetime(1994, 6, 1).date()] * n, pa.date32()),
        }
    )


def test_verify_window_uses_only_the_window_files(tmp_path: Path, spark: SparkSession) -> None:
    landing = tmp_path / "lineitem"
    landing.mkdir()
    for i in range(4):  # landed at -1 s, 0 s, 1 s, 2 s: files 1 and 2 fall in [START, START + 2 s)
        path = landing / f"{i}-{uuid.uuid4().hex}.parquet"
        pq.write_table(_lineitem([10 * i + 1, 10 * i + 2]), path)
        os.utime(path, (at(i - 1).timestamp(), at(i - 1).timestamp()))
    (landing / "_SUCCESS").write_bytes(b"")
    declaration = declare(
        dag_id="iqp_q6",
        query="q6",
        window=timedelta(seconds=2),
        deadline=timedelta(seconds=1),
        streams={"lineitem": FileStream(str(landing))},
        output=str(tmp_path / "results" / "{window_start}"),
    )
    window_end = START + timedelta(seconds=2)
    expected = single_pass(spark, declaration, START, window_end)
    revenue = sum((Decimal(f"{100 + k}.50") * Decimal("0.06") for k in (11, 12, 21, 22)), Decimal(0))
    assert len(expected) == 1
    assert expected[0]["revenue"] == revenue

    def published(rows: list[dict[str, object]]) -> str:
        committed = tmp_path / f"committed-{uuid.uuid4().hex}"
        committed.mkdir()
        pq.write_table(pa.Table.from_pylist(rows), committed / "part-00000-x.parquet")
        target = declaration.output.render(dag_id="iqp_q6", query="q6", window_start=START, window_end=window_end)
        return publish(committed, target, {"rows": len(rows)})

    rows, problems = verify_window(spark, declaration, START, window_end, published(expected))
    assert rows == expected
    assert problems == []

    _, problems = verify_window(spark, declaration, START, window_end, published([{"revenue": revenue + 1}]))
    assert len(problems) == 1
    assert problems[0].startswith("row 0 revenue")


def test_single_pass_over_a_window_without_files_reads_the_streams_schema(tmp_path: Path, spark: SparkSession) -> None:
    landing = tmp_path / "lineitem"
    landing.mkdir()
    path = landing / "only.parquet"
    pq.write_table(_lineitem([1]), path)
    os.utime(path, (at(-10).timestamp(), at(-10).timestamp()))
    declaration = declare(
        dag_id="iqp_q6",
        query="q6",
        window=timedelta(seconds=2),
        deadline=timedelta(seconds=1),
        streams={"lineitem": FileStream(str(landing))},
        output=str(tmp_path / "results" / "{window_start}"),
    )
    assert single_pass(spark, declaration, START, START + timedelta(seconds=2)) == [{"revenue": None}]


def test_demo_stops_waiting_for_a_window_whose_batch_failed_its_retry(ledger: str) -> None:
    from airflow_iqp.demo.__main__ import gave_up, next_window_start

    with session_scope(ledger) as session:
        row = window_row(session, "iqp_q6", START)
    assert row is not None
    assert not gave_up(row)
    failed = replace(row.batches[0], status=BatchStatus.FAILED, attempts=2)
    assert gave_up(replace(row, batches=(failed,)))
    window = END - START
    assert next_window_start(START, window) == START
    assert next_window_start(START + timedelta(seconds=1), window) == END


def test_grants_table_shows_the_dispatch_order_and_who_waited(ledger: str) -> None:
    from airflow_iqp.demo.summary import grant_rows, grants_table
    from airflow_iqp.ledger import dispatch

    with session_scope(ledger) as session:
        store.register_query(session, dag_id="iqp_q1", name="q1", sql="SELECT 1", mode=Mode.STATIC, params={})
        windows = {
            q: store.record_plan(
                session, q, END, END + timedelta(minutes=2), END + timedelta(seconds=d), 1, PlanRecord(), []
            )
            for q, d in (("iqp_q6", 200), ("iqp_q1", 300))
        }
        ids = {
            q: dispatch.register(
                session,
                window_id=w,
                query=q,
                kind=JobKind.PARTIAL,
                slot=0,
                reason=BatchReason.MIN_BATCH,
                deadline=END + timedelta(seconds=d),
                remaining_cost=10.0,
                lease_seconds=60,
                now=at(130),
            )
            for (q, w), d in zip(windows.items(), (200, 300))
        }
        [first] = dispatch.grant(session, policy="edf", resources=1, now=at(131))
        assert first.request == ids["iqp_q6"]
        dispatch.release(session, first, at(150))
        dispatch.grant(session, policy="edf", resources=1, now=at(150))
        rows = grant_rows(session, END)
    assert [(r.query, r.rivals) for r in rows] == [("iqp_q6", ("iqp_q1",)), ("iqp_q1", ())]
    table = grants_table(rows, END).splitlines()
    assert table[2].split() == ["1", "iqp_q6", "partial", "min_batch", "10.0s", "11.0s", "1.0s", "19.0s", "iqp_q1"]
    assert table[3].split() == ["2", "iqp_q1", "partial", "min_batch", "10.0s", "30.0s", "20.0s", "-", "-"]
