"""The intermittent queries a DAG file declares, found by running the file as Airflow's parser
does (no database is touched): `iqp check` prices them, the demo runs them, and each `plan`
task prices the ones declared beside its own.
"""

from __future__ import annotations

import runpy
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

    from airflow_iqp.declaration import Declaration
    from airflow_iqp.operators.plan import PlanWindowOperator


def declared(path: Path) -> dict[str, Declaration]:
    """Each IQP DAG the file defines, by DAG id; `InvalidDeclaration` when a declaration is invalid."""
    return {dag_id: plan.declaration for dag_id, plan in plan_tasks(path).items()}


def plan_tasks(path: Path) -> dict[str, PlanWindowOperator]:
    """The `plan` task of each IQP DAG the file defines (its declaration and Spark connection), by DAG id."""
    from airflow.sdk import DAG

    from airflow_iqp.operators.plan import PlanWindowOperator

    dags = (value for value in runpy.run_path(str(path)).values() if isinstance(value, DAG))
    return {dag.dag_id: plan for dag in dags if isinstance(plan := dag.task_dict.get("plan"), PlanWindowOperator)}
