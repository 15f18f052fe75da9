"""How ours runs one partial or merge job, one function per execution path.

Every path runs the very jobs the scheduler runs (`partial_job`, `merge_job`: input checked
against the manifest, output committed with its marker), with the benchmark's Spark conf:
- `in_process`: function calls on one warm session in this process (the paper's shared Spark
  context, and the closest stand-in for a Connect server until that path exists);
- `spark_submit`: one application per job, as the Airflow tasks run them today.
A Spark Connect path plugs in as one more function here (a session per job on the server) and
one more entry in JOB_PATHS; the policies in `ours.py` do not change.

This is the one module of the benchmark that knows the jobs' command line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from airflow_iqp.constants import ExecutionPath
from airflow_iqp.exceptions import IqpError
from airflow_iqp.settings import python_path, spark_local_ip

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from pyspark.sql import SparkSession

Batch = dict[str, list[Path]]  # stream -> the batch's files
JOBS_DIR = Path(__file__).resolve().parents[2] / "airflow_iqp" / "spark" / "jobs"
REPO_ROOT = Path(__file__).resolve().parents[2]


class JobFailed(IqpError):
    """A partial or merge job exited with an error; the message carries its last lines."""


class JobPath(Protocol):
    """Runs the jobs of one query, blocking until each has committed its output."""

    keeps_session: bool  # a warm session outlives the jobs (then a warm-up before the window is fair)

    def partial(self, batch: Batch, output: Path) -> None:
        """The partial aggregate of `batch` into `output`."""
        ...

    def merge(self, partials: Sequence[Path], output: Path) -> None:
        """The merge of committed `partials` into `output` (one Parquet file, ORDER BY kept)."""
        ...


def partial_argv(query: str, source: Path, batch: Batch, output: Path) -> list[str]:
    """The partial job's command line; the batch goes in a file beside the output."""
    listing = output.with_name(output.name + ".batch.json")
    listing.parent.mkdir(parents=True, exist_ok=True)
    listing.write_text(json.dumps({s: [str(f) for f in files] for s, files in batch.items()}))
    return [
        "--query",
        query,
        "--batch",
        str(listing),
        "--static",
        str(source / "static"),
        "--manifest",
        str(source / "manifest.json"),
        "--output",
        str(output),
    ]


def merge_argv(query: str, partials: Sequence[Path], output: Path) -> list[str]:
    return ["--query", query, "--output", str(output), *map(str, partials)]


class InProcess:
    """The jobs' `run` functions on the session this process holds (they find it with getOrCreate)."""

    keeps_session = True

    def __init__(self, spark: SparkSession, query: str, source: Path) -> None:
        self.spark = spark
        self.query = query
        self.source = source

    def partial(self, batch: Batch, output: Path) -> None:
        from airflow_iqp.spark.jobs import partial_job

        partial_job.run(partial_job.parse_args(partial_argv(self.query, self.source, batch, output)))

    def merge(self, partials: Sequence[Path], output: Path) -> None:
        from airflow_iqp.spark.jobs import merge_job

        merge_job.run(merge_job.parse_args(merge_argv(self.query, partials, output)))


class SparkSubmit:
    """One `spark-submit` application per job, with the benchmark's Spark conf."""

    keeps_session = False

    def __init__(self, conf: Mapping[str, str], query: str, source: Path) -> None:
        self.query = query
        self.source = source
        self.command = [str(Path(sys.executable).with_name("spark-submit"))]
        for key, value in conf.items():
            self.command += ["--conf", f"{key}={value}"]
        self.env = {
            **os.environ,
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": spark_local_ip(),
            "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), *python_path()]),
        }

    def partial(self, batch: Batch, output: Path) -> None:
        self._submit("partial_job.py", partial_argv(self.query, self.source, batch, output), output)

    def merge(self, partials: Sequence[Path], output: Path) -> None:
        self._submit("merge_job.py", merge_argv(self.query, partials, output), output)

    def _submit(self, job: str, argv: list[str], output: Path) -> None:
        log = output.with_name(output.name + ".log")
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("w") as sink:
            done = subprocess.run([*self.command, str(JOBS_DIR / job), *argv], env=self.env, stdout=sink, stderr=sink)
        if done.returncode != 0:
            tail = "\n".join(log.read_text().strip().splitlines()[-5:])
            raise JobFailed(f"{job} exited with {done.returncode} (log {log}):\n{tail}")


def session(conf: Mapping[str, str], app: str = "iqp-vs-structured-streaming") -> SparkSession:
    """The benchmark's Spark session in this process, with the shared conf (and any extra keys)."""
    os.environ["SPARK_LOCAL_IP"] = spark_local_ip()  # the JVM Spark starts reads it from the environment
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app)
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def in_process(conf: Mapping[str, str], query: str, source: Path) -> JobPath:
    return InProcess(session(conf, "iqp-ours-in-process"), query, source)


def spark_submit(conf: Mapping[str, str], query: str, source: Path) -> JobPath:
    return SparkSubmit(conf, query, source)


JOB_PATHS: Mapping[ExecutionPath, Callable[[Mapping[str, str], str, Path], JobPath]] = {
    ExecutionPath.IN_PROCESS: in_process,
    ExecutionPath.SPARK_SUBMIT: spark_submit,
}
