"""Every setting airflow-iqp reads: the Airflow config section `[iqp]` and the environment.

Reading them in one place keeps the names, defaults and error messages in one place too. A bad
value raises InvalidSetting naming the option and the environment variable that sets it.
Importing this module imports no Airflow (the ledger package, which uses it, must not): `[iqp]`
is read through the Task SDK only when `DispatchSettings.load()` is called.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from airflow_iqp.constants import Policy
from airflow_iqp.exceptions import InvalidSetting
from airflow_iqp.validation import number, whole_number

if TYPE_CHECKING:
    from collections.abc import Mapping

SECTION = "iqp"
LEDGER_CONN_ENV = "AIRFLOW_CONN_IQP_DEFAULT"  # how Airflow names the connection `iqp_default` in the environment
PLAN: Literal["plan"] = "plan"  # [iqp] cores = plan: each grant gets the capacity plan's cores
DEFAULT_MAX_CORES = 64  # as far as the capacity model's default speedup goes
DEFAULT_BILLING_UNIT = 60.0  # seconds: a core billed per started minute
# Airflow's CPU-s for one batch's task: 1.08 its process, 1.66 with the scheduler's and triggerer's
# share (Tier M quick run, docs/benchmarks.md "Airflow's cost per DAG parse and per task").
DEFAULT_BATCH_TASK_SECONDS = 1.7
LOOPBACK = "127.0.0.1"
LOCAL_MASTER = re.compile(r"local(\[[^\]]*\])?")  # local, local[2], local[*], local[2,3]
DRIVER_HOST_EXTRA, DRIVER_BIND_EXTRA = "driver-host", "driver-bind-address"  # extras of the `spark` connection


def option_env(option: str) -> str:
    """The environment variable that sets `[iqp] option`, as Airflow names it."""
    return f"AIRFLOW__{SECTION.upper()}__{option.upper()}"


@dataclass(frozen=True)
class DispatchSettings:
    """[iqp] policy (edf, llf, sjf, rr), resources (jobs the Spark cluster runs at once),
    lease_seconds (a holder that stops heartbeating loses its resource after this long: short, so
    a killed task's resource goes on within seconds; its holder renews it every `heartbeat_seconds`),
    resume_seconds (how much longer a grant waits for its task to take it: a task deferred in the
    triggerer resumes through the scheduler, the executor and a new process, 10-20 s on a busy host),
    cores (what a grant gives its job: unset, the Spark connection's default; a number, that many;
    `plan`, the capacity plan's for the current phase, `runtime.capacity`), max_cores (the most
    the plan may lease: the cluster's size) and speedup (the plan's per-core model as measured,
    `cores:speedup` points such as `1:1,2:1.6` from benchmarks/per_core.py; unset, the labelled
    default) and billing_unit_seconds (what a provider bills a core by: per started unit; the
    capacity view's leases and an elastic Connect server's idle timeout follow it).
    """

    policy: Policy = Policy.EDF
    resources: int = 1
    lease_seconds: float = 10.0
    resume_seconds: float = 30.0
    cores: int | Literal["plan"] | None = None
    max_cores: int = DEFAULT_MAX_CORES
    speedup: tuple[tuple[int, float], ...] | None = None
    billing_unit_seconds: float = DEFAULT_BILLING_UNIT

    def __post_init__(self) -> None:
        object.__setattr__(self, "policy", _policy(self.policy))
        object.__setattr__(self, "resources", _whole("resources", self.resources, minimum=1))
        object.__setattr__(self, "lease_seconds", _seconds("lease_seconds", self.lease_seconds, minimum=5))
        object.__setattr__(self, "resume_seconds", _seconds("resume_seconds", self.resume_seconds, minimum=0))
        object.__setattr__(self, "cores", _cores(self.cores))
        object.__setattr__(self, "max_cores", _whole("max_cores", self.max_cores, minimum=1))
        object.__setattr__(self, "speedup", _speedup(self.speedup))
        object.__setattr__(
            self, "billing_unit_seconds", _seconds("billing_unit_seconds", self.billing_unit_seconds, minimum=1)
        )

    @property
    def heartbeat_seconds(self) -> float:
        """How often a job's holder renews its lease: four beats a term, so a live holder may
        miss three (a slow ledger, a busy machine) and a dead one's lease lapses within a term.
        """
        return self.lease_seconds / 4

    @classmethod
    def load(cls) -> DispatchSettings:
        """The settings in the Airflow config (as the Task SDK sees it); options left unset keep the defaults."""
        from airflow.sdk import conf

        def read(option: str) -> str | None:
            raw = conf.get(SECTION, option, fallback=None)
            return raw.strip() if raw is not None and raw.strip() else None

        given: dict[str, Any] = {}  # the options set, each checked as the class checks it
        if (policy := read("policy")) is not None:
            given["policy"] = policy.lower()
        for option in ("resources", "lease_seconds", "resume_seconds", "max_cores", "billing_unit_seconds"):
            if (value := read(option)) is not None:
                given[option] = _parsed(option, value)
        if (cores := read("cores")) is not None:
            given["cores"] = PLAN if cores.lower() == PLAN else _parsed("cores", cores)
        if (speedup := read("speedup")) is not None:
            given["speedup"] = speedup_points(speedup)
        return cls(**given)


def _policy(value: str) -> Policy:
    try:
        return Policy(value)
    except ValueError:
        choices = ", ".join(p.value for p in Policy)
        raise InvalidSetting(f"[iqp] policy must be one of {choices}, got {value!r} ({option_env('policy')})") from None


def _whole(option: str, value: object, *, minimum: int) -> int:
    try:
        return whole_number(value, f"[iqp] {option}", minimum=minimum)
    except ValueError as err:
        raise InvalidSetting(f"{err} ({option_env(option)})") from None


def _seconds(option: str, value: object, *, minimum: float) -> float:
    try:
        return number(value, f"[iqp] {option}", minimum=minimum)
    except ValueError as err:
        raise InvalidSetting(f"{err} ({option_env(option)})") from None


def _cores(value: object) -> int | Literal["plan"] | None:
    if value is None or value == PLAN:
        return None if value is None else PLAN
    try:
        return whole_number(value, "[iqp] cores", minimum=1)
    except ValueError as err:
        raise InvalidSetting(f"{err}, or 'plan' ({option_env('cores')})") from None


def speedup_points(raw: str) -> tuple[tuple[int, float], ...]:
    """`1:1,2:1.6` as ((1, 1.0), (2, 1.6))."""
    try:
        return tuple((int(c), float(v)) for c, v in (point.split(":") for point in raw.split(",")))
    except ValueError:
        raise InvalidSetting(
            f"[iqp] speedup = {raw!r} is not cores:speedup points such as 1:1,2:1.6 ({option_env('speedup')})"
        ) from None


def _speedup(points: tuple[tuple[int, float], ...] | None) -> tuple[tuple[int, float], ...] | None:
    """Points a `planning.capacity.Speedup` takes (from (1, 1.0), increasing, at most linear)."""
    if points is None:
        return None
    from airflow_iqp.planning.capacity import Speedup

    try:
        return Speedup(tuple(points), "[iqp] speedup").points
    except ValueError as err:
        raise InvalidSetting(f"[iqp] {err} ({option_env('speedup')})") from None


def _parsed(option: str, raw: str) -> int | float:
    """A number as the config writes it: `2` stays an int, `2.5` becomes a float."""
    try:
        return int(raw)
    except ValueError:
        pass
    try:
        return float(raw)
    except ValueError:
        raise InvalidSetting(f"[iqp] {option} = {raw!r} is not a number ({option_env(option)})") from None


def deadline_alerts() -> bool:
    """[iqp] deadline_alerts (default True): whether IQP DAGs declare Airflow Deadline Alerts."""
    from airflow.sdk import conf

    return conf.getboolean(SECTION, "deadline_alerts", fallback=True)


def batch_task_seconds() -> float:
    """[iqp] batch_task_seconds (default 1.7): what Airflow spends on each batch's task, which
    dynamic mode's MinBatch adds to every batch when it weighs more batches against alpha.
    """
    from airflow.sdk import conf

    raw = conf.get(SECTION, "batch_task_seconds", fallback=None)
    if raw is None or not raw.strip():
        return DEFAULT_BATCH_TASK_SECONDS
    return _seconds("batch_task_seconds", _parsed("batch_task_seconds", raw.strip()), minimum=0)


def prior_models() -> Path | None:
    """[iqp] prior_models (default unset): a directory of cost-model files (`iqp fit-cost-model`'s
    format) a packaged query's learned model starts from where one has the query and path, instead
    of the packaged cost_models/ (another machine's timings at scale 0.01). `make demo` fits them
    on its machine at its windows' sizes.
    """
    from airflow.sdk import conf

    raw = conf.get(SECTION, "prior_models", fallback=None)
    return Path(raw.strip()).expanduser() if raw and raw.strip() else None


def airflow_home() -> Path:
    """$AIRFLOW_HOME, else ~/airflow, as Airflow itself defaults it."""
    return Path(os.environ.get("AIRFLOW_HOME") or "~/airflow").expanduser()


def ledger_connection_uri() -> str | None:
    """The connection `iqp_default` as the environment gives it ($AIRFLOW_CONN_IQP_DEFAULT), if it does."""
    return os.environ.get(LEDGER_CONN_ENV) or None


@dataclass(frozen=True)
class DriverAddress:
    """How a Spark driver is told where to listen: variables for its environment, `--conf` settings."""

    env: dict[str, str] = field(default_factory=dict)
    conf: dict[str, str] = field(default_factory=dict)


def driver_address(master: str, extra: Mapping[str, object] | None = None) -> DriverAddress:
    """Where the driver of an application on `master` listens, and how executors call it back.

    A local master's (`local`, `local[N]`) executors are threads of the driver: it stays on
    loopback ($SPARK_LOCAL_IP if set), so no network is needed. A cluster's executors (`spark://`,
    `yarn`, `k8s://`) run on other hosts, so nothing forces loopback: `spark.driver.host` is the
    Spark connection's `driver-host` extra, else $SPARK_DRIVER_HOST, else Spark's own choice
    ($SPARK_LOCAL_IP, else this host's address); `spark.driver.bindAddress` is the
    `driver-bind-address` extra when the driver must listen on another address than it is reached
    by (0.0.0.0 in a container reached by its service name).
    """
    if LOCAL_MASTER.fullmatch(master.strip()):
        return DriverAddress(env={"SPARK_LOCAL_IP": os.environ.get("SPARK_LOCAL_IP") or LOOPBACK})
    extra = extra or {}
    host = _address(extra, DRIVER_HOST_EXTRA) or os.environ.get("SPARK_DRIVER_HOST") or None
    bind = _address(extra, DRIVER_BIND_EXTRA)
    conf = {"spark.driver.host": host} if host else {}
    return DriverAddress(conf=conf | ({"spark.driver.bindAddress": bind} if bind else {}))


def _address(extra: Mapping[str, object], key: str) -> str | None:
    value = extra.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or any(c.isspace() for c in value.strip()):
        raise InvalidSetting(f"the Spark connection's extra {key!r} must be a host name or address, got {value!r}")
    return value.strip()


def python_path() -> list[str]:
    """The entries of $PYTHONPATH, to extend for a child process rather than replace."""
    return [entry for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry]
