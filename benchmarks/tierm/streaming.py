"""The streaming side of Tier M: one Structured Streaming application (`ss_app`) running every
query over the replayed window, its whole process tree (Python driver and JVM) measured.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from airflow_iqp.queries import load_query
from benchmarks.ssbench import producer
from benchmarks.ssbench.check import mismatch
from benchmarks.ssbench.measure import Sampler, Selector, cpu_seconds, peak_rss, settle
from benchmarks.ssbench.shape import is_ordered
from benchmarks.ssbench.spark_worker import LATE_LIMIT_S, PT_FRACTION, STARTUP_LIMIT_S, WATERMARK, Worker
from benchmarks.ssbench.systems import SPARK_CONF
from benchmarks.tierm.run import QueryResult, SystemRun

if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    from benchmarks.tierm.airflow_side import Stream

TRIGGERS = {"SS-default": "default", "SS-pt": "processingTime", "SS-once": "availableNow"}


def run_streaming(config: str, stream: Stream, work: Path, last_deadline_s: float) -> SystemRun:
    """Run the application with `config`'s trigger on a fresh replay of the window."""
    landing = work / "landing"
    spec = {
        "queries": list(stream.queries),
        "source": str(stream.source),
        "landing": str(landing),
        "workdir": str(work),
        "conf": dict(SPARK_CONF),
        "trigger": TRIGGERS[config],
        "interval_s": stream.span_s / PT_FRACTION,
        "watermark": WATERMARK,
    }
    worker = Worker(spec, work, module="benchmarks.tierm.ss_app")
    replay = threading.Thread(
        target=producer.replay_stream, args=(stream.source, landing, stream.speedup), name="replay", daemon=True
    )
    try:
        ready = worker.receive(STARTUP_LIMIT_S)
        application = Selector(pids=frozenset({worker.process.pid}))
        settle(application)
        sampler = Sampler({"application": application}, interval=0.5)
        sampler.start()
        start = time.time()
        end = start + stream.span_s
        give_up = end + last_deadline_s + LATE_LIMIT_S
        replay.start()
        worker.send(start=start, end=end, give_up=give_up)
        message = worker.receive(give_up - time.time() + STARTUP_LIMIT_S)
        sampler.stop()
    finally:
        worker.close()
        if replay.is_alive():
            replay.join()
    members = sampler.side("application")
    return SystemRun(
        config=config,
        cpu={"spark": cpu_seconds(sampler.snapshots, members)},
        peak_rss=peak_rss(sampler.snapshots, members),
        span_s=sampler.snapshots[-1].at - sampler.snapshots[0].at,
        queries={q: _result(q, found, end, stream) for q, found in message["queries"].items()},
        window_end=end,
        refused=dict(ready["refused"]),
    )


def _result(query: str, found: dict[str, Any], end: float, stream: Stream) -> QueryResult:
    if "error" in found:
        return QueryResult(None, None, False, found["error"])
    ready = None if found["ready_at"] is None else found["ready_at"] - end
    rows = [tuple(row) for row in found["rows"]]
    wrong = mismatch(rows, stream.truth[query], is_ordered(load_query(query).sql))
    if found["dropped_by_watermark"]:
        wrong = f"{found['dropped_by_watermark']} rows dropped by a watermark"
    return QueryResult(ready, found["busy_s"], wrong is None, wrong or "", found["batches"])
