"""Alembic environment: runs online only, on the ledger's own engine (same SQLite pragmas)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from alembic import context
from sqlalchemy import text

from airflow_iqp.ledger.engine import engine
from airflow_iqp.ledger.models import Base

if TYPE_CHECKING:
    from sqlalchemy import Connection

# Any constant: PostgreSQL processes migrating the same database at once take turns on it.
_PG_MIGRATION_LOCK = 0x1B9_0001


def _sqlite_foreign_keys(connection: Connection, on: bool) -> None:
    """Switch SQLite's foreign-key enforcement, outside any transaction (inside one it is a no-op).

    Batch mode rebuilds a table as copy, drop and rename; with enforcement on, dropping a table
    that other tables reference fails although the copy takes its place (SQLite's own advice for
    rebuilding a table is to switch enforcement off meanwhile).
    """
    cursor = connection.connection.cursor()
    try:
        cursor.execute(f"PRAGMA foreign_keys={'ON' if on else 'OFF'}")
    finally:
        cursor.close()


def run_migrations_online() -> None:
    url = context.config.get_main_option("sqlalchemy.url")
    with engine(url).connect() as connection:
        sqlite = connection.dialect.name == "sqlite"
        if sqlite:
            _sqlite_foreign_keys(connection, on=False)
        try:
            # One transaction for the whole upgrade; on SQLite it begins IMMEDIATE, which also
            # serialises concurrent first-use migrations.
            with connection.begin():
                if connection.dialect.name == "postgresql":
                    connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_MIGRATION_LOCK})
                context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=sqlite)
                context.run_migrations()
                if sqlite and (broken := connection.exec_driver_sql("PRAGMA foreign_key_check").all()):
                    raise RuntimeError(f"the migration left rows whose foreign keys point nowhere: {broken[:5]}")
        finally:
            if sqlite:
                _sqlite_foreign_keys(connection, on=True)


run_migrations_online()
