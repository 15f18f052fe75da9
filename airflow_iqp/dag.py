"""intermittent_query(): the few lines a DAG file needs for one deadline-bound query.

    dag = intermittent_query(
        query="q6", window=timedelta(minutes=5), deadline=timedelta(minutes=2),
        landing="/data/landing", rate=ArrivalRate(files_per_second=1, rows_per_file=9300),
        cost_model="q6", start_date=datetime(2026, 1, 1, tzinfo=UTC),
    )

One run per window, started at the window start: `plan`, then `partial_aggregate` mapped over
the planned batches (static) or batch slots (mode="dynamic", with alpha and tau_max), then
`final_merge`. Every Spark job waits in the triggerer until the dispatcher, shared by all IQP
DAGs, grants it the Spark resource ([iqp] policy and resources in the Airflow config).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from airflow.sdk import DAG

from airflow_iqp.constants import Mode
from airflow_iqp.declaration import ArrivalRate, declare
from airflow_iqp.exceptions import InvalidDeclaration, InvalidSetting
from airflow_iqp.operators.merge import FinalMergeOperator
from airflow_iqp.operators.partial import PartialAggregateOperator
from airflow_iqp.operators.plan import PlanWindowOperator
from airflow_iqp.settings import DispatchSettings, airflow_home
from airflow_iqp.timetables.window import WindowTimetable

if TYPE_CHECKING:
    from pathlib import Path


def default_work_dir() -> Path:
    """Where batch files, partial outputs and results go unless the DAG names a work_dir."""
    return airflow_home() / "iqp"


def intermittent_query(
    *,
    query: str,
    window: timedelta,
    deadline: timedelta,
    landing: str | Path,
    rate: ArrivalRate | Literal["learn"],
    cost_model: str | Path,
    start_date: datetime,
    mode: Mode | Literal["static", "dynamic"] = Mode.STATIC,
    alpha: float | None = None,
    tau_max: timedelta | float | None = None,
    dag_id: str | None = None,
    work_dir: str | Path | None = None,
    spark_conn_id: str = "iqp_spark",
    retries: int = 1,
    retry_delay: timedelta = timedelta(seconds=5),
    **dag_kwargs: Any,
) -> DAG:
    """Build the DAG; a bad declaration raises InvalidDeclaration while the file is parsed."""
    declaration = declare(
        query=query,
        window=window,
        deadline=deadline,
        landing=landing,
        rate=rate,
        cost_model=cost_model,
        mode=mode,
        alpha=alpha,
        tau_max=tau_max,
    )
    try:
        DispatchSettings.load()
    except InvalidSetting as err:
        raise InvalidDeclaration(f"Airflow config: {err}") from None
    work = str(work_dir or default_work_dir())
    spark_task = {"conn_id": spark_conn_id, "retries": retries, "retry_delay": retry_delay}
    with DAG(
        dag_id=dag_id or f"iqp_{declaration.name}",
        schedule=WindowTimetable(window),
        start_date=start_date,
        catchup=dag_kwargs.pop("catchup", False),
        tags=["iqp", declaration.name],
        doc_md=(
            f"Intermittent query **{declaration.name}** ({declaration.mode.value}): windows of {window}, "
            f"result due {deadline} after each."
        ),
        **dag_kwargs,
    ) as dag:
        plan = PlanWindowOperator(task_id="plan", declaration=declaration)
        partials = PartialAggregateOperator.partial(
            task_id="partial_aggregate",
            declaration=declaration,
            work_dir=work,
            name=f"iqp-{declaration.name}-partial",
            map_index_template="{{ batch_label }}",
            **spark_task,
        ).expand(batch=plan.output)
        merge = FinalMergeOperator(
            task_id="final_merge",
            declaration=declaration,
            work_dir=work,
            window_id="{{ ti.xcom_pull(task_ids='plan')[0]['window_id'] }}",
            name=f"iqp-{declaration.name}-merge",
            trigger_rule="none_failed",
            **spark_task,
        )
        plan >> partials >> merge
    return dag
