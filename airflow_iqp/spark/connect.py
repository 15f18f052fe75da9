"""One job on a Spark Connect server: in a session of its own or its window's, tagged,
interruptible from another thread.

A job attempt gets a new server-side session (a fresh `session_id` in the URL), released when
it ends, unless it is given its window's session (`window_session`): then the window's jobs
run one after another in one server-side session, which the window's last job (its merge)
releases. A session of its own costs the server 0.3-0.65 CPU-s more per job (its session state
built again, the file listings of its static tables made again; `benchmarks/connect_overhead.py
--cpu`), and a dynamic window runs many small jobs. Nothing of one job is left for the next in
a shared session: the jobs bind their inputs as DataFrame parameters of the query, not as temp
views, and set no SQL confs. A window whose session was released already (a job cleared after
the merge) or dropped by the server when idle gets a session of its own.
The session's operations carry the job's tag; `interrupt()` cancels
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
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    from airflow_iqp.spark.jobs.spec import MergeSpec, PartialSpec


DEFAULT_PORT = 15002  # the Connect client's, when the URL names none
PROBE_SECONDS = 5.0
SESSION_CLOSED = "INVALID_HANDLE.SESSION_CLOSED"  # the server's error for a released or expired session


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


def window_session(dag_id: str, window_id: int) -> str:
    """The session id every Connect job of the window shares (the same in every task process)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"airflow-iqp:{dag_id}:{window_id}"))


class ConnectJob:
    """A Connect session for one job attempt, as a context manager: `with ConnectJob(url, tag)
    as job: partial_job.run(spec, job.spark, ...)`. With `shared` (a `window_session`), the job
    runs in the window's session and leaves it open for the window's next job, unless `last`.
    """

    def __init__(self, url: str, tag: str, shared: str | None = None, last: bool = False) -> None:
        self.base = url
        self.session_id = shared or str(uuid.uuid4())
        self.url = session_url(url, self.session_id)
        self.tag = tag
        self.shared = shared is not None
        self.last = last
        self._spark: SparkSession | None = None

    @property
    def release(self) -> bool:
        """Whether leaving releases the session on the server: its own, or its window's last job."""
        return not self.shared or self.last

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
            if self.shared and not _open(spark):  # the window's session is gone: one of its own
                spark.client.close()
                self.session_id, self.shared = str(uuid.uuid4()), False
                self.url = session_url(self.base, self.session_id)
                spark = ConnectSession.builder.remote(self.url).create()
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
        if spark is None:
            return
        if self.release:
            spark.stop()  # releases this session only; other jobs' sessions on the server go on
        else:
            spark.client.close()  # the window's next job opens it again


def _open(spark: ConnectSession) -> bool:
    """Whether the server still holds the session (one round trip); False if it was released
    or expired, any other failure raised.
    """
    from pyspark.errors import PySparkException

    try:
        _ = spark.version  # asks the server
    except PySparkException as err:
        if err.getCondition() == SESSION_CLOSED:
            return False
        raise
    return True
