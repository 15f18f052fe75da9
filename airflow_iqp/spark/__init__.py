"""The Spark side: run a decomposed query's partial and merge steps, and the spark-submit jobs.

Only this package touches pyspark, so planning and the CLI import without a JVM.
"""

from __future__ import annotations

from airflow_iqp.spark.runner import run_merge, run_partial

__all__ = ["run_merge", "run_partial"]
