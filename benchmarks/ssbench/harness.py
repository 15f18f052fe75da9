"""One run: a fresh landing directory, the replay, one system, its processes sampled over the span
(first file lands -> result ready), and the result checked against the batch truth.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from benchmarks.ssbench import producer
from benchmarks.ssbench.check import mismatch
from benchmarks.ssbench.measure import Sampler, cpu_seconds, peak_rss, settle, startup_cpu_seconds
from benchmarks.ssbench.systems import RunFailed, RunSpec, SystemRefused, Window

if TYPE_CHECKING:
    from pathlib import Path

    from benchmarks.ssbench.check import Row
    from benchmarks.ssbench.measure import Snapshot
    from benchmarks.ssbench.systems import Outcome, System


@dataclass(frozen=True)
class RunRow:
    """One run of one configuration on one query: the benchmark's JSON row."""

    query: str
    config: str
    repeat: int
    files: int
    speedup: float
    status: str  # ok, invalid (wrong result or rows dropped by a watermark), refused, failed
    cpu_s: float | None  # Spark side, over the span
    busy_s: float | None
    batches: int | None
    peak_rss: int | None  # bytes
    deadline_met: bool | None
    result_ok: bool | None
    ready_after_close_s: float | None  # result ready, seconds after the window closed
    startup_cpu_s: float | None  # Spark side before the span (JVM and session start)
    airflow_cpu_s: float | None  # Airflow's processes, when Airflow drives the run
    loop_cpu_s: float | None  # ours' stand-in loop, when its jobs run in other processes
    load_1m: float  # the machine's 1-minute load average when the run started
    dropped_by_watermark: int | None
    state_bytes: int | None
    error: str | None

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def _fresh(path: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def _window(start: float, span: float, deadline_s: float) -> Window:
    """The window the replay opens at `start`: every replayed file's slot lies in it (the first
    lands at once, each next one a slot later).
    """
    return Window(start=start, end=start + span, deadline=start + span + deadline_s)


def run_once(
    system: System,
    spec: RunSpec,
    speedup: float,
    truth: list[Row],
    ordered: bool,
    repeat: int,
) -> RunRow:
    """Run `system` once on the replayed window; failures become a row, not an exception."""
    base = {
        "query": spec.query,
        "config": system.config,
        "repeat": repeat,
        "files": spec.files,
        "speedup": speedup,
        "load_1m": os.getloadavg()[0],
    }
    _fresh(spec.landing)
    _fresh(spec.workdir)
    try:
        sides = system.start(spec)
    except (SystemRefused, RunFailed) as err:
        system.close()
        return _failed(base, err)
    settle(sides.spark)
    sampler = Sampler({"spark": sides.spark} | ({"airflow": sides.airflow} if sides.airflow else {}))
    first = sampler.start()
    replay = threading.Thread(
        target=producer.replay_stream, args=(spec.source, spec.landing, speedup), name="replay", daemon=True
    )
    window = _window(time.time(), spec.files * spec.seconds_per_file, spec.deadline_s)
    replay.start()
    try:
        outcome = system.finish(window)
    except (SystemRefused, RunFailed) as err:
        return _failed(base, err)
    finally:
        sampler.stop()
        system.close()
        replay.join()
    return _row(base, sampler, first, window, outcome, truth, ordered)


def _failed(base: dict[str, Any], err: Exception) -> RunRow:
    status = "refused" if isinstance(err, SystemRefused) else "failed"
    empty: dict[str, Any] = {f: None for f in RunRow.__dataclass_fields__ if f not in base}
    return RunRow(**{**base, **empty, "status": status, "error": str(err)})


def _row(
    base: dict[str, Any],
    sampler: Sampler,
    first: Snapshot,
    window: Window,
    outcome: Outcome,
    truth: list[Row],
    ordered: bool,
) -> RunRow:
    spark = sampler.side("spark")
    wrong = mismatch(outcome.rows, truth, ordered)
    airflow = sampler.side("airflow") if "airflow" in sampler.sides else None
    valid = wrong is None and outcome.dropped_by_watermark == 0
    problems = [p for p in (wrong, outcome.dropped_by_watermark and "rows dropped by a watermark") if p]
    return RunRow(
        **base,
        status="ok" if valid else "invalid",
        cpu_s=outcome.spark_cpu_s if outcome.spark_cpu_s is not None else cpu_seconds(sampler.snapshots, spark),
        busy_s=outcome.busy_s,
        batches=outcome.batches,
        peak_rss=peak_rss(sampler.snapshots, spark),
        deadline_met=outcome.ready_at <= window.deadline,
        result_ok=wrong is None,
        ready_after_close_s=outcome.ready_at - window.end,
        startup_cpu_s=startup_cpu_seconds(first, spark),
        airflow_cpu_s=None if airflow is None else cpu_seconds(sampler.snapshots, airflow),
        loop_cpu_s=outcome.loop_cpu_s,
        dropped_by_watermark=outcome.dropped_by_watermark,
        state_bytes=outcome.state_bytes,
        error="; ".join(str(p) for p in problems) or None,
    )
