"""Alembic environment: runs online only, on the ledger's own engine (same SQLite pragmas)."""

from __future__ import annotations

from alembic import context
from sqlalchemy import text

from airflow_iqp.ledger.engine import engine
from airflow_iqp.ledger.models import Base

# Any constant: PostgreSQL processes migrating the same database at once take turns on it.
_PG_MIGRATION_LOCK = 0x1B9_0001


def run_migrations_online() -> None:
    url = context.config.get_main_option("sqlalchemy.url")
    # One transaction for the whole upgrade; on SQLite it begins IMMEDIATE, which also serialises
    # concurrent first-use migrations.
    with engine(url).begin() as connection:
        if connection.dialect.name == "postgresql":
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_MIGRATION_LOCK})
        context.configure(
            connection=connection,
            target_metadata=Base.metadata,
            render_as_batch=connection.dialect.name == "sqlite",
        )
        context.run_migrations()


run_migrations_online()
