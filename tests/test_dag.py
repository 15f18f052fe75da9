"""The example DAG files and intermittent_query(): what a user copies, and what it builds."""

from __future__ import annotations

import importlib.util
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from airflow.sdk import DAG, Asset
from airflow.sdk.definitions.deadline import DeadlineReference
from airflow.serialization.serialized_objects import DagSerialization

from airflow_iqp.dag import intermittent_query, result_asset
from airflow_iqp.declaration import declare
from airflow_iqp.exceptions import InvalidDeclaration
from airflow_iqp.operators.late import LateFilesOperator
from airflow_iqp.operators.merge import FinalMergeOperator
from airflow_iqp.operators.plan import PlanWindowOperator
from airflow_iqp.streams.spec import FileStream
from airflow_iqp.timetables.window import WindowTimetable

if TYPE_CHECKING:
    from types import ModuleType

    from airflow_iqp.declaration import Declaration

DAGS = Path(__file__).resolve().parents[1] / "dags"
TASKS = ["plan", "partial_aggregate", "final_merge", "late_files"]


def load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def declaration_of(dag: DAG) -> Declaration:
    plan = dag.get_task("plan")
    assert isinstance(plan, PlanWindowOperator)
    return plan.declaration


@pytest.fixture
def demo_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Where the example DAG files find their streams, static tables and results."""
    for variable, folder in (("IQP_LANDING", "landing"), ("IQP_STATIC", "static"), ("IQP_RESULTS", "results")):
        monkeypatch.setenv(variable, str(tmp_path / folder))
    return tmp_path


@pytest.mark.parametrize("name", ["iqp_q1", "iqp_q6", "iqp_q14"])
def test_example_dag_builds_plan_partials_merge_late_files(name: str, demo_env: Path) -> None:
    dag = load(DAGS / f"{name}.py").dag
    assert dag.dag_id == name
    assert isinstance(dag.timetable, WindowTimetable)
    assert dag.timetable.window >= timedelta(minutes=1)
    assert [t.task_id for t in dag.topological_sort()] == TASKS
    assert declaration_of(dag).streams["lineitem"] == FileStream(str(demo_env / "landing" / "lineitem"))
    partial = dag.get_task("partial_aggregate")
    assert partial.map_index_template == "{{ batch_label }}"
    # No pool: the dispatcher orders Spark jobs across DAGs, Airflow's default pool only counts tasks.
    assert partial.partial_kwargs.get("pool", "default_pool") == "default_pool"
    merge = dag.get_task("final_merge")
    assert isinstance(merge, FinalMergeOperator)
    assert merge.pool == "default_pool"
    assert merge.trigger_rule == "none_failed"
    assert merge.outlets == [Asset(name=f"{name}.result", uri=(demo_env / "results" / name).as_uri())]
    late = dag.get_task("late_files")
    assert isinstance(late, LateFilesOperator)
    assert late.trigger_rule == "all_done"  # after a failed merge too: its late files are still recorded
    # as the DAG processor stores it for the scheduler: late_files starts in the triggerer
    stored = DagSerialization.from_dict(DagSerialization.to_dict(dag)).get_task("late_files")
    assert stored.start_from_trigger
    assert stored.start_trigger_args is not None
    assert stored.start_trigger_args.trigger_cls == "airflow_iqp.triggers.late_start.LateFilesStartTrigger"
    assert stored.start_trigger_args.next_method == "on_started"


def test_bad_dag_file_fails_at_parse_time(tmp_path: Path) -> None:
    """The example, declared with the packaged model as a fitted file (the one model a parse can
    check a deadline with) and a deadline no batch can meet.
    """
    bad = tmp_path / "bad_dag.py"
    bad.write_text(
        (DAGS / "iqp_q6.py")
        .read_text()
        .replace("deadline=timedelta(seconds=45)", "deadline=timedelta(seconds=1)")
        .replace('cost_model="learn",', 'cost_model="q6",')
    )
    with pytest.raises(InvalidDeclaration, match="earliest feasible deadline"):
        load(bad)


@pytest.mark.parametrize(
    ("setting", "value", "message"),
    [
        ("POLICY", "fifo", r"\[iqp\] policy must be one of edf, llf, sjf, rr, got 'fifo' \(AIRFLOW__IQP__POLICY\)"),
        ("RESOURCES", "0", r"\[iqp\] resources must be >= 1, got 0 \(AIRFLOW__IQP__RESOURCES\)"),
        ("RESOURCES", "two", r"\[iqp\] resources = 'two' is not a number \(AIRFLOW__IQP__RESOURCES\)"),
        ("LEASE_SECONDS", "1", r"\[iqp\] lease_seconds must be >= 5, got 1 \(AIRFLOW__IQP__LEASE_SECONDS\)"),
    ],
)
def test_bad_dispatcher_config_fails_at_parse_time(
    setting: str, value: str, message: str, monkeypatch: pytest.MonkeyPatch, demo_env: Path
) -> None:
    monkeypatch.setenv(f"AIRFLOW__IQP__{setting}", value)
    with pytest.raises(InvalidDeclaration, match=message):
        load(DAGS / "iqp_q6.py")


def test_dynamic_dag_maps_slots(demo_env: Path) -> None:
    dag = load(DAGS / "iqp_q14.py").dag
    assert "dynamic" in dag.doc_md
    assert [t.task_id for t in dag.topological_sort()] == TASKS
    assert declaration_of(dag).static["part"].path == str(demo_env / "static" / "part")


def test_a_users_dag_file_reads_its_query_beside_it_and_learns(tmp_path: Path) -> None:
    (tmp_path / "sales_by_category.sql").write_text(
        "select category, sum(amount) as total from sales join products using (product_id) group by category\n"
    )
    dag_file = """
from datetime import UTC, datetime, timedelta
from airflow_iqp import FileStream, intermittent_query
dag = intermittent_query(
    query="sales_by_category.sql",
    window=timedelta(minutes=10),
    deadline=timedelta(minutes=5),
    streams={"sales": FileStream("TMP/sales", window_by="path", pattern="dt={date}/hour={hour}")},
    static={"products": "TMP/products"},
    output="s3://bucket/results/{dag_id}/{window_start}",
    on_late="remerge",
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
)
"""
    (tmp_path / "sales_dag.py").write_text(dag_file.replace("TMP", str(tmp_path)))
    dag = load(tmp_path / "sales_dag.py").dag
    assert dag.dag_id == "iqp_sales_by_category"
    declaration = declaration_of(dag)
    assert declaration.query.path == tmp_path / "sales_by_category.sql"
    assert (declaration.rate, declaration.cost_model) == ("learn", "learn")
    assert declaration.on_late == "remerge"
    assert dag.get_task("final_merge").outlets == [
        Asset(name="iqp_sales_by_category.result", uri="s3://bucket/results/iqp_sales_by_category")
    ]


@pytest.mark.parametrize(
    ("output", "uri"),
    [
        ("/data/results/{dag_id}/{window_start}", "file:///data/results/iqp_q6"),
        ("/data/results/{query}/{window_start}_{window_end}", "file:///data/results/q6"),
        ("/data/my results/{window_end}", "file:///data/my%20results"),
        ("file:///data/results/{dag_id}/{window_start}", "file:///data/results/iqp_q6"),
        ("s3://bucket/results/{dag_id}/{window_start}", "s3://bucket/results/iqp_q6"),
        ("s3://bucket/results/{dag_id}/dt={window_start}/", "s3://bucket/results/iqp_q6/dt="),
    ],
)
def test_the_result_asset_is_the_outputs_prefix_before_the_window(output: str, uri: str) -> None:
    declaration = declare(
        dag_id="iqp_q6",
        query="q6",
        window=timedelta(minutes=2),
        deadline=timedelta(minutes=1),
        streams={"lineitem": FileStream("/data/lineitem")},
        output=output,
    )
    asset = result_asset(declaration)
    assert (asset.name, asset.uri) == ("iqp_q6.result", uri)


def test_intermittent_query_names_the_dag_and_refuses_a_bad_output(tmp_path: Path) -> None:
    def build(output: str, dag_id: str | None = None) -> DAG:
        return intermittent_query(
            query="q6",
            window=timedelta(minutes=2),
            deadline=timedelta(minutes=1),
            streams={"lineitem": FileStream(str(tmp_path / "lineitem"))},
            output=output,
            start_date=datetime(2026, 1, 1, tzinfo=UTC),
            dag_id=dag_id,
        )

    assert build(str(tmp_path / "{window_start}")).dag_id == "iqp_q6"
    dag = build(str(tmp_path / "{window_start}"), dag_id="revenue")
    assert dag.dag_id == "revenue"
    assert declaration_of(dag).dag_id == "revenue"
    with pytest.raises(InvalidDeclaration, match="must be an absolute path or a URI"):
        build("results/{window_start}")


@pytest.mark.parametrize(
    ("connection", "where"),
    [
        ({"conn_type": "spark", "host": "spark://spark-master:7077"}, "spark://spark-master:7077"),
        ({"conn_type": "spark_connect", "host": "spark-connect", "port": 15002}, "spark-connect"),
    ],
)
def test_a_cluster_on_other_machines_without_a_shared_work_dir_is_refused_at_parse_time(
    connection: dict[str, object], where: str, monkeypatch: pytest.MonkeyPatch, demo_env: Path
) -> None:
    """The example DAGs declare no work_dir: on a loopback Connect server they parse; on a
    cluster whose executors run elsewhere the file is refused, saying what to declare; declared,
    the work_dir is taken to be shared.
    """
    monkeypatch.setenv("AIRFLOW_CONN_IQP_SPARK", json.dumps({"conn_type": "spark_connect", "host": "localhost"}))
    assert load(DAGS / "iqp_q6.py").dag.dag_id == "iqp_q6"
    monkeypatch.setenv("AIRFLOW_CONN_IQP_SPARK", json.dumps(connection))
    with pytest.raises(
        InvalidDeclaration,
        match=rf"work_dir is not declared.*sends the jobs to {where}, .*declare work_dir= a directory that every "
        "Airflow worker and every Spark node mount at the same path",
    ):
        load(DAGS / "iqp_q6.py")
    dag = intermittent_query(
        query="q6",
        window=timedelta(minutes=2),
        deadline=timedelta(minutes=1),
        streams={"lineitem": FileStream(str(demo_env / "lineitem"))},
        output=str(demo_env / "{window_start}"),
        start_date=datetime(2026, 1, 1, tzinfo=UTC),
        work_dir="/shared/iqp",
    )
    merge = dag.get_task("final_merge")
    assert isinstance(merge, FinalMergeOperator)
    assert merge.work_dir == "/shared/iqp"


def test_each_window_has_an_airflow_deadline_alert_at_its_deadline(demo_env: Path) -> None:
    dag = load(DAGS / "iqp_q6.py").dag
    (alert,) = dag.deadline
    # a scheduled run's logical date is its window's start; the result is due 45 s after the window ends
    assert alert.reference == DeadlineReference.DAGRUN_LOGICAL_DATE
    assert alert.interval == timedelta(minutes=2) + timedelta(seconds=45)
    assert alert.callback.path == "airflow_iqp.deadlines.log_missed_window"
    # as the DAG processor stores it for the scheduler
    (stored,) = DagSerialization.to_dict(dag)["dag"]["deadline"]
    assert stored["reference"] == {"reference_type": "DagRunLogicalDateDeadline"}
    assert stored["interval"]["__data__"] == 165.0
    assert stored["callback"]["__data__"]["path"] == "airflow_iqp.deadlines.log_missed_window"


def test_a_dag_may_bring_its_own_deadline_callback(demo_env: Path) -> None:
    source = (
        (DAGS / "iqp_q6.py")
        .read_text()
        .replace(
            'cost_model="learn",',
            'cost_model="learn", deadline_callback=SyncCallback("my_alerts.page_oncall", kwargs={"team": "data"}),',
        )
    )
    source = source.replace("from airflow_iqp import", "from airflow.sdk import SyncCallback\nfrom airflow_iqp import")
    own = demo_env / "own_callback.py"
    own.write_text(source)
    (alert,) = load(own).dag.deadline
    assert (alert.callback.path, alert.callback.kwargs) == ("my_alerts.page_oncall", {"team": "data"})
