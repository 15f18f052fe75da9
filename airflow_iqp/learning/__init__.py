"""Learning from a DAG's own runs: cost models (with their residual spread) and arrival rates.

Pure: numpy, no Airflow or Spark import, so the plan task, the CLI and the simulator share it.
"""

from __future__ import annotations

from airflow_iqp.constants import CostSource
from airflow_iqp.learning.cost import (
    LearnedCost,
    NotEnoughObservations,
    Observation,
    Spread,
    fit_cost,
)
from airflow_iqp.learning.rate import LearnedRate, WindowInput, learned_rate

__all__ = [
    "CostSource",
    "LearnedCost",
    "LearnedRate",
    "NotEnoughObservations",
    "Observation",
    "Spread",
    "WindowInput",
    "fit_cost",
    "learned_rate",
]
