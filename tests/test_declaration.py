"""Bad declarations fail when the DAG file is parsed, with a message that says what to fix."""

from __future__ import annotations

import json
import math
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from airflow_iqp.constants import ExecutionPath, Mode, OnCorrupt, OnLate
from airflow_iqp.declaration import (
    EXAMPLE_COST_MODELS,
    LEARN,
    ArrivalRate,
    declare,
    dynamic_batching,
    plan_files,
    remote_spark,
)
from airflow_iqp.exceptions import InvalidDeclaration
from airflow_iqp.streams.spec import FileStream

MODEL = {
    "query": "q6",
    "paths": {
        "spark_submit": {"partial": {"points": [[430, 6.5], [17200, 26.0]]}, "merge": {"points": [[1, 5.0], [8, 6.0]]}}
    },
}
RATE = ArrivalRate(files_per_second=2, rows_per_file=430)
LINEITEM = FileStream("/data/lineitem")


@pytest.fixture
def cost_model(tmp_path: Path) -> Path:
    path = tmp_path / "q6.json"
    path.write_text(json.dumps(MODEL))
    return path


def args(cost_model: Path | str, **overrides: object) -> dict[str, Any]:
    base: dict[str, Any] = {
        "dag_id": "iqp_q6",
        "query": "q6",
        "window": timedelta(seconds=20),
        "deadline": timedelta(seconds=30),
        "streams": {"lineitem": LINEITEM},
        "output": "/results/{dag_id}/{window_start}",
        "rate": RATE,
        "cost_model": cost_model,
    }
    return base | overrides


def write_query(tmp_path: Path, name: str, sql: str) -> Path:
    path = tmp_path / f"{name}.sql"
    path.write_text(sql)
    return path


def test_good_declaration_plans_two_batches(cost_model: Path) -> None:
    declaration = declare(**args(cost_model))
    assert declaration.name == "q6"
    assert declaration.dag_id == "iqp_q6"
    assert dict(declaration.streams) == {"lineitem": LINEITEM}
    assert (declaration.on_late, declaration.on_corrupt) == (OnLate.RECORD, OnCorrupt.FAIL)
    planned = plan_files(declaration, RATE, declaration.fitted_model(ExecutionPath.SPARK_SUBMIT))
    assert planned.plan.feasible
    assert len(planned.plan.batches) == 2
    assert planned.finish <= 20 + 30


@pytest.mark.parametrize("blocking", [0.0, 2.5, 5.0, 10.0, 15.0])
def test_a_plan_with_room_for_blocking_finishes_that_much_earlier_or_as_early_as_it_can(
    cost_model: Path, blocking: float
) -> None:
    declaration = declare(**args(cost_model, deadline=timedelta(seconds=40)))
    model = declaration.fitted_model(ExecutionPath.SPARK_SUBMIT)
    planned = plan_files(declaration, RATE, model, blocking=blocking)
    if planned.plan.feasible:
        assert planned.finish + blocking <= 20 + 40
    else:  # the earliest plan there is: the same as with any larger room
        earliest = plan_files(declaration, RATE, model, blocking=60).plan
        assert planned.plan.batches == earliest.batches
    costs = [b.cost for b in planned.plan.batches]
    assert planned.longest_job == max([*costs, planned.merge_job])
    assert planned.merge_job == pytest.approx(planned.finish - planned.plan.batches[-1].end)


def test_unknown_query_file_lists_the_known_ones(cost_model: Path) -> None:
    with pytest.raises(InvalidDeclaration, match=r"query: unknown query 'q66'.*packaged examples: q1, q3"):
        declare(**args(cost_model, query="q66"))


def test_a_missing_query_file_is_named(cost_model: Path, tmp_path: Path) -> None:
    with pytest.raises(InvalidDeclaration, match=r"query: query file .*nope\.sql does not exist"):
        declare(**args(cost_model, query="nope.sql", base_dir=tmp_path))


def test_a_relative_query_is_read_from_the_dag_files_folder(cost_model: Path, tmp_path: Path) -> None:
    write_query(tmp_path, "sales", "select category, sum(amount) as total from sales group by category")
    declaration = declare(
        **args(
            cost_model, query="sales.sql", base_dir=tmp_path, streams={"sales": FileStream("/data/sales")}, rate=LEARN
        )
    )
    assert declaration.query.path == tmp_path / "sales.sql"
    assert declaration.name == "sales"
    assert declaration.query.header is None


def test_unsupported_sql_names_the_construct(cost_model: Path, tmp_path: Path) -> None:
    query = write_query(
        tmp_path,
        "distinct",
        "-- name: distinct\n-- streams: lineitem\n-- static:\nselect count(distinct l_suppkey) as n from lineitem\n",
    )
    with pytest.raises(InvalidDeclaration, match=r"COUNT\(DISTINCT"):
        declare(**args(cost_model, query=str(query)))


def test_a_table_declared_neither_as_stream_nor_static(cost_model: Path) -> None:
    with pytest.raises(InvalidDeclaration, match=r"query q14 .* reads part, declared neither in streams= .*static="):
        declare(**args(cost_model, query="q14", rate=LEARN))


def test_a_declared_table_the_query_does_not_read(cost_model: Path) -> None:
    with pytest.raises(InvalidDeclaration, match=r"query q6 .* does not read declared table\(s\) part"):
        declare(**args(cost_model, static={"part": "/data/part"}))
    streams = {"lineitem": LINEITEM, "orders": FileStream("/data/orders")}
    with pytest.raises(InvalidDeclaration, match=r"does not read declared table\(s\) orders"):
        declare(**args(cost_model, streams=streams))


def test_a_table_declared_both_as_stream_and_static(cost_model: Path) -> None:
    with pytest.raises(InvalidDeclaration, match="declared both as stream and static: lineitem"):
        declare(**args(cost_model, static={"lineitem": "/data/lineitem"}))


def test_the_header_and_the_declared_streams_must_agree(cost_model: Path) -> None:
    # q14's header: streams lineitem, static part; declaring part as a stream contradicts it
    streams = {"lineitem": LINEITEM, "part": FileStream("/data/part")}
    with pytest.raises(InvalidDeclaration, match=r"q14's header names streams lineitem, but streams= declares"):
        declare(**args(cost_model, query="q14", streams=streams, rate=LEARN))


def test_stream_names_are_tables_and_values_file_streams(cost_model: Path) -> None:
    with pytest.raises(InvalidDeclaration, match="streams must map each stream table"):
        declare(**args(cost_model, streams={}))
    with pytest.raises(InvalidDeclaration, match=r"streams\['lineitem'\] must be a FileStream"):
        declare(**args(cost_model, streams={"lineitem": "/data/lineitem"}))
    with pytest.raises(InvalidDeclaration, match="'line item' is not a table name"):
        declare(**args(cost_model, streams={"line item": LINEITEM}))


def test_stream_names_are_matched_to_tables_case_blind(cost_model: Path) -> None:
    declaration = declare(**args(cost_model, streams={"LineItem": LINEITEM}))
    assert list(declaration.streams) == ["lineitem"]


def test_a_csv_stream_without_a_schema_is_refused_where_it_is_built(cost_model: Path) -> None:
    with pytest.raises(InvalidDeclaration, match=r"format='csv' needs schema="):
        declare(**args(cost_model, streams={"lineitem": FileStream("/data/lineitem", format="csv")}))


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("/data/dim/part", {"path": "/data/dim/part", "table": None}),
        ("s3://bucket/dim/part/", {"path": "s3://bucket/dim/part/", "table": None}),
        ("file:///data/dim/part", {"path": "file:///data/dim/part", "table": None}),
        ("part", {"path": None, "table": "part"}),
        ("tpch.part", {"path": None, "table": "tpch.part"}),
    ],
)
def test_a_static_input_is_a_path_or_a_catalog_table(cost_model: Path, value: str, expected: dict[str, Any]) -> None:
    declaration = declare(**args(cost_model, query="q14", static={"part": value}, rate=LEARN))
    assert declaration.static["part"].to_dict() == expected


@pytest.mark.parametrize("value", ["dim/part", "./part", "../dim/part"])
def test_a_relative_static_path_is_refused(cost_model: Path, value: str) -> None:
    with pytest.raises(InvalidDeclaration, match=r"static\['part'\] = .* relative paths are refused"):
        declare(**args(cost_model, query="q14", static={"part": value}, rate=LEARN))


def test_a_static_input_must_be_text(cost_model: Path) -> None:
    with pytest.raises(InvalidDeclaration, match=r"static\['part'\] must be a path or a catalog table name"):
        declare(**args(cost_model, query="q14", static={"part": Path("/data/part")}, rate=LEARN))


@pytest.mark.parametrize(
    ("output", "message"),
    [
        ("/results/{dag_id}", r"must contain \{window_start\} or \{window_end\}"),
        ("results/{dag_id}/{window_start}", "must be an absolute path or a URI"),
        ("/results/{dag}/{window_start}", r"unknown field\(s\) 'dag'"),
        ("", "output must be a path or URI template"),
    ],
)
def test_a_bad_output_template_is_named(cost_model: Path, output: str, message: str) -> None:
    with pytest.raises(InvalidDeclaration, match=message):
        declare(**args(cost_model, output=output))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"on_late": "drop"}, "on_late must be one of 'record', 'remerge', got 'drop'"),
        ({"on_corrupt": "skip"}, "on_corrupt must be one of 'fail', 'quarantine', got 'skip'"),
    ],
)
def test_unknown_late_and_corrupt_handling_is_named(
    cost_model: Path, overrides: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidDeclaration, match=message):
        declare(**args(cost_model, **overrides))


def test_late_and_corrupt_handling_accept_their_names(cost_model: Path) -> None:
    declaration = declare(**args(cost_model, on_late="remerge", on_corrupt="quarantine"))
    assert (declaration.on_late, declaration.on_corrupt) == (OnLate.REMERGE, OnCorrupt.QUARANTINE)


def test_missing_cost_model(tmp_path: Path) -> None:
    with pytest.raises(InvalidDeclaration, match=r"cost_model .*nope.json does not exist.*iqp fit-cost-model"):
        declare(**args(tmp_path / "nope.json"))


def test_an_unknown_packaged_cost_model_is_named(tmp_path: Path) -> None:
    with pytest.raises(InvalidDeclaration, match=r"cost_model 'q66': .*q66\.json does not exist"):
        declare(**args("q66"))


def test_cost_models_by_name_relative_path_or_learned(cost_model: Path, tmp_path: Path) -> None:
    assert declare(**args("q6")).cost_model == EXAMPLE_COST_MODELS / "q6.json"
    assert declare(**args("q6.json", base_dir=tmp_path)).cost_model == cost_model
    learned = declare(**args(LEARN))
    assert learned.cost_model == LEARN
    assert learned.learns_cost
    with pytest.raises(InvalidDeclaration, match="iqp_q6 learns its cost model: there is no fitted file"):
        learned.fitted_model(ExecutionPath.SPARK_SUBMIT)


def test_malformed_cost_model_names_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps(
            {"paths": {"spark_submit": {"partial": {"points": [[10, 5.0], [5, 6.0]]}, "merge": {"points": [[1, 1.0]]}}}}
        )
    )
    with pytest.raises(InvalidDeclaration, match=r"paths.spark_submit.partial: points\[1\]"):
        declare(**args(bad))


def test_unmeetable_deadline_says_the_earliest_feasible_one(cost_model: Path) -> None:
    with pytest.raises(
        InvalidDeclaration, match=r"can never be met .* earliest feasible deadline is ([\d.]+) s"
    ) as info:
        declare(**args(cost_model, deadline=timedelta(seconds=10)))
    earliest = float(info.value.args[0].rsplit("is ", 1)[1].split(" s")[0])
    declare(**args(cost_model, deadline=timedelta(seconds=earliest)))  # and that one works


def test_an_unmeetable_deadline_is_not_judged_without_a_rate_or_a_model(cost_model: Path) -> None:
    # with nothing to plan with at parse time, the plan task calibrates and learns instead
    assert declare(**args(cost_model, deadline=timedelta(seconds=10), rate=LEARN)).rate == LEARN
    assert declare(**args(LEARN, deadline=timedelta(seconds=10))).learns_cost


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"window": timedelta(0)}, "window"),
        ({"deadline": -timedelta(seconds=1)}, "deadline"),
        ({"rate": "sometimes"}, "rate"),
    ],
)
def test_bad_fields_are_named(cost_model: Path, overrides: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidDeclaration, match=field):
        declare(**args(cost_model, **overrides))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"files_per_second": 0, "rows_per_file": 10}, r"rate.files_per_second must be > 0, got 0"),
        ({"files_per_second": True, "rows_per_file": 10}, r"rate.files_per_second must be a finite number, got True"),
        ({"files_per_second": 1, "rows_per_file": math.nan}, r"rate.rows_per_file must be a finite number, got nan"),
        ({"files_per_second": 1, "rows_per_file": "430"}, r"rate.rows_per_file must be a finite number, got '430'"),
    ],
)
def test_bad_rate_is_named(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidDeclaration, match=message):
        ArrivalRate(**kwargs)  # type: ignore[arg-type]  # wrong on purpose


def test_rate_numbers_become_floats() -> None:
    rate = ArrivalRate(files_per_second=2, rows_per_file=430)
    assert (type(rate.files_per_second), type(rate.rows_per_file)) == (float, float)
    assert rate.files_in(timedelta(seconds=20)) == 40
    assert ArrivalRate(files_per_second=0.001, rows_per_file=1).files_in(timedelta(seconds=20)) == 1


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"mode": "eager"}, "mode must be one of 'static', 'dynamic', got 'eager'"),
        ({"alpha": 0.5}, "alpha and tau_max apply to mode='dynamic' only"),
        ({"mode": "dynamic", "alpha": 0, "tau_max": 30}, "alpha must be a number > 0"),
        ({"mode": "dynamic", "alpha": -1.0, "tau_max": 30}, "alpha must be a number > 0"),
        ({"mode": "dynamic", "alpha": 0.5}, "tau_max must be a positive timedelta or number of seconds"),
        ({"mode": "dynamic", "alpha": 0.5, "tau_max": timedelta(0)}, "tau_max must be a positive"),
        # one file of 430 rows costs 6.5 s by the model
        (
            {"mode": "dynamic", "alpha": 0.5, "tau_max": 6.0},
            r"tau_max \(6 s\) is below the cost of one file of iqp_q6 .*6\.5 s",
        ),
    ],
)
def test_bad_dynamic_mode_fields_are_named(cost_model: Path, overrides: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidDeclaration, match=message):
        declare(**args(cost_model, **overrides))


def test_dynamic_mode_sizes_min_batch_within_alpha_and_tau_max(cost_model: Path) -> None:
    declaration = declare(**args(cost_model, mode="dynamic", alpha=0.5, tau_max=timedelta(seconds=20)))
    assert declaration.mode is Mode.DYNAMIC
    batching = dynamic_batching(declaration, RATE, declaration.fitted_model(ExecutionPath.SPARK_SUBMIT))

    def cost_of(files: int) -> float:  # the model's partial cost, in files of 430 rows
        return 6.5 + (26.0 - 6.5) * (files * 430 - 430) / (17200 - 430)

    assert batching.expected_files == 40
    assert batching.min_batch.alpha_met
    assert batching.min_batch.cost_ratio <= 1.5
    assert cost_of(batching.max_batch) <= 20 < cost_of(batching.max_batch + 1)
    assert batching.min_batch.size <= batching.max_batch
    assert batching.slots == 2 * -(-40 // batching.min_batch.size) + 1


def test_a_static_declaration_has_no_min_batch(cost_model: Path) -> None:
    declaration = declare(**args(cost_model))
    model = declaration.fitted_model(ExecutionPath.SPARK_SUBMIT)
    with pytest.raises(InvalidDeclaration, match="iqp_q6 is declared mode='static': it has no alpha and tau_max"):
        dynamic_batching(declaration, RATE, model)


@pytest.mark.parametrize(
    ("conn_type", "host", "remote"),
    [
        ("spark", "local[2]", None),
        ("spark", "spark://127.0.0.1:7077", None),
        ("spark", "spark://localhost:7077", None),
        ("spark", "spark://spark-master:7077", "spark://spark-master:7077"),
        ("spark", "spark://10.0.0.5:7077,10.0.0.6:7077", "spark://10.0.0.5:7077,10.0.0.6:7077"),
        ("spark", "yarn", "yarn"),
        ("spark_connect", "localhost", None),
        ("spark_connect", "sc://[::1]", None),
        ("spark_connect", "spark-connect", "spark-connect"),
        ("spark_connect", "10.0.0.5", "10.0.0.5"),
        ("livy", "10.0.0.5", None),
        ("spark", None, None),
    ],
)
def test_a_spark_connection_sends_jobs_to_other_machines_unless_local_or_on_loopback(
    conn_type: str, host: str | None, remote: str | None
) -> None:
    assert remote_spark(conn_type, host) == remote
