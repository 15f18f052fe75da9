"""The Spark Connect server with the lease controller in its driver (`iqp connect-server start
--cores plan`): spark-submit runs this file as a Python application, whose SparkContext starts
the Connect server as a plugin (`SparkConnectPlugin`) and whose main thread then follows the
capacity plan (`runtime.leases.LeaseController`) through the scheduler backend's executor
requests and kills, the developer API Spark's own dynamic allocation uses (off here).

    spark-submit --conf spark.plugins=org.apache.spark.sql.connect.SparkConnectPlugin ... lease_driver.py
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

from pyspark.sql import SparkSession

from airflow_iqp.runtime.leases import LeaseController
from airflow_iqp.settings import DispatchSettings

TICK = 1.0  # seconds between looks at the plan


class SparkExecutors:
    """A live SparkContext's executors, through its scheduler backend (py4j)."""

    def __init__(self, spark: SparkSession) -> None:
        context = spark.sparkContext
        self._jvm: Any = context._jvm
        self._context: Any = context._jsc.sc()
        self.application: str = context.applicationId

    def started(self) -> dict[str, float]:
        """Each active executor's registration time (the backend records it in epoch
        milliseconds); one being killed is no longer active, though still registered.
        """
        backend = self._context.schedulerBackend()
        stamps = self._jvm.scala.jdk.javaapi.CollectionConverters.asJava(backend.getExecutorsWithRegistrationTs())
        return {str(executor): int(ms) / 1000 for executor, ms in stamps.items() if backend.isExecutorActive(executor)}

    def busy(self) -> bool:
        """Some Spark job of the server's is active (running, or waiting for executors)."""
        return len(self._context.statusTracker().getActiveJobIds()) > 0

    def request(self, total: int) -> None:
        """The cluster's target for this application (the standalone master's executor limit)."""
        self._context.requestTotalExecutors(total, 0, self._jvm.PythonUtils.toScalaMap({}))

    def release(self, ids: tuple[str, ...]) -> list[str]:
        """Kill the idle ones among `ids` (the target was lowered by `request` first)."""
        seq = self._jvm.PythonUtils.toSeq(list(ids))
        killed = self._context.schedulerBackend().killExecutors(seq, False, False, False)
        return [str(executor) for executor in self._jvm.scala.jdk.javaapi.CollectionConverters.asJava(killed)]


def main() -> int:
    """Start the server (the plugin starts with the context) and follow the plan until stopped."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stdout)
    spark = SparkSession.builder.getOrCreate()
    controller = LeaseController(SparkExecutors(spark), DispatchSettings.load())
    while True:
        controller.step()
        time.sleep(TICK)


if __name__ == "__main__":
    sys.exit(main())
