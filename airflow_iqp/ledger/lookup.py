"""Rows the store's operations start from, found or a `LedgerLookupError` that names them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import select

from airflow_iqp.exceptions import LedgerLookupError
from airflow_iqp.ledger.models import Batch, Query, Window

if TYPE_CHECKING:
    from sqlalchemy.orm import Session


def query_id(session: Session, dag_id: str) -> int:
    """The id of the query the DAG registered."""
    found = session.scalar(select(Query.id).where(Query.dag_id == dag_id))
    if found is None:
        raise LedgerLookupError("query of DAG", dag_id)
    return found


def window(session: Session, window_id: int) -> Window:
    """A window by id."""
    found = session.get(Window, window_id)
    if found is None:
        raise LedgerLookupError("window", window_id)
    return found


def batch(session: Session, window_id: int, index: int) -> Batch:
    """A window's batch by index, locked for update (PostgreSQL) until the transaction ends."""
    found = session.scalar(
        select(Batch).where(Batch.window_id == window_id, Batch.batch_index == index).with_for_update()
    )
    if found is None:
        raise LedgerLookupError(f"window {window_id} batch", index)
    return found
