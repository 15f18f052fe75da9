"""Learning from a DAG's own runs: cost models (with their residual spread) and arrival rates.

Pure: numpy, no Airflow or Spark import, so the plan task, the CLI and the simulator share it.
"""

from __future__ import annotations
