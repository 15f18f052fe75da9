"""What the ledger tests build their rows from: a DAG's planned window and listed files."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from alembic.config import Config

from airflow_iqp.constants import Mode
from airflow_iqp.ledger import session_scope, store
from airflow_iqp.ledger.engine import MIGRATIONS
from airflow_iqp.planning.record import PlanRecord
from airflow_iqp.streams.files import DataFile

if TYPE_CHECKING:
    from collections.abc import Sequence

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
DAG = "iqp_sales"


def batches(ranges: Sequence[tuple[int, int]], start: datetime = T0) -> list[dict[str, Any]]:
    """Batch rows as the plan task records them, one per (first, last) tuple range."""
    return [
        {
            "index": i,
            "first_tuple": first,
            "last_tuple": last,
            "release": start + timedelta(seconds=last),
            "latest_start": start + timedelta(seconds=last + 5),
            "planned_start": start + timedelta(seconds=last),
            "predicted_cost": 0.5 * (last - first + 1),
        }
        for i, (first, last) in enumerate(ranges)
    ]


def planned_window(
    url: str,
    dag_id: str = DAG,
    start: datetime = T0,
    ranges: Sequence[tuple[int, int]] = ((1, 6), (7, 10)),
    run_id: str | None = None,
) -> int:
    """Register the DAG (its query named "sales") and plan one 10 s window with a 2 s deadline."""
    with session_scope(url) as s:
        store.register_query(s, dag_id=dag_id, name="sales", sql="SELECT 1", mode=Mode.STATIC, params={})
        return store.record_plan(
            s,
            dag_id,
            start,
            start + timedelta(seconds=10),
            start + timedelta(seconds=12),
            10,
            PlanRecord(how="greedy"),
            batches(ranges, start),
            predicted_finish=start + timedelta(seconds=12),
            run_id=run_id,
        )


def data_file(name: str, stream: str = "sales", size: int = 100, modified: datetime = T0) -> DataFile:
    """A listed file of `stream` under s3://bucket/<stream>/."""
    return DataFile(stream, f"s3://bucket/{stream}/{name}", name, size, modified, etag=f'"{name}-{size}"')


def alembic_config(url: str) -> Config:
    """Alembic on the ledger's migrations, to move a test ledger to a given revision."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config
