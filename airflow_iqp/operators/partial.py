"""`partial_aggregate`: one mapped task per batch, a deferrable spark-submit of the partial job.

While the batch's files have not all landed, the task waits in the triggerer, not in a worker
slot. Once they have, it freezes the exact file list in the ledger (a retry processes the same
files and replaces its own output) and submits the partial job.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import Context
from airflow.sdk.exceptions import AirflowSkipException

from airflow_iqp.declaration import Declaration
from airflow_iqp.ledger import session_scope, store
from airflow_iqp.links.output import BatchOutputLink
from airflow_iqp.operators.window import JOBS_DIR, WindowFiles, describe, spark_env, window_dir
from airflow_iqp.spark.jobs.output import read_marker
from airflow_iqp.triggers.files import FilesLandedTrigger


class PartialAggregateOperator(SparkSubmitOperator):
    operator_extra_links = (BatchOutputLink(),)

    def __init__(self, *, batch: dict[str, Any], declaration: Declaration, work_dir: str, **kwargs: Any) -> None:
        super().__init__(application=str(JOBS_DIR / "partial_job.py"), env_vars=spark_env(), **kwargs)
        self.batch = batch
        self.declaration = declaration
        self.work_dir = work_dir

    def _files(self, context: Context) -> tuple[WindowFiles, dict[str, list[str]]]:
        window = WindowFiles(self.declaration, context["data_interval_start"], context["data_interval_end"])
        return window, window.batch(self.batch["first"], self.batch["last"])

    def execute(self, context: Context) -> None:
        context["batch_label"] = describe(self.batch)  # type: ignore[typeddict-unknown-key]
        _, files = self._files(context)
        paths = [p for stream_files in files.values() for p in stream_files]
        if not paths:
            with session_scope() as session:
                store.skip_batch(session, self.batch["window_id"], self.batch["index"])
            raise AirflowSkipException(f"batch {self.batch['index']}: no files of the window fall in it")
        trigger = FilesLandedTrigger(paths)
        if trigger.missing():
            self.defer(trigger=trigger, method_name="execute_landed")
        self.execute_landed(context)

    def execute_landed(self, context: Context, event: dict[str, Any] | None = None) -> str:
        context["batch_label"] = describe(self.batch)  # type: ignore[typeddict-unknown-key]
        window, files = self._files(context)
        window_id, index = self.batch["window_id"], self.batch["index"]
        with session_scope() as session:
            files = store.freeze_batch_files(session, window_id, index, files)
            attempt = store.start_batch(session, window_id, index)
        directory = window_dir(Path(self.work_dir), self.declaration, context["data_interval_start"])
        directory.mkdir(parents=True, exist_ok=True)
        batch_file = directory / f"batch-{index:04d}.json"
        batch_file.write_text(json.dumps(files))
        output = directory / f"batch-{index:04d}"
        self.application_args = [
            "--query", str(self.declaration.query.path),
            "--batch", str(batch_file),
            "--static", str(window.static_dir),
            "--manifest", str(window.manifest_path),
            "--output", str(output),
        ]
        self._hook = None  # the hook is built from application_args
        self.log.info("batch %d attempt %d: %s", index, attempt, {s: len(f) for s, f in files.items()})
        started = datetime.now(UTC)
        try:
            super().execute(context)
        except BaseException:
            with session_scope() as session:
                store.fail_batch(session, window_id, index)
            raise
        ended = datetime.now(UTC)
        rows = sum(read_marker(output)["input_rows"].values())
        seconds = (ended - started).total_seconds()
        with session_scope() as session:
            store.finish_batch(session, window_id, index, started, ended, rows, seconds, str(output))
            store.record_cost_observation(session, self.declaration.name, "spark_submit", "partial", rows, seconds)
        context["ti"].xcom_push(key="output_location", value=str(output))
        return str(output)
