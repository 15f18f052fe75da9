"""How ours runs one partial or merge job, one function per execution path.

Every path runs the very jobs the scheduler runs (`partial_job`, `merge_job`: inputs checked,
output committed with its marker), from the same job specs, with the benchmark's Spark conf:
- `in_process`: function calls on one warm session in this process (the paper's shared Spark
  context);
- `spark_submit`: one application per job, as the Airflow tasks run on a `spark` connection;
- `spark_connect`: a Connect session of its own per job (as `ConnectJob` opens one in the task on
  a `spark_connect` connection), on a server this path starts with the project's
  `connect_server` and stops in `close()`.
The policies in `ours.py` do not change with the path.

This is the one module of the benchmark that knows the jobs' specs and command line.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from airflow_iqp.constants import ExecutionPath
from airflow_iqp.exceptions import IqpError
from airflow_iqp.queries import load_query
from airflow_iqp.settings import driver_address, python_path
from airflow_iqp.spark import connect_server
from airflow_iqp.spark.jobs.spec import MergeSpec, PartialSpec, StaticInput, StreamInput
from benchmarks.ssbench import producer

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping, Sequence

    from pyspark.sql import SparkSession

    from airflow_iqp.queries import QueryDefinition

Batch = dict[str, list[Path]]  # stream -> the batch's files
JOBS_DIR = Path(__file__).resolve().parents[2] / "airflow_iqp" / "spark" / "jobs"
REPO_ROOT = Path(__file__).resolve().parents[2]
CONNECT_TAG = "iqp-ssbench"


class JobFailed(IqpError):
    """A partial or merge job exited with an error; the message carries its last lines."""


class JobPath(Protocol):
    """Runs the jobs of one query, blocking until each has committed its output."""

    warm_spark: bool  # a warm Spark (session or server) outlives the jobs: a warm-up before the window is fair
    spark_pids: frozenset[int]  # processes of its own that run the jobs' Spark work (a server), if any

    def partial(self, batch: Batch, output: Path) -> None:
        """The partial aggregate of `batch` into `output`."""
        ...

    def merge(self, partials: Sequence[Path], output: Path) -> None:
        """The merge of committed `partials` into `output` (one Parquet file, ORDER BY kept)."""
        ...

    def close(self) -> None:
        """Stop what the path started (a server); the jobs' outputs stay."""
        ...


def partial_spec(query: QueryDefinition, source: Path, batch: Batch, output: Path) -> PartialSpec:
    """The partial job's spec, as the operators build it: the batch's files, the generated static tables."""
    return PartialSpec(
        name=query.name,
        query=str(query.path),
        streams={s: StreamInput(files=[str(f.absolute()) for f in files]) for s, files in batch.items()},
        static={t: StaticInput(path=str(producer.static_dir(source, t).absolute())) for t in query.static_tables},
        output=str(output.absolute()),
    )


def merge_spec(query: QueryDefinition, partials: Sequence[Path], output: Path) -> MergeSpec:
    return MergeSpec(
        name=query.name,
        query=str(query.path),
        streams=list(query.streams),
        partials=[str(p.absolute()) for p in partials],
        output=str(output.absolute()),
    )


class InProcess:
    """The jobs' `run` functions on the session this process holds (they find it with getOrCreate)."""

    warm_spark = True
    spark_pids: frozenset[int] = frozenset()

    def __init__(self, spark: SparkSession, query: str, source: Path) -> None:
        self.spark = spark
        self.query = load_query(query)
        self.source = source

    def partial(self, batch: Batch, output: Path) -> None:
        from airflow_iqp.spark.jobs import partial_job

        partial_job.run(partial_spec(self.query, self.source, batch, output))

    def merge(self, partials: Sequence[Path], output: Path) -> None:
        from airflow_iqp.spark.jobs import merge_job

        merge_job.run(merge_spec(self.query, partials, output))

    def close(self) -> None:
        """Nothing to stop: the session ends with this process."""


class SparkSubmit:
    """One `spark-submit` application per job, with the benchmark's Spark conf."""

    warm_spark = False
    spark_pids: frozenset[int] = frozenset()

    def __init__(self, conf: Mapping[str, str], query: str, source: Path) -> None:
        self.query = load_query(query)
        self.source = source
        self.command = [str(Path(sys.executable).with_name("spark-submit"))]
        for key, value in conf.items():
            self.command += ["--conf", f"{key}={value}"]
        self.env = {
            **os.environ,
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            **driver_address(conf["spark.master"]).env,
            "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), *python_path()]),
        }

    def partial(self, batch: Batch, output: Path) -> None:
        self._submit("partial_job.py", partial_spec(self.query, self.source, batch, output), output)

    def merge(self, partials: Sequence[Path], output: Path) -> None:
        self._submit("merge_job.py", merge_spec(self.query, partials, output), output)

    def close(self) -> None:
        """Nothing to stop: each application ended with its job."""

    def _submit(self, job: str, spec: PartialSpec | MergeSpec, output: Path) -> None:
        """The job's spec in a file beside its output (as the operators write it), then spark-submit."""
        log = output.with_name(output.name + ".log")
        spec_file = output.with_name(output.name + ".spec.json")
        log.parent.mkdir(parents=True, exist_ok=True)
        spec_file.write_text(spec.to_json())
        argv = [*self.command, str(JOBS_DIR / job), "--spec", str(spec_file)]
        with log.open("w") as sink:
            done = subprocess.run(argv, env=self.env, stdout=sink, stderr=sink)
        if done.returncode != 0:
            tail = "\n".join(log.read_text().strip().splitlines()[-5:])
            raise JobFailed(f"{job} exited with {done.returncode} (log {log}):\n{tail}")


def session(conf: Mapping[str, str], app: str = "iqp-vs-structured-streaming") -> SparkSession:
    """The benchmark's Spark session in this process, with the shared conf (and any extra keys)."""
    os.environ.update(driver_address(conf["spark.master"]).env)  # the JVM Spark starts reads it from the environment
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app)
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


class SparkConnect:
    """One Connect session per window, as the tasks share their window's (`connect.window_session`),
    on a server started here with the benchmark's conf: the master and driver memory at the
    server's start (the UI keys the server sets alike), the `spark.sql.*` keys in the session
    before each job runs. A merge ends its window: it releases the session, and the next job
    opens a new window's.
    """

    warm_spark = True

    def __init__(self, conf: Mapping[str, str], query: str, source: Path, state_dir: Path) -> None:
        self.query = load_query(query)
        self.source = source
        self.state_dir = state_dir
        self.session_conf = {k: v for k, v in conf.items() if k.startswith("spark.sql.")}
        self.server = connect_server.start(
            state_dir,
            port=connect_server.free_port(),
            master=conf["spark.master"],
            driver_memory=conf["spark.driver.memory"],
        )
        self.spark_pids = frozenset({self.server.pid})
        self.window = str(uuid.uuid4())

    def partial(self, batch: Batch, output: Path) -> None:
        from airflow_iqp.spark.jobs import partial_job

        spec = partial_spec(self.query, self.source, batch, output)
        with self._session(last=False) as spark:
            partial_job.run(spec, spark)

    def merge(self, partials: Sequence[Path], output: Path) -> None:
        from airflow_iqp.spark.jobs import merge_job

        spec = merge_spec(self.query, partials, output)
        with self._session(last=True) as spark:
            merge_job.run(spec, spark)
        self.window = str(uuid.uuid4())

    def close(self) -> None:
        connect_server.stop(self.state_dir)

    @contextmanager
    def _session(self, last: bool) -> Iterator[SparkSession]:
        from airflow_iqp.spark.connect import ConnectJob

        with ConnectJob(self.server.url_with_token, CONNECT_TAG, self.window, last) as job:
            for key, value in self.session_conf.items():
                job.spark.conf.set(key, value)
            yield job.spark


def in_process(conf: Mapping[str, str], query: str, source: Path, workdir: Path) -> JobPath:
    return InProcess(session(conf, "iqp-ours-in-process"), query, source)


def spark_submit(conf: Mapping[str, str], query: str, source: Path, workdir: Path) -> JobPath:
    return SparkSubmit(conf, query, source)


def spark_connect(conf: Mapping[str, str], query: str, source: Path, workdir: Path) -> JobPath:
    return SparkConnect(conf, query, source, workdir / "connect-server")


JOB_PATHS: Mapping[ExecutionPath, Callable[[Mapping[str, str], str, Path, Path], JobPath]] = {
    ExecutionPath.IN_PROCESS: in_process,
    ExecutionPath.SPARK_SUBMIT: spark_submit,
    ExecutionPath.SPARK_CONNECT: spark_connect,
}
