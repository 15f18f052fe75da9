"""The ledger as an Airflow connection of type `iqp`, whose host (or extra `sqlalchemy_url`) is
the ledger database's SQLAlchemy URL; the connection form's labels come from provider info.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING

from airflow.sdk import BaseHook

from airflow_iqp import ledger
from airflow_iqp.ledger.engine import CONN_ID, IQP_CONN_TYPE, connection_url

if TYPE_CHECKING:
    from collections.abc import Iterator

    from sqlalchemy import Engine
    from sqlalchemy.orm import Session


class LedgerHook(BaseHook):
    """Reaches the ledger named by an Airflow connection rather than by the environment."""

    conn_name_attr = "iqp_conn_id"
    default_conn_name = CONN_ID
    conn_type = IQP_CONN_TYPE
    hook_name = "IQP ledger"

    def __init__(self, iqp_conn_id: str = default_conn_name) -> None:
        super().__init__()
        self.iqp_conn_id = iqp_conn_id

    def get_url(self) -> str:
        """The ledger's SQLAlchemy URL, e.g. `postgresql+psycopg://...` or `sqlite:////path`."""
        return connection_url(self.get_connection(self.iqp_conn_id))

    def get_conn(self) -> Engine:
        """The ledger's engine (one per URL and process)."""
        return ledger.engine(self.get_url())

    @contextmanager
    def session_scope(self) -> Iterator[Session]:
        """A transaction on the ledger, migrated on first use (see `airflow_iqp.ledger`)."""
        with ledger.session_scope(self.get_url()) as session:
            yield session
