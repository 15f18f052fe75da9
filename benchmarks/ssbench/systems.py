"""What every system under test implements, so the harness runs Structured Streaming and our own
execution paths (the in-process normaliser here; static and dynamic plans through Airflow, on
Spark Connect and on spark-submit, later) through the same replay, measurement and check.

One run of one system on one window:
1. `start(run)` before the first file lands: bring up what the system keeps running (a Spark
   session, a streaming query, a Connect server, Airflow) and say which processes are its Spark
   side and which its orchestrator;
2. the harness starts sampling those processes and the replay; the window's times are known now;
3. `finish(window)` blocks until the system's final result for the window is ready and returns
   it with the system's own account (batches, busy time);
4. the harness stops sampling (the span ends), then calls `close()`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from airflow_iqp.exceptions import IqpError

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

    from benchmarks.ssbench.check import Row
    from benchmarks.ssbench.measure import Selector

# Identical for every system (the protocol's "same Spark conf"): two local cores, the same shuffle
# partitions (they are also the state partitions of a stateful query, frozen at its first batch).
SPARK_CONF: Mapping[str, str] = {
    "spark.master": "local[2]",
    "spark.driver.memory": "1g",
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
}


@dataclass(frozen=True)
class RunSpec:
    """Everything a system needs before the stream starts."""

    query: str
    source: Path  # the generated stream (manifest, stream/, static/)
    landing: Path  # fresh and empty; the replay lands files here
    workdir: Path  # fresh; for checkpoints, outputs, logs
    files: int
    seconds_per_file: float  # wall-clock, after the speedup
    deadline_s: float  # the result is due this long after the window closes
    spark_conf: Mapping[str, str] = field(default_factory=lambda: dict(SPARK_CONF))


@dataclass(frozen=True)
class Window:
    """The window, once the replay has started: every replayed file belongs to it."""

    start: float  # epoch seconds
    end: float
    deadline: float


@dataclass(frozen=True)
class Sides:
    """The processes to measure: the Spark side, and the orchestrator's (None if there is none)."""

    spark: Selector
    airflow: Selector | None = None


@dataclass(frozen=True)
class Outcome:
    """A system's final result for the window and its own account of the run."""

    rows: list[Row]  # canonical rows (check.canonical_rows), ORDER BY / LIMIT applied
    ready_at: float  # epoch seconds when the result could first be read
    busy_s: float  # streaming: sum of data batches' triggerExecution; ours: sum of job wall times
    batches: int
    dropped_by_watermark: int = 0
    state_bytes: int = 0
    # CPU-seconds the system measured itself where process sampling cannot see them, e.g.
    # getrusage(RUSAGE_CHILDREN) around each spark-submit in an Airflow task (measure.ChildrenCpu).
    # When set, this is the Spark side's cost instead of the sampled one.
    spark_cpu_s: float | None = None
    # The CPU of ours' own loop over the span (polling, planning, starting jobs) when its jobs run
    # in other processes: what Airflow's triggerer and tasks do in a deployment. Not Spark-side.
    loop_cpu_s: float | None = None


class System(Protocol):
    """One configuration of one system (a row label of the table, e.g. `SS-default`, `IQP-1D`)."""

    config: str

    def start(self, run: RunSpec) -> Sides:
        """Get ready for the window's first file; raise SystemRefused if the query is refused."""
        ...

    def finish(self, window: Window) -> Outcome:
        """Block until the window's final result is ready, and return it."""
        ...

    def close(self) -> None:
        """Stop everything `start` brought up; safe to call after a failure."""
        ...


class SystemRefused(IqpError):
    """The system cannot run this query in this configuration (e.g. Spark refuses the streaming plan)."""


class RunFailed(IqpError):
    """A run broke or overran its time limit; the message says where."""
