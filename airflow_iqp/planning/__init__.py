"""The planning core: cost models, arrival curves, single-query planners and MinBatchSize.

Pure Python plus OR-Tools: no Airflow or Spark import, so it is fast to test and to call from
schedulers and triggers.
"""

from __future__ import annotations

from airflow_iqp.planning.arrival import ArrivalCurve
from airflow_iqp.planning.cost import LinearCost, PiecewiseLinearCost
from airflow_iqp.planning.min_batch import MinBatch, min_batch_size
from airflow_iqp.planning.plan import Batch, Merge, Plan
from airflow_iqp.planning.single_query import plan_single_query

__all__ = [
    "ArrivalCurve",
    "Batch",
    "LinearCost",
    "Merge",
    "MinBatch",
    "PiecewiseLinearCost",
    "Plan",
    "min_batch_size",
    "plan_single_query",
]
