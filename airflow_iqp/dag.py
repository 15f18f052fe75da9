"""intermittent_query(): the few lines a DAG file needs for one deadline-bound query.

    dag = intermittent_query(
        query="sales_by_category.sql",
        window=timedelta(minutes=10),
        deadline=timedelta(minutes=5),
        streams={"sales": FileStream("s3://bucket/sales/", conn_id="aws_default")},
        static={"products": "s3://bucket/dim/products/"},
        output="s3://bucket/results/{dag_id}/{window_start}",
        start_date=datetime(2026, 1, 1, tzinfo=UTC),
    )

One run per window, started at the window start: `plan`, then `partial_aggregate` mapped over
the planned batches (static) or batch slots (mode="dynamic", with alpha and tau_max), then
`final_merge`, which publishes the result and emits the DAG's result Asset, then `late_files`,
which records files that came for earlier windows after they merged (and re-merges them when
asked). Every Spark job waits in the triggerer until the dispatcher, shared by all IQP DAGs,
grants it the Spark resource ([iqp] policy and resources in the Airflow config). The DAG
declares an Airflow Deadline Alert at each window's deadline (airflow_iqp.deadlines), calling
`deadline_callback` (by default a warning in the triggerer's log) when a window misses it; a run
of `airflow dags test` goes without it (DeadlineDAG).
"""

from __future__ import annotations

import inspect
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from airflow.sdk import DAG, Asset

from airflow_iqp.constants import Mode, OnCorrupt, OnLate
from airflow_iqp.deadlines import DeadlineDAG, window_deadline_alert
from airflow_iqp.declaration import LEARN, ArrivalRate, check_work_dir, declare
from airflow_iqp.exceptions import InvalidDeclaration, InvalidSetting
from airflow_iqp.operators.late import LateFilesOperator
from airflow_iqp.operators.merge import FinalMergeOperator
from airflow_iqp.operators.partial import PartialAggregateOperator
from airflow_iqp.operators.plan import PlanWindowOperator
from airflow_iqp.settings import DispatchSettings, airflow_home, deadline_alerts
from airflow_iqp.timetables.window import WindowTimetable

if TYPE_CHECKING:
    from collections.abc import Mapping

    from airflow.sdk.definitions.callback import Callback

    from airflow_iqp.declaration import Declaration
    from airflow_iqp.streams.spec import FileStream


def default_work_dir() -> Path:
    """Where job specs, partial outputs and merged results go before publishing, unless the DAG names a work_dir."""
    return airflow_home() / "iqp"


def result_asset(declaration: Declaration) -> Asset:
    """The DAG's result: one Asset for all its windows, at the output location's fixed prefix;
    each event's extra names the window and where its result is.
    """
    collection = declaration.output.collection(dag_id=declaration.dag_id, query=declaration.name)
    uri = collection if urlsplit(collection).scheme else Path(collection).as_uri()
    return Asset(name=f"{declaration.dag_id}.result", uri=uri)


def intermittent_query(
    *,
    query: str | Path,
    window: timedelta,
    deadline: timedelta,
    streams: Mapping[str, FileStream],
    output: str,
    start_date: datetime,
    static: Mapping[str, str] | None = None,
    rate: ArrivalRate | Literal["learn"] = LEARN,
    cost_model: str | Path = LEARN,
    mode: Mode | Literal["static", "dynamic"] = Mode.STATIC,
    alpha: float | None = None,
    tau_max: timedelta | float | None = None,
    on_late: OnLate | Literal["record", "remerge"] = OnLate.RECORD,
    on_corrupt: OnCorrupt | Literal["fail", "quarantine"] = OnCorrupt.FAIL,
    output_conn_id: str | None = None,
    dag_id: str | None = None,
    work_dir: str | Path | None = None,
    spark_conn_id: str = "iqp_spark",
    retries: int = 3,
    retry_delay: timedelta = timedelta(seconds=5),
    deadline_callback: Callback | None = None,
    **dag_kwargs: Any,
) -> DAG:
    """Build the DAG; a bad declaration raises InvalidDeclaration while the file is parsed.

    A relative `query` or `cost_model` path is taken relative to the DAG file's folder; a bare
    name (`"q6"`) is one of the packaged TPC-H examples.
    """
    frame = inspect.currentframe()
    caller = frame.f_back.f_globals.get("__file__") if frame is not None and frame.f_back is not None else None
    base_dir = Path(caller).resolve().parent if isinstance(caller, str) else None
    declaration = declare(
        dag_id=dag_id or f"iqp_{Path(str(query)).stem}",
        query=query,
        window=window,
        deadline=deadline,
        streams=streams,
        static=static,
        output=output,
        output_conn_id=output_conn_id,
        rate=rate,
        cost_model=cost_model,
        mode=mode,
        alpha=alpha,
        tau_max=tau_max,
        on_late=on_late,
        on_corrupt=on_corrupt,
        base_dir=base_dir,
    )
    try:
        DispatchSettings.load()
    except InvalidSetting as err:
        raise InvalidDeclaration(f"Airflow config: {err}") from None
    check_work_dir(work_dir, spark_conn_id)
    work = str(work_dir or default_work_dir())
    spark_task = {"conn_id": spark_conn_id, "retries": retries, "retry_delay": retry_delay}
    with DeadlineDAG(
        dag_id=declaration.dag_id,
        schedule=WindowTimetable(window),
        start_date=start_date,
        catchup=dag_kwargs.pop("catchup", False),
        tags=["iqp", declaration.name],
        doc_md=(
            f"Intermittent query **{declaration.name}** ({declaration.mode.value}): windows of {window}, "
            f"result due {deadline} after each, published to `{declaration.output.template}`."
        ),
        deadline=window_deadline_alert(window, deadline, deadline_callback) if deadline_alerts() else None,
        **dag_kwargs,
    ) as dag:
        plan = PlanWindowOperator(task_id="plan", declaration=declaration, spark_conn_id=spark_conn_id)
        partials = PartialAggregateOperator.partial(
            task_id="partial_aggregate",
            declaration=declaration,
            work_dir=work,
            name=f"iqp-{declaration.dag_id}-partial",
            map_index_template="{{ batch_label }}",
            **spark_task,
        ).expand(batch=plan.output)
        merge = FinalMergeOperator(
            task_id="final_merge",
            declaration=declaration,
            work_dir=work,
            window_id="{{ ti.xcom_pull(task_ids='plan')[0]['window_id'] }}",
            result=result_asset(declaration),
            name=f"iqp-{declaration.dag_id}-merge",
            trigger_rule="none_failed",
            **spark_task,
        )
        late = LateFilesOperator(
            task_id="late_files",
            declaration=declaration,
            work_dir=work,
            name=f"iqp-{declaration.dag_id}-late",
            trigger_rule="all_done",
            **spark_task,
        )
        plan >> partials >> merge >> late
    return dag
