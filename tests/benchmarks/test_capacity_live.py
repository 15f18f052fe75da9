"""The live capacity run's accounting: executors read from a worker's log, billed by started units."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from benchmarks.capacity_live import billed
from tests.spark.cluster import Executor, executors

if TYPE_CHECKING:
    from pathlib import Path

# A worker's log as Spark 4.2 writes it (launch command cut to the flags read), times in local time.
WORKER_LOG = """\
26/11/27 02:00:40 INFO Worker: Successfully registered with master spark://127.0.0.1:7077
26/11/27 02:00:52 INFO Worker: Asked to launch executor app-20261127020052-0000/0 for iqp-connect-server
26/11/27 02:00:52 INFO ExecutorRunner: Launch command: "java" "-cp" "x" "org.apache.spark.executor.\
CoarseGrainedExecutorBackend" "--driver-url" "spark://CoarseGrainedScheduler@localhost:40815" "--executor-id" "0" \
"--hostname" "127.0.0.1" "--cores" "1" "--app-id" "app-20261127020052-0000" "--worker-url" "spark://W@x:1"
26/11/27 02:02:06 INFO Worker: Asked to kill executor app-20261127020052-0000/0
26/11/27 02:02:06 INFO Worker: Executor app-20261127020052-0000/0 finished with state KILLED message Runner \
thread for executor app-20261127020052-0000/0 interrupted exitStatus 0
26/11/27 02:03:10 INFO Worker: Asked to launch executor app-20261127020052-0000/2 for iqp-connect-server
26/11/27 02:03:10 INFO ExecutorRunner: Launch command: "java" "--executor-id" "2" "--hostname" "127.0.0.1" \
"--cores" "1" "--app-id" "app-20261127020052-0000" "--worker-url" "spark://W@x:1"
"""


def _local(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)  # naive: this machine's time, as the log's


def test_a_workers_log_gives_each_executors_life_and_cores(tmp_path: Path) -> None:
    log = tmp_path / "worker-0.log"
    log.write_text(WORKER_LOG)
    app = "app-20261127020052-0000"
    assert executors(log) == [
        Executor("worker-0", app, "0", 1, _local("2026-11-27 02:00:52"), _local("2026-11-27 02:02:06")),
        Executor("worker-0", app, "2", 1, _local("2026-11-27 02:03:10"), None),
    ], "one killed after 74 s, one still up when the cluster stopped"


def test_an_executor_is_billed_every_started_unit_per_core() -> None:
    assert billed([(0.0, 60.0, 1)], 60.0) == 60.0, "a whole unit is one unit"
    assert billed([(0.0, 61.0, 1)], 60.0) == 120.0, "a second more starts another"
    assert billed([(10.0, 12.0, 2)], 60.0) == 120.0, "two cores for 2 s pay a unit each"
    assert billed([(0.0, 30.0, 1), (40.0, 70.0, 1)], 60.0) == 120.0, "released and leased again: two units"
    assert billed([], 60.0) == 0.0
