"""Running one partial or merge job and timing it, on each execution path.

Every runner calls the very jobs the scheduler runs (`partial_job`, `merge_job`), so a model
is fitted to the work that will be planned, output commit included.
`InProcessRunner` times the job alone in one shared session; `SubmitRunner` times the whole
`spark-submit` process, since JVM and session start-up are paid by every batch on that path;
`ConnectRunner` runs a job as the operator runs it on Spark Connect, though in a session of its
own on the server (a task's job runs in its window's, which the server has set up already), and
times it as the task records its cost: from the open session to the commit.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from airflow_iqp.settings import driver_address, python_path
from airflow_iqp.spark.jobs.locations import local_path

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import SparkSession

    from airflow_iqp.spark.jobs.spec import MergeSpec, PartialSpec

JOBS_DIR = Path(__file__).resolve().parents[1] / "spark" / "jobs"
REPO_ROOT = Path(__file__).resolve().parents[2]
MASTER = "local[2]"


class Runner(Protocol):
    """Runs one job and returns the seconds it took."""

    def partial(self, spec: PartialSpec) -> float:
        """Time the partial job of `spec`."""
        ...

    def merge(self, spec: MergeSpec) -> float:
        """Time the merge job of `spec`."""
        ...


def spec_file(spec: PartialSpec | MergeSpec) -> Path:
    """Write `spec` beside its output, where a spark-submit job reads it (`--spec`)."""
    output = local_path(spec.output)
    path = output.with_name(output.name + ".spec.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(spec.to_json())
    return path


def local_session() -> SparkSession:
    """The shared session of the in-process path: same master as the spark-submit runs."""
    os.environ.update(driver_address(MASTER).env)  # the JVM Spark starts reads it from the environment
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(MASTER)
        .appName("iqp-fit-cost-model")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")  # a WARN per job would bury the progress bar
    return spark


class InProcessRunner:
    """Jobs as function calls on the active session (the jobs pick it up with getOrCreate)."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark

    def partial(self, spec: PartialSpec) -> float:
        """Time `partial_job.run` in this process."""
        from airflow_iqp.spark.jobs import partial_job

        return _timed(lambda: partial_job.run(spec))

    def merge(self, spec: MergeSpec) -> float:
        """Time `merge_job.run` in this process."""
        from airflow_iqp.spark.jobs import merge_job

        return _timed(lambda: merge_job.run(spec))


class ConnectRunner:
    """Each job in a new session on the Spark Connect server at `url`."""

    def __init__(self, url: str) -> None:
        self.url = url

    def partial(self, spec: PartialSpec) -> float:
        """Time `partial_job.run` in a session of its own, as a task records its job's cost: from
        the open session to the commit (`DispatchedSparkSubmitOperator.run_spark_job`).
        """
        from airflow_iqp.spark.jobs import partial_job

        return self._in_session(lambda spark: partial_job.run(spec, spark))

    def merge(self, spec: MergeSpec) -> float:
        """Time `merge_job.run` in a session of its own, timed as `partial` is."""
        from airflow_iqp.spark.jobs import merge_job

        return self._in_session(lambda spark: merge_job.run(spec, spark))

    def _in_session(self, run: Callable[[SparkSession], object]) -> float:
        from airflow_iqp.spark.connect import ConnectJob

        with ConnectJob(self.url, "iqp-fit-cost-model") as job:
            return _timed(lambda: run(job.spark))


def _timed(run: Callable[[], object]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


class SubmitRunner:
    """One `spark-submit` application per job, timed from launch to exit."""

    def __init__(self, spark_submit: str | None = None) -> None:
        self.spark_submit = spark_submit or str(Path(sys.executable).with_name("spark-submit"))
        self.env = {
            **os.environ,
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            **driver_address(MASTER).env,
            "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), *python_path()]),
        }

    def partial(self, spec: PartialSpec) -> float:
        """Time a spark-submit of `partial_job.py`."""
        return self._submit("partial_job.py", spec_file(spec))

    def merge(self, spec: MergeSpec) -> float:
        """Time a spark-submit of `merge_job.py`."""
        return self._submit("merge_job.py", spec_file(spec))

    def _submit(self, job: str, spec: Path) -> float:
        command = [
            self.spark_submit,
            "--master",
            MASTER,
            "--conf",
            "spark.ui.enabled=false",
            "--conf",
            "spark.ui.showConsoleProgress=false",
            str(JOBS_DIR / job),
            "--spec",
            str(spec),
        ]
        start = time.perf_counter()
        done = subprocess.run(command, env=self.env, capture_output=True, text=True)
        seconds = time.perf_counter() - start
        if done.returncode != 0:
            tail = "\n".join(done.stderr.strip().splitlines()[-5:])
            raise RuntimeError(f"{job} failed with exit code {done.returncode}:\n{tail}")
        return seconds
