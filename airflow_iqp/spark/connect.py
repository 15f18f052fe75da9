"""One job on a Spark Connect server: its own session, tagged, interruptible from another thread.

Every attempt of a job gets a new server-side session (a fresh `session_id` in the URL), so
nothing of an earlier attempt (temp views, SQL confs) leaks into it, and `stop()` releases
exactly that session. The session's operations carry the job's tag; `interrupt()` cancels
them from any thread (the lease keeper calls it when the lease is lost). Tags are
thread-local in the client, so the job must run in the thread that opened the session.
A server that does not answer fails the job at once (the client would retry for ten minutes,
holding the dispatcher's lease), so the task fails and Airflow retries it.

The Connect client's builder is used directly rather than through `pyspark.sql.SparkSession`,
which would mark the whole process as a Connect process (`SPARK_CONNECT_MODE_ENABLED`) and
turn a classic session in the same process (the tests', the verifier's) into a broken one.
"""

from __future__ import annotations

import importlib
import socket
import uuid
from typing import TYPE_CHECKING, cast
from urllib.parse import urlsplit

from airflow_iqp.exceptions import IqpError

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import TracebackType

    from pyspark.sql import SparkSession

    from airflow_iqp.spark.jobs.spec import MergeSpec, PartialSpec


DEFAULT_PORT = 15002  # the Connect client's, when the URL names none
PROBE_SECONDS = 5.0


class ConnectServerDown(IqpError):
    """The Spark Connect server does not accept connections; the message names it."""


def probe(url: str) -> None:
    """ConnectServerDown unless the server in `url` accepts a TCP connection."""
    where = urlsplit(url)
    host, port = where.hostname or "localhost", where.port or DEFAULT_PORT
    try:
        with socket.create_connection((host, port), timeout=PROBE_SECONDS):
            return
    except OSError as err:
        raise ConnectServerDown(
            f"the Spark Connect server at {host}:{port} does not answer ({err}); start it (`iqp connect-server "
            "start`) or fix the Spark connection"
        ) from None


# What a Connect job imports: about a second in a fresh task process (gRPC, Arrow, pandas).
CLIENT_MODULES = (
    "pyspark.sql.connect.session",
    "airflow_iqp.spark.jobs.partial_job",
    "airflow_iqp.spark.jobs.merge_job",
)


def load_client() -> None:
    """Import the Connect client and the jobs now: a task calls it before it can be granted the
    Spark resource, so neither its lease nor its job's measured cost includes the import.
    """
    for name in CLIENT_MODULES:
        importlib.import_module(name)


def session_url(base: str, session_id: str) -> str:
    """`base` (`sc://host:port/;token=...`, as the Spark provider's SparkConnectHook builds it)
    with the session id added; ValueError if `base` names one already.
    """
    if "session_id=" in base:
        raise ValueError(f"the Spark Connect URL {base!r} names a session_id: each job attempt makes its own")
    if not base.startswith("sc://"):
        raise ValueError(f"a Spark Connect URL starts with sc://, got {base!r}")
    base = base.rstrip(";")
    if ";" not in base and not base.endswith("/"):
        base += "/"  # parameters follow the (empty) path
    return f"{base};session_id={session_id}"


class ConnectJob:
    """A Connect session for one job attempt, as a context manager: `with ConnectJob(url, tag)
    as job: partial_job.run(spec, job.spark, ...)`.
    """

    def __init__(self, url: str, tag: str) -> None:
        self.session_id = str(uuid.uuid4())
        self.url = session_url(url, self.session_id)
        self.tag = tag
        self._spark: SparkSession | None = None

    @property
    def spark(self) -> SparkSession:
        """The job's session; only inside the `with` block."""
        if self._spark is None:
            raise RuntimeError("the Connect session is open only inside `with ConnectJob(...)`")
        return self._spark

    def __enter__(self) -> ConnectJob:
        probe(self.url)
        from pyspark.sql.connect.session import SparkSession as ConnectSession

        spark = ConnectSession.builder.remote(self.url).create()
        try:
            spark.addTag(self.tag)
        except BaseException:
            spark.stop()
            raise
        # The Connect session has the classic session's API without subclassing it.
        self._spark = cast("SparkSession", spark)
        return self

    def run(self, spec: PartialSpec | MergeSpec, before_commit: Callable[[], None]) -> None:
        """Run the partial or merge job of `spec` in this session (in the thread that opened it);
        `before_commit` is called right before its output is renamed into place.
        """
        from airflow_iqp.spark.jobs import merge_job, partial_job
        from airflow_iqp.spark.jobs.spec import PartialSpec

        if isinstance(spec, PartialSpec):
            partial_job.run(spec, self.spark, before_commit=before_commit)
        else:
            merge_job.run(spec, self.spark, before_commit=before_commit)

    def interrupt(self) -> list[str]:
        """Cancel the job's running Spark operations (from any thread); their ids."""
        spark = self._spark
        return [] if spark is None else spark.interruptTag(self.tag)

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        spark, self._spark = self._spark, None
        if spark is not None:
            spark.stop()  # releases this session only; other jobs' sessions on the server go on
