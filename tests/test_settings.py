"""The one place settings are read: `[iqp]` from the Airflow config, and the environment."""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING

import pytest

from airflow_iqp.constants import Policy
from airflow_iqp.exceptions import InvalidSetting
from airflow_iqp.settings import (
    DEFAULT_BATCH_TASK_SECONDS,
    DispatchSettings,
    airflow_home,
    batch_task_seconds,
    driver_address,
    ledger_connection_uri,
    option_env,
    python_path,
)

if TYPE_CHECKING:
    from pathlib import Path


@pytest.fixture
def no_iqp_config(monkeypatch: pytest.MonkeyPatch) -> None:
    options = ("policy", "resources", "lease_seconds", "resume_seconds", "cores", "max_cores", "speedup")
    for option in (*options, "billing_unit_seconds"):
        monkeypatch.delenv(option_env(option), raising=False)


def test_settings_come_from_the_iqp_config_section(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__IQP__POLICY", " LLF ")
    monkeypatch.setenv("AIRFLOW__IQP__RESOURCES", "3")
    monkeypatch.setenv("AIRFLOW__IQP__LEASE_SECONDS", "90")
    monkeypatch.setenv("AIRFLOW__IQP__RESUME_SECONDS", "0")
    settings = DispatchSettings.load()
    assert settings == DispatchSettings(Policy.LLF, 3, 90.0, 0.0)
    assert settings.policy is Policy.LLF


@pytest.mark.usefixtures("no_iqp_config")
def test_unset_or_blank_options_keep_the_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__IQP__RESOURCES", "  ")
    settings = DispatchSettings.load()
    assert settings == DispatchSettings(Policy.EDF, 1, 10.0, 30.0)
    assert settings.heartbeat_seconds == 2.5, "a killed holder's lease lapses within 10 s, renewed every 2.5 s"


@pytest.mark.parametrize(
    ("option", "raw", "message"),
    [
        ("policy", "fifo", r"\[iqp\] policy must be one of edf, llf, sjf, rr, got 'fifo' \(AIRFLOW__IQP__POLICY\)"),
        ("resources", "2.5", r"\[iqp\] resources must be a whole number, got 2.5 \(AIRFLOW__IQP__RESOURCES\)"),
        ("resources", "-1", r"\[iqp\] resources must be >= 1, got -1 \(AIRFLOW__IQP__RESOURCES\)"),
        ("lease_seconds", "nan", r"\[iqp\] lease_seconds must be a finite number, got nan"),
        ("lease_seconds", "4.9", r"\[iqp\] lease_seconds must be >= 5, got 4.9 \(AIRFLOW__IQP__LEASE_SECONDS\)"),
        ("lease_seconds", "1m", r"\[iqp\] lease_seconds = '1m' is not a number \(AIRFLOW__IQP__LEASE_SECONDS\)"),
        ("resume_seconds", "-1", r"\[iqp\] resume_seconds must be >= 0, got -1 \(AIRFLOW__IQP__RESUME_SECONDS\)"),
        ("cores", "0", r"\[iqp\] cores must be >= 1, got 0, or 'plan' \(AIRFLOW__IQP__CORES\)"),
        ("cores", "peak", r"\[iqp\] cores = 'peak' is not a number \(AIRFLOW__IQP__CORES\)"),
        ("max_cores", "0", r"\[iqp\] max_cores must be >= 1, got 0 \(AIRFLOW__IQP__MAX_CORES\)"),
        ("speedup", "2", r"\[iqp\] speedup = '2' is not cores:speedup points such as 1:1,2:1.6"),
        ("speedup", "1:1,2:3", r"\[iqp\] speedup points\[1\]: 3 on 2 cores is more than linear"),
        (
            "billing_unit_seconds",
            "0.5",
            r"\[iqp\] billing_unit_seconds must be >= 1, got 0.5 \(AIRFLOW__IQP__BILLING_UNIT_SECONDS\)",
        ),
    ],
)
@pytest.mark.usefixtures("no_iqp_config")
def test_bad_values_name_the_option_and_its_variable(
    option: str, raw: str, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(option_env(option), raw)
    with pytest.raises(InvalidSetting, match=message):
        DispatchSettings.load()


@pytest.mark.usefixtures("no_iqp_config")
def test_cores_are_the_plans_a_number_or_the_connections(monkeypatch: pytest.MonkeyPatch) -> None:
    assert DispatchSettings.load().cores is None, "unset: the Spark connection's default"
    monkeypatch.setenv("AIRFLOW__IQP__CORES", " Plan ")
    monkeypatch.setenv("AIRFLOW__IQP__MAX_CORES", "2")
    assert (DispatchSettings.load().cores, DispatchSettings.load().max_cores) == ("plan", 2)
    monkeypatch.setenv("AIRFLOW__IQP__CORES", "3")
    assert DispatchSettings.load().cores == 3
    monkeypatch.setenv("AIRFLOW__IQP__SPEEDUP", "1:1, 2:1.6")
    assert DispatchSettings.load().speedup == ((1, 1.0), (2, 1.6))


@pytest.mark.usefixtures("no_iqp_config")
def test_the_billing_unit_is_a_minute_unless_set(monkeypatch: pytest.MonkeyPatch) -> None:
    assert DispatchSettings.load().billing_unit_seconds == 60.0, "a core billed per started minute"
    monkeypatch.setenv("AIRFLOW__IQP__BILLING_UNIT_SECONDS", "3600")
    assert DispatchSettings.load().billing_unit_seconds == 3600.0


def test_a_batch_task_costs_the_measured_default_unless_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AIRFLOW__IQP__BATCH_TASK_SECONDS", raising=False)
    assert batch_task_seconds() == DEFAULT_BATCH_TASK_SECONDS
    monkeypatch.setenv("AIRFLOW__IQP__BATCH_TASK_SECONDS", "0")
    assert batch_task_seconds() == 0.0
    for bad in ("-1", "lots"):
        monkeypatch.setenv("AIRFLOW__IQP__BATCH_TASK_SECONDS", bad)
        with pytest.raises(InvalidSetting, match="AIRFLOW__IQP__BATCH_TASK_SECONDS"):
            batch_task_seconds()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"resources": True},
        {"resources": 0},
        {"lease_seconds": math.inf},
        {"resume_seconds": -1},
        {"policy": "fifo"},
        {"cores": "all"},
        {"billing_unit_seconds": 0},
    ],
)
def test_settings_made_in_code_are_checked_too(kwargs: dict[str, object]) -> None:
    with pytest.raises(InvalidSetting, match=next(iter(kwargs))):
        DispatchSettings(**kwargs)  # type: ignore[arg-type]  # wrong on purpose


def test_airflow_home_defaults_as_airflow_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))
    assert airflow_home() == tmp_path
    monkeypatch.setenv("AIRFLOW_HOME", "")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert airflow_home() == tmp_path / "airflow"


def test_environment_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AIRFLOW_CONN_IQP_DEFAULT", raising=False)
    assert ledger_connection_uri() is None
    monkeypatch.setenv("AIRFLOW_CONN_IQP_DEFAULT", "sqlite:////x.db")
    assert ledger_connection_uri() == "sqlite:////x.db"
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["/a", "", "/b"]))
    assert python_path() == ["/a", "/b"]


@pytest.fixture
def no_driver_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPARK_LOCAL_IP", raising=False)
    monkeypatch.delenv("SPARK_DRIVER_HOST", raising=False)


@pytest.mark.usefixtures("no_driver_env")
@pytest.mark.parametrize("master", ["local", "local[2]", "local[*]", " local[2,3] "])
def test_a_local_driver_stays_on_loopback_unless_the_environment_says_otherwise(
    master: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    extra = {"driver-host": "airflow-worker"}  # executors are the driver's threads: nothing to reach
    assert driver_address(master, extra).env == {"SPARK_LOCAL_IP": "127.0.0.1"}
    assert driver_address(master, extra).conf == {}
    monkeypatch.setenv("SPARK_LOCAL_IP", "10.1.2.3")
    assert driver_address(master).env == {"SPARK_LOCAL_IP": "10.1.2.3"}


@pytest.mark.usefixtures("no_driver_env")
@pytest.mark.parametrize("master", ["spark://spark-master:7077", "spark-master", "yarn", "k8s://https://k8s:6443"])
def test_a_cluster_driver_is_never_forced_onto_loopback(master: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The executors of a cluster run elsewhere: the driver's address is the connection's, else the
    environment's, else Spark's own; never loopback by our hand.
    """
    assert driver_address(master) == driver_address(master, {}) == driver_address(master, {"queue": "q"})
    assert (driver_address(master).env, driver_address(master).conf) == ({}, {})
    monkeypatch.setenv("SPARK_LOCAL_IP", "10.1.2.3")  # Spark reads it itself; we neither copy nor override it
    assert (driver_address(master).env, driver_address(master).conf) == ({}, {})
    monkeypatch.setenv("SPARK_DRIVER_HOST", "airflow-worker")
    assert driver_address(master).conf == {"spark.driver.host": "airflow-worker"}
    extra = {"driver-host": " worker-7.internal ", "driver-bind-address": "0.0.0.0"}
    chosen = driver_address(master, extra)
    assert chosen.conf == {"spark.driver.host": "worker-7.internal", "spark.driver.bindAddress": "0.0.0.0"}
    assert chosen.env == {}


@pytest.mark.parametrize("value", ["", "  ", 7, "two words", ["h"]])
@pytest.mark.parametrize("key", ["driver-host", "driver-bind-address"])
def test_a_driver_address_that_is_not_one_is_refused_with_the_extras_name(key: str, value: object) -> None:
    with pytest.raises(InvalidSetting, match=f"extra '{key}' must be a host name or address"):
        driver_address("spark://m:7077", {key: value})
