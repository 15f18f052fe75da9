"""Systems that run in one worker process of their own (`worker.py`): the Structured Streaming
configurations and ours (each policy on each execution path); and the single-pass batch truth.

The worker is a fresh Python driver with its own JVM per run, so its CPU and peak memory belong to
the run alone and a warm JIT from an earlier run helps no one.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any

from airflow_iqp.constants import ExecutionPath
from benchmarks.ssbench.measure import Selector
from benchmarks.ssbench.systems import SPARK_CONF, Outcome, RunFailed, Sides, SystemRefused

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from pathlib import Path

    from benchmarks.ssbench.check import Row
    from benchmarks.ssbench.systems import RunSpec, System, Window

STARTUP_LIMIT_S = 300.0  # JVM, session and query start on a loaded 2-core machine
LATE_LIMIT_S = 120.0  # how long after the deadline a result is still awaited (it then counts as late)
PT_FRACTION = 7.5  # the paper's processing-time trigger: 10 minutes of a 4500 s span
WATERMARK = "10 seconds"  # event time advances 1 s per file, so state is evicted within ~10 files


class Worker:
    """One `python -m benchmarks.ssbench.worker` process (or another `module` that speaks its JSON
    lines) and its JSON-lines conversation.
    """

    def __init__(self, spec: Mapping[str, Any], workdir: Path, module: str = "benchmarks.ssbench.worker") -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        spec_path = workdir / "spec.json"
        spec_path.write_text(json.dumps(spec, indent=2))
        self.log_path = workdir / "worker.log"
        with self.log_path.open("w") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", module, str(spec_path)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                start_new_session=True,  # its own process group, so close() can end the JVM with it
            )
        self.messages: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=self._read, args=(self.process.stdout,), daemon=True).start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self.messages.put(json.loads(line))
        self.messages.put(None)

    def receive(self, timeout: float) -> dict[str, Any]:
        """The worker's next message; raises SystemRefused or RunFailed for its errors."""
        try:
            message = self.messages.get(timeout=max(timeout, 0.0))
        except queue.Empty:
            raise RunFailed(f"the worker sent nothing for {timeout:.0f} s (see {self.log_path})") from None
        if message is None:
            raise RunFailed(f"the worker exited with {self.process.wait()} (see {self.log_path})")
        if message["event"] == "error":
            raise (SystemRefused if message["refused"] else RunFailed)(message["error"])
        return message

    def send(self, **fields: Any) -> None:
        if self.process.stdin is None:
            raise RunFailed("the worker has no stdin")
        self.process.stdin.write(json.dumps(fields) + "\n")
        self.process.stdin.flush()

    def close(self) -> None:
        """Let the worker stop its query and session; end its process group if it lingers."""
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def spark_side(worker: int, spark_pids: Sequence[int], jobs_elsewhere: bool) -> Selector:
    """The Spark side of a run in `worker`: the server processes it names (Spark Connect) and their
    descendants; else, when its jobs run elsewhere (spark-submit), the worker's children; else the
    worker itself (its Python driver and that driver's JVM).
    """
    if spark_pids:
        return Selector(pids=frozenset(spark_pids))
    return Selector(parents=frozenset({worker})) if jobs_elsewhere else Selector(pids=frozenset({worker}))


@dataclass
class WorkerSystem:
    """A system whose Spark side is one worker process: its Python driver and that driver's JVM;
    or, when its jobs run elsewhere (spark-submit, a Connect server), those processes only, the
    worker itself being the loop that starts the jobs (Airflow's stand-in, whose CPU is reported
    apart).
    """

    config: str
    mode: str  # worker mode: "ss" or "ours"
    settings: Mapping[str, str]  # the mode's own: ss {"trigger"}; ours {"policy", "path"}
    jobs_elsewhere: bool = False
    _worker: Worker | None = field(default=None, repr=False)

    def start(self, run: RunSpec) -> Sides:
        spec = {
            "mode": self.mode,
            **self.settings,
            "query": run.query,
            "source": str(run.source),
            "landing": str(run.landing),
            "workdir": str(run.workdir),
            "conf": dict(run.spark_conf),
            "seconds_per_file": run.seconds_per_file,
            "deadline_s": run.deadline_s,
            "interval_s": run.files * run.seconds_per_file / PT_FRACTION,
            "watermark": WATERMARK,
        }
        self._worker = Worker(spec, run.workdir)
        ready = self._worker.receive(STARTUP_LIMIT_S)
        return Sides(spark=spark_side(self._worker.process.pid, ready.get("spark_pids", []), self.jobs_elsewhere))

    def finish(self, window: Window) -> Outcome:
        if self._worker is None:
            raise RunFailed(f"{self.config}: finish() before start()")
        give_up = window.deadline + LATE_LIMIT_S
        self._worker.send(start=window.start, end=window.end, give_up=give_up)
        message = self._worker.receive(give_up - time.time() + STARTUP_LIMIT_S)
        return Outcome(
            rows=[tuple(row) for row in message["rows"]],
            ready_at=message["ready_at"],
            busy_s=message["busy_s"],
            batches=message["batches"],
            dropped_by_watermark=message.get("dropped_by_watermark", 0),
            state_bytes=message.get("state_bytes", 0),
            loop_cpu_s=message["loop_cpu_s"] if self.jobs_elsewhere else None,
        )

    def close(self) -> None:
        if self._worker is not None:
            self._worker.close()
            self._worker = None


def streaming(config: str, trigger: str) -> Callable[[], System]:
    return lambda: WorkerSystem(config, "ss", {"trigger": trigger})


def ours(config: str, policy: str, path: ExecutionPath) -> Callable[[], System]:
    settings = {"policy": policy, "path": path.value}
    return lambda: WorkerSystem(config, "ours", settings, jobs_elsewhere=path is not ExecutionPath.IN_PROCESS)


# Every configuration, by its row label. On Spark Connect the Spark side is the server's process
# tree, started and warmed by the worker before the span.
CONFIGS: dict[str, Callable[[], System]] = {
    "SS-default": streaming("SS-default", "default"),
    "SS-pt": streaming("SS-pt", "processingTime"),
    "SS-once": streaming("SS-once", "availableNow"),
    "IQP-1D": ours("IQP-1D", "one-batch", ExecutionPath.IN_PROCESS),
    "IQP-static": ours("IQP-static", "static", ExecutionPath.IN_PROCESS),
    "IQP-dyn": ours("IQP-dyn", "dynamic", ExecutionPath.IN_PROCESS),
    "IQP-1D-submit": ours("IQP-1D-submit", "one-batch", ExecutionPath.SPARK_SUBMIT),
    "IQP-static-submit": ours("IQP-static-submit", "static", ExecutionPath.SPARK_SUBMIT),
    "IQP-dyn-submit": ours("IQP-dyn-submit", "dynamic", ExecutionPath.SPARK_SUBMIT),
    "IQP-1D-connect": ours("IQP-1D-connect", "one-batch", ExecutionPath.SPARK_CONNECT),
    "IQP-static-connect": ours("IQP-static-connect", "static", ExecutionPath.SPARK_CONNECT),
    "IQP-dyn-connect": ours("IQP-dyn-connect", "dynamic", ExecutionPath.SPARK_CONNECT),
}


def batch_truth(source: Path, queries: Sequence[str], workdir: Path) -> dict[str, list[Row]]:
    """Each query's single-pass Spark SQL result over every file of the stream."""
    worker = Worker({"mode": "truth", "source": str(source), "queries": list(queries), "conf": SPARK_CONF}, workdir)
    try:
        found = {}
        for _ in queries:
            message = worker.receive(STARTUP_LIMIT_S)
            found[message["query"]] = [tuple(row) for row in message["rows"]]
        return found
    finally:
        worker.close()
