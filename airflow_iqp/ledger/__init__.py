"""The ledger: our own record of queries, windows, batches and cost observations.

It lives in its own database (Airflow 3 keeps task code out of the metadata DB), reached through
the Airflow connection `iqp_default`. Importing this package never imports Airflow.
"""

from __future__ import annotations

from airflow_iqp.ledger.engine import engine, ledger_url, migrate, session_scope

__all__ = ["engine", "ledger_url", "migrate", "session_scope"]
