"""One job as one spark-submit application (the `spark` execution path), with arguments of its own.

A dispatched task runs one job per attempt, each with its own spec file (and for a partial a
report file, where the job names the input files it could not read). The Spark provider's
operator builds its hook from its own fields; the job's hook is built the same way (the
provider's `_get_hook`), from the operator's spark-submit options (executor memory, packages,
...) with the job's application arguments and the driver's environment and conf in place of
the operator's, so the operator's fields stay what the DAG gave.

The driver runs in the task (client mode): it writes the job's local output and report, and
killing spark-submit kills the job.

A job runs on the cores its grant gave it (`spark.paths.submit_cores`): on a standalone master
that is `--total-executor-cores` (`spark.cores.max`), with executors no larger than it, so a
one-core grant still gets an executor; other masters take no per-job count.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from airflow_iqp.exceptions import InvalidSetting
from airflow_iqp.spark.jobs.inputs import CorruptFile, CorruptInput
from airflow_iqp.spark.jobs.spec import PartialSpec

if TYPE_CHECKING:
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    from airflow_iqp.settings import DriverAddress
    from airflow_iqp.spark.jobs.spec import MergeSpec

JOBS_DIR = Path(__file__).resolve().parent / "jobs"


@dataclass(frozen=True)
class SubmitJob:
    """The application a spec runs as, its arguments, and where a partial reports unreadable inputs."""

    application: Path
    args: tuple[str, ...]
    report: Path | None

    @classmethod
    def of(cls, spec: PartialSpec | MergeSpec, spec_file: Path) -> SubmitJob:
        """The job that runs `spec`, written at `spec_file`."""
        if isinstance(spec, PartialSpec):
            report = spec_file.with_name(spec_file.name.replace(".spec.json", ".report.json"))
            return cls(JOBS_DIR / "partial_job.py", ("--spec", str(spec_file), "--report", str(report)), report)
        return cls(JOBS_DIR / "merge_job.py", ("--spec", str(spec_file)), None)

    def hook(self, operator: SparkSubmitOperator, driver: DriverAddress, cores: int | None = None) -> SparkSubmitHook:
        """The hook that submits this job with `operator`'s options, its driver listening at
        `driver`, on `cores` cores (None: what the master gives an application by default).
        """
        from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

        options = _JobOptions(
            operator,
            application_args=list(self.args),
            env_vars={**(operator.env_vars or {}), **driver.env},
            conf={**(operator.conf or {}), **driver.conf},
            **_cores(operator, cores),
        )
        hook = SparkSubmitOperator._get_hook(cast("SparkSubmitOperator", options))
        if hook._connection["deploy_mode"] == "cluster":
            raise InvalidSetting(
                f"connection {operator._conn_id!r} deploys in cluster mode: an IQP job's driver runs in the task "
                "(client mode), where it writes its output and report"
            )
        if cores is not None and not str(hook._connection["master"]).startswith("spark://"):
            raise InvalidSetting(
                f"connection {operator._conn_id!r}: a job's cores ({cores}) are set on a standalone master "
                f"(spark://...), not on {hook._connection['master']!r}"
            )
        return hook

    def run(self, hook: SparkSubmitHook) -> None:
        """Submit and wait; an input the job could not read is raised as `CorruptInput`."""
        if self.report is not None:
            self.report.unlink(missing_ok=True)
        try:
            hook.submit(str(self.application))
        except Exception:
            corrupt = self._reported()
            if not corrupt:
                raise
            raise CorruptInput(corrupt) from None

    def _reported(self) -> list[CorruptFile]:
        if self.report is None or not self.report.is_file():
            return []
        return [CorruptFile(**entry) for entry in json.loads(self.report.read_text()).get("corrupt", [])]


def _cores(operator: SparkSubmitOperator, cores: int | None) -> dict[str, int]:
    """The operator's core options for a job on `cores` cores: that many in all, in executors of
    at most that many (a larger executor would never fit, and the job would wait forever).
    """
    if cores is None:
        return {}
    executor = operator._executor_cores
    return {"_total_executor_cores": cores} | ({"_executor_cores": min(executor, cores)} if executor else {})


class _JobOptions:
    """The operator's fields as `_get_hook` reads them, with the job's own in place of some."""

    def __init__(self, operator: SparkSubmitOperator, **job: Any) -> None:
        self._operator = operator
        self._job = job

    def __getattr__(self, name: str) -> Any:
        return self._job[name] if name in self._job else getattr(self._operator, name)
