"""A task's "Spark output" button, pointing at what its Spark job wrote."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from airflow.sdk import BaseOperatorLink
from airflow.sdk.execution_time.xcom import XCom  # the configured XCom backend

if TYPE_CHECKING:
    from airflow.sdk import BaseOperator
    from airflow.sdk.types import TaskInstanceKey

OUTPUT_LOCATION_KEY = "output_location"


def output_url(location: str) -> str:
    """Browsers need a scheme: local paths become file:// URLs, URLs (s3a://, hdfs://) stay."""
    if urlsplit(location).scheme:
        return location
    return Path(location).absolute().as_uri()


class BatchOutputLink(BaseOperatorLink):
    """Links to the `output_location` XCom our Spark operators push.

    Airflow 3 calls `get_link` in the worker as the task finishes and stores the result, so the
    XCom is read through the Task SDK.
    """

    name = "Spark output"

    def get_link(self, operator: BaseOperator, *, ti_key: TaskInstanceKey) -> str:
        """A URL of the output the task's job wrote, or "" before it wrote one."""
        location = XCom.get_value(ti_key=ti_key, key=OUTPUT_LOCATION_KEY)
        return output_url(str(location)) if location else ""
