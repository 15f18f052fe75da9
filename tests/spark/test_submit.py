"""A dispatched job on the spark-submit path: each job is submitted with its own arguments and
its driver where the connection says, leaving the operator's fields as the DAG gave them; a
real spark-submit's unreadable input comes back named, and a job whose lease is lost is killed.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, cast

import pytest
from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

from airflow_iqp.constants import Policy
from airflow_iqp.exceptions import InvalidSetting, LeaseLostError
from airflow_iqp.operators.window import merge_spec, spark_env
from airflow_iqp.runtime.lease import LeaseKeeper
from airflow_iqp.settings import DispatchSettings
from airflow_iqp.spark.jobs.inputs import CorruptInput
from airflow_iqp.spark.jobs.spec import PartialSpec
from airflow_iqp.spark.submit import JOBS_DIR
from tests.operators.test_dispatched import HeldJob, q6
from tests.runtime.test_lease import grant_one
from tests.spark.test_connect import SlowPartial, granted, slow_spec, take_over
from tests.spark.test_jobs import partial_spec, stream_input, write_landing

if TYPE_CHECKING:
    from airflow.sdk import Context

LEASE_SECONDS = 6.0
LOG = logging.getLogger(__name__)


@pytest.fixture
def ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    monkeypatch.setenv("AIRFLOW_CONN_IQP_DEFAULT", url)
    return url


@pytest.fixture
def on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """spark-submit is the one beside this interpreter (pyspark's)."""
    monkeypatch.setenv("PATH", os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]))


def recorded_submits(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """What each spark-submit would run (command and environment), instead of running it."""
    submitted: list[dict[str, Any]] = []

    def submit(hook: SparkSubmitHook, application: str = "", **kwargs: Any) -> None:
        submitted.append({"command": hook._build_spark_submit_command(application), "env": hook._env})

    monkeypatch.setattr(SparkSubmitHook, "submit", submit)
    return submitted


@pytest.mark.parametrize(
    ("connection", "driver_conf", "driver_env"),
    [
        ({"conn_type": "spark", "host": "local[2]"}, {}, {"SPARK_LOCAL_IP": "127.0.0.1"}),
        (
            {
                "conn_type": "spark",
                "host": "spark://spark-master",
                "port": 7077,
                "extra": {"driver-host": "airflow-w1"},
            },
            {"spark.driver.host": "airflow-w1"},
            {},
        ),
    ],
)
def test_a_spark_submit_job_listens_where_its_connection_says(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    connection: dict[str, Any],
    driver_conf: dict[str, str],
    driver_env: dict[str, str],
) -> None:
    """Read when the job runs, not when the DAG is parsed: a local master keeps its driver on
    loopback, a cluster's driver gets the address its executors call back (never loopback by us).
    """
    monkeypatch.delenv("SPARK_LOCAL_IP", raising=False)
    monkeypatch.delenv("SPARK_DRIVER_HOST", raising=False)
    monkeypatch.setenv("AIRFLOW_CONN_IQP_SPARK", json.dumps(connection))
    submitted = recorded_submits(monkeypatch)
    task = HeldJob(task_id="merge", application="job.py", conn_id="iqp_spark", env_vars=spark_env())
    spec = merge_spec(q6(tmp_path), [str(tmp_path / "batch-0000-f1")], tmp_path / "result-f1")
    task._submit(spec, tmp_path / "result-f1.spec.json")
    [job] = submitted
    command = job["command"]
    port = f":{connection['port']}" if "port" in connection else ""
    assert command[command.index("--master") + 1] == connection["host"] + port
    confs = dict(command[i + 1].split("=", 1) for i, arg in enumerate(command) if arg == "--conf")
    assert {k: v for k, v in confs.items() if k.startswith("spark.driver.")} == driver_conf
    assert job["env"] == spark_env() | driver_env


def test_each_job_is_submitted_with_its_own_arguments_and_the_operator_keeps_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_IQP_SPARK", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    submitted = recorded_submits(monkeypatch)
    task = HeldJob(task_id="job", application="job.py", conn_id="iqp_spark", env_vars=spark_env(), executor_memory="3g")
    partial = PartialSpec(
        name="total",
        query=str(tmp_path / "total.sql"),
        streams={"sales": stream_input("csv", [tmp_path / "landing.csv"])},
        output=str(tmp_path / "batch-0000-f1"),
    )
    task._submit(partial, tmp_path / "batch-0000-f1.spec.json")
    task._submit(merge_spec(q6(tmp_path), [partial.output], tmp_path / "result-f1"), tmp_path / "result-f1.spec.json")
    first, second = (job["command"] for job in submitted)
    assert first[-5:] == [
        str(JOBS_DIR / "partial_job.py"),
        "--spec",
        str(tmp_path / "batch-0000-f1.spec.json"),
        "--report",
        str(tmp_path / "batch-0000-f1.report.json"),
    ]
    assert second[-3:] == [str(JOBS_DIR / "merge_job.py"), "--spec", str(tmp_path / "result-f1.spec.json")]
    assert first[first.index("--executor-memory") + 1] == second[second.index("--executor-memory") + 1] == "3g"
    assert (task.application, task.application_args, task.env_vars, task.conf) == ("job.py", None, spark_env(), None)


@pytest.mark.parametrize(
    ("extra", "granted", "executor_cores", "expected"),
    [
        ({}, None, None, {}),
        ({"cores": 2}, None, None, {"--total-executor-cores": "2"}),
        ({"cores": 2}, 1, 4, {"--total-executor-cores": "1", "--executor-cores": "1"}),
        ({}, 3, 2, {"--total-executor-cores": "3", "--executor-cores": "2"}),
    ],
)
def test_a_spark_submit_job_runs_on_the_cores_its_grant_gave_else_on_the_connections(
    tmp_path: Path,
    ledger: str,
    monkeypatch: pytest.MonkeyPatch,
    extra: dict[str, int],
    granted: int | None,
    executor_cores: int | None,
    expected: dict[str, str],
) -> None:
    """On a standalone master: spark.cores.max by the provider's option, executors no larger."""
    connection = {"conn_type": "spark", "host": "spark://spark-master", "port": 7077, "extra": extra}
    monkeypatch.setenv("AIRFLOW_CONN_IQP_SPARK", json.dumps(connection))
    submitted = recorded_submits(monkeypatch)
    task = HeldJob(task_id="merge", application="job.py", conn_id="iqp_spark", executor_cores=executor_cores)
    task._keeper = LeaseKeeper(grant_one(ledger, 60.0, datetime.now(UTC), cores=granted), 60, task.on_kill, LOG)
    task._submit(merge_spec(q6(tmp_path), [str(tmp_path / "batch-0000-f1")], tmp_path / "r"), tmp_path / "r.spec.json")
    [job] = submitted
    options = {"--total-executor-cores", "--executor-cores"}
    command = job["command"]
    assert {arg: command[i + 1] for i, arg in enumerate(command) if arg in options} == expected
    assert task._executor_cores == executor_cores, "the operator keeps its own"


def test_cores_on_a_master_that_takes_no_per_job_count_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    connection = {"conn_type": "spark", "host": "local[2]", "extra": {"cores": 2}}
    monkeypatch.setenv("AIRFLOW_CONN_IQP_SPARK", json.dumps(connection))
    submitted = recorded_submits(monkeypatch)
    task = HeldJob(task_id="merge", application="job.py", conn_id="iqp_spark")
    with pytest.raises(InvalidSetting, match=r"cores \(2\) are set on a standalone master"):
        task._submit(merge_spec(q6(tmp_path), [str(tmp_path / "b")], tmp_path / "r"), tmp_path / "r.spec.json")
    assert submitted == []


def test_a_connection_that_deploys_in_cluster_mode_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "AIRFLOW_CONN_IQP_SPARK",
        json.dumps({"conn_type": "spark", "host": "spark://spark-master", "extra": {"deploy-mode": "cluster"}}),
    )
    submitted = recorded_submits(monkeypatch)
    task = HeldJob(task_id="merge", application="job.py", conn_id="iqp_spark")
    spec = merge_spec(q6(tmp_path), [str(tmp_path / "batch-0000-f1")], tmp_path / "result-f1")
    with pytest.raises(InvalidSetting, match="'iqp_spark' deploys in cluster mode"):
        task._submit(spec, tmp_path / "result-f1.spec.json")
    assert submitted == []


@pytest.mark.usefixtures("on_path")
def test_a_corrupt_file_is_named_by_a_real_spark_submit(
    tmp_path: Path, ledger: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_IQP_SPARK", json.dumps({"conn_type": "spark", "host": "local[1]"}))
    (tmp_path / "landing").mkdir()
    landing = write_landing(tmp_path / "landing")
    good = landing.files["csv"]
    bad = tmp_path / "bad.csv"
    bad.write_text(good[1].read_text() + "7,3,2,oops,2026-01-01 01:00:00,web\n")
    task = HeldJob(task_id="partial", application="job.py", conn_id="iqp_spark", env_vars=spark_env())
    lease = grant_one(ledger, 600.0, datetime.now(UTC))
    task._keeper = LeaseKeeper(lease, every=60, on_lost=task.on_kill, log=task.log)
    output = task.leased_output(tmp_path / "batch-0000")
    spec = partial_spec(landing, "total", output, stream_input("csv", [good[0], bad]))
    with pytest.raises(CorruptInput) as caught:
        task.run_spark_job(cast("Context", {}), spec, tmp_path / "batch-0000.spec.json")
    assert [(c.stream, c.file) for c in caught.value.files] == [("sales", str(bad))]
    assert "NumberFormatException" in caught.value.files[0].error
    assert not output.exists()


@pytest.mark.usefixtures("on_path")
def test_a_spark_submit_job_whose_lease_is_lost_is_killed(
    tmp_path: Path, ledger: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_IQP_SPARK", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    task = SlowPartial(spec=slow_spec(tmp_path), task_id="slow", conn_id="iqp_spark", env_vars=spark_env())
    lease = granted(ledger, datetime.now(UTC))
    lost_at: list[float] = []

    def steal() -> None:
        task.started.wait(30)
        time.sleep(15)  # spark-submit's JVM is up and the join runs by now
        take_over(ledger, lease)
        lost_at.append(time.monotonic())

    thief = threading.Thread(target=steal)
    thief.start()
    ti = SimpleNamespace(dag_id="sales", run_id="r", task_id="partial", map_index=0, try_number=1)
    with pytest.raises(LeaseLostError, match="lost the lease"):
        task._run_leased(
            cast("Context", {"ti": ti}), lease, DispatchSettings(Policy.EDF, 1, lease_seconds=LEASE_SECONDS)
        )
    stopped = time.monotonic() - lost_at[0]
    thief.join()
    assert stopped < 10, f"the job went on for {stopped:.0f} s after its lease was lost"
    assert not Path(task.spec.output).exists()
