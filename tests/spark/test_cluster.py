"""A window's partials and merge on a real Spark standalone cluster (a master and two workers on
this machine, tests/spark/cluster.py), through the operators' own code: a DispatchedSparkSubmitOperator
under a lease runs each job as a spark-submit in client mode against the `iqp_spark` connection
(host = the master) on the one core its grant gave it (of the workers' two), then against a
Connect server started on the cluster (`iqp connect-server start --master spark://...`). The
driver's address comes from the connection's `driver-host` extra (spark-submit) or
$SPARK_DRIVER_HOST (the server), here this machine's network address, not loopback. Both results
equal one Spark SQL pass over the same files; the master's applications and the workers'
executors prove the jobs ran on the cluster, not in local mode. About two minutes on two shared
cores: three spark-submit applications and a server's start.
"""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest

from airflow_iqp.operators.window import spark_env
from airflow_iqp.runtime.lease import LeaseKeeper
from airflow_iqp.settings import LOOPBACK
from airflow_iqp.spark.connect import ConnectJob
from airflow_iqp.spark.connect_server import running
from airflow_iqp.spark.jobs.output import MARKER
from airflow_iqp.spark.jobs.spec import MergeSpec
from tests.operators.test_dispatched import HeldJob
from tests.runtime.test_lease import grant_one
from tests.spark.cluster import EXECUTOR_MEMORY, Cluster
from tests.spark.compare import assert_same
from tests.spark.test_jobs import FILES, ROWS_PER_FILE, Landing, one_pass, partial_spec, read_sales, stream_input
from tests.spark.test_jobs import landing as landing  # the module's made-up stream, as a fixture here

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_iqp.ledger.dispatch import Lease

pytestmark = pytest.mark.heavy

LOG = logging.getLogger(__name__)
QUERY = "by_category"  # a grouped join with a static table
BATCHES = (range(0, 3), range(3, FILES))
LEASE_SECONDS = 900.0  # one lease for every job of the module: long enough for slow spark-submits


def network_address() -> str:
    """This machine's address on its network (where a remote executor would call the driver back),
    or loopback without one. Connecting a UDP socket sends nothing; it only picks the interface.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("10.255.255.255", 1))
        except OSError:
            return LOOPBACK
        return str(probe.getsockname()[0])


class _Job(HeldJob):
    """A window's job as the operators run it, holding a lease granted by the test."""

    def __init__(self, *, lease: Lease, **kwargs: Any) -> None:
        super().__init__(
            application="job.py",
            conn_id="iqp_spark",
            env_vars=spark_env(),
            executor_memory=EXECUTOR_MEMORY,
            **kwargs,
        )
        self._keeper = LeaseKeeper(lease, every=60, on_lost=self.on_kill, log=LOG)  # confirmed before commits

    def run_window(self, landing: Landing, out: Path) -> Path:
        """The window's partials, one per batch, then its merge; returns the merged result."""
        files = landing.files["parquet"]
        out.mkdir()
        partials = [out / f"batch-{i}" for i in range(len(BATCHES))]
        for partial, batch in zip(partials, BATCHES):
            spec = partial_spec(landing, QUERY, partial, stream_input("parquet", [files[i] for i in batch]))
            self.run_spark_job(cast("Context", {}), spec, out / f"{partial.name}.spec.json")
        merge = MergeSpec(
            name=QUERY,
            query=str(landing.query(QUERY)),
            streams=["sales"],
            partials=[str(p) for p in partials],
            output=str(out / "result"),
        )
        self.run_spark_job(cast("Context", {}), merge, out / "result.spec.json")
        return out / "result"


def test_a_window_runs_on_the_standalone_cluster_by_spark_submit_and_on_connect(
    cluster: Cluster, landing: Landing, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = cluster.app_ids()  # the package's cluster: the tests before this one ran theirs
    driver_host = network_address()
    monkeypatch.delenv("SPARK_LOCAL_IP", raising=False)  # whatever loopback the driver gets is the connection's
    monkeypatch.delenv("SPARK_DRIVER_HOST", raising=False)
    monkeypatch.setenv("PATH", os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]))  # spark-submit
    ledger = f"sqlite:///{tmp_path / 'ledger.db'}"
    monkeypatch.setenv("AIRFLOW_CONN_IQP_DEFAULT", ledger)
    lease = grant_one(ledger, LEASE_SECONDS, datetime.now(UTC), cores=1)  # of the workers' 2
    monkeypatch.setenv(
        "AIRFLOW_CONN_IQP_SPARK",
        json.dumps({"conn_type": "spark", "host": cluster.url, "extra": {"driver-host": driver_host}}),
    )

    submitted = _Job(lease=lease, task_id="on_spark_submit").run_window(landing, tmp_path / "submit")
    ended(cluster, before, len(BATCHES) + 1, "every partial and the merge registers with the master and ends")
    apps = [app for app in cluster.completed_apps() if app["id"] not in before]
    assert all(app["state"] == "FINISHED" for app in apps), apps
    assert {app["id"] for app in apps} <= executed_apps(cluster), "each had executors on the workers"
    assert [cluster.executor_cores(app["id"]) for app in apps] == [1] * len(apps), "each ran on its grant's cores"
    assert driver_urls(cluster, before) == {driver_host}, (
        "the executors called the driver back where the connection said"
    )
    assert json.loads((submitted / MARKER).read_text())["input_rows"] == {"sales": FILES * ROWS_PER_FILE}

    monkeypatch.setenv("SPARK_DRIVER_HOST", driver_host)  # the server's driver: from its environment
    with running(tmp_path / "connect-server", master=cluster.url, driver_memory="1g") as server:
        monkeypatch.setenv("AIRFLOW_CONN_IQP_SPARK", json.dumps(server.connection()))
        on_connect = _Job(lease=lease, task_id="on_spark_connect").run_window(landing, tmp_path / "connect")
        [app] = [
            a for a in cluster.state()["activeapps"] if a["name"] == "iqp-connect-server" and a["id"] not in before
        ]
        assert app["cores"] == 2, "the server's executors are the workers'"
        with ConnectJob(server.url_with_token, "iqp-cluster-test") as job:  # the single pass, on the cluster too
            sales = read_sales(job.spark, "parquet", landing.files["parquet"])
            _, expected = one_pass(job.spark, landing, QUERY, sales)
            for result in (submitted, on_connect):
                assert_same(job.spark.read.parquet(str(result)).collect(), expected, ordered=False)
    assert driver_urls(cluster, before) == {driver_host}
    ended(cluster, before, len(BATCHES) + 2, "the Connect server's application ends on the master with the server")
    assert "iqp-connect-server" in {app["name"] for app in cluster.completed_apps() if app["id"] not in before}


def ended(cluster: Cluster, before: set[str], apps: int, what: str, seconds: float = 30.0) -> None:
    """Wait until the master lists `apps` completed applications not in `before` (a driver
    unregisters as it stops)."""
    give_up = time.monotonic() + seconds
    while len([app for app in cluster.completed_apps() if app["id"] not in before]) < apps:
        assert time.monotonic() < give_up, f"{what}: {cluster.state()}"
        time.sleep(0.5)


def executed_apps(cluster: Cluster) -> set[str]:
    """The applications the workers launched executors for (a worker's directory per application)."""
    return {app.name for app in cluster.logs.glob("worker-*/app-*")}


def driver_urls(cluster: Cluster, before: set[str]) -> set[str]:
    """The driver host every executor the workers launched for applications not in `before` was
    told to call back."""
    logs = [log for log in cluster.logs.glob("worker-*/app-*/*/stderr") if log.parents[1].name not in before]
    assert logs, f"no executor ran on the workers ({cluster.logs})"
    return {host for log in logs for host in re.findall(r"--driver-url\W+spark://\w+@([^:]+):", log.read_text())}
