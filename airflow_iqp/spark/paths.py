"""What the Spark connection (`iqp_spark` by default) says about how a job reaches Spark: its
type picks the execution path, its host and extras where a spark-submit driver listens and
how many cores a job gets unless its grant says, and the Spark provider's SparkConnectHook the
Connect server's URL.

Read when a job runs, in the task, through the Task SDK: never at DAG parse time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_iqp.constants import ExecutionPath
from airflow_iqp.exceptions import InvalidSetting
from airflow_iqp.settings import driver_address
from airflow_iqp.validation import whole_number

if TYPE_CHECKING:
    from airflow_iqp.settings import DriverAddress

CORES_EXTRA = "cores"  # a spark-submit job's cores when its grant names none
PATH_OF_CONN_TYPE = {"spark": ExecutionPath.SPARK_SUBMIT, "spark_connect": ExecutionPath.SPARK_CONNECT}


def execution_path(conn_id: str) -> ExecutionPath:
    """The path the connection's type picks: `spark` runs spark-submit, `spark_connect` a Connect session."""
    from airflow.sdk import BaseHook

    conn_type = BaseHook.get_connection(conn_id).conn_type
    try:
        return PATH_OF_CONN_TYPE[conn_type or ""]
    except KeyError:
        raise InvalidSetting(
            f"connection {conn_id!r} has type {conn_type!r}: IQP jobs run on type 'spark' (spark-submit, host = the "
            "master) or 'spark_connect' (a Spark Connect server, e.g. `iqp connect-server start`)"
        ) from None


def submit_driver(conn_id: str) -> DriverAddress:
    """Where a spark-submit job's driver listens: the connection's host is the master (loopback
    for a local one), its extras may name the driver's address for a cluster's executors.
    """
    from airflow.sdk import BaseHook

    conn = BaseHook.get_connection(conn_id)
    return driver_address(conn.host or "", conn.extra_dejson)


def submit_cores(conn_id: str, granted: int | None) -> int | None:
    """The cores a spark-submit job runs on: its grant's (the capacity plan's), else the
    connection's `cores` extra, else None (what the master gives an application).
    """
    if granted is not None:
        return granted
    from airflow.sdk import BaseHook

    value = BaseHook.get_connection(conn_id).extra_dejson.get(CORES_EXTRA)
    if value is None:
        return None
    try:
        return whole_number(value, f"connection {conn_id!r}: extra {CORES_EXTRA!r}", minimum=1)
    except ValueError as err:
        raise InvalidSetting(str(err)) from None


def connect_url(conn_id: str) -> str:
    """The Connect server's URL (with its token), as the Spark provider builds it; a job adds its session id."""
    from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook

    return SparkConnectHook(conn_id).get_connection_url()
