"""The intermittent queries a DAG file declares, found by running the file as Airflow's parser
does (no database is touched): `iqp check` prices them, the demo runs them.
"""

from __future__ import annotations

import runpy
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

    from airflow_iqp.declaration import Declaration


def declared(path: Path) -> dict[str, Declaration]:
    """Each IQP DAG the file defines, by DAG id; `InvalidDeclaration` when a declaration is invalid."""
    from airflow.sdk import DAG

    from airflow_iqp.operators.plan import PlanWindowOperator

    dags = (value for value in runpy.run_path(str(path)).values() if isinstance(value, DAG))
    return {
        dag.dag_id: plan.declaration
        for dag in dags
        if isinstance(plan := dag.task_dict.get("plan"), PlanWindowOperator)
    }
