"""Where the ledger is, one engine per URL, and sessions that migrate the schema on first use."""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import URL, Engine, create_engine, event, make_url
from sqlalchemy.orm import Session

from airflow_iqp.exceptions import InvalidSetting
from airflow_iqp.settings import airflow_home, ledger_connection_uri

if TYPE_CHECKING:
    from collections.abc import Iterator

    from airflow.sdk import Connection

CONN_ID = "iqp_default"
IQP_CONN_TYPE = "iqp"
MIGRATIONS = Path(__file__).parent / "migrations"
SQLITE_BUSY_SECONDS = 60

_engines: dict[tuple[str, bool], Engine] = {}
_migrated: set[str] = set()
_lock = threading.Lock()
_migration_lock = threading.Lock()  # alembic's `context` is module-global: one upgrade at a time


def ledger_url(url: str | None = None) -> str:
    """The ledger's SQLAlchemy URL: `url`, else $AIRFLOW_CONN_IQP_DEFAULT, else the Airflow
    connection `iqp_default`, else SQLite in $AIRFLOW_HOME.

    A plain database URI in the environment is used without importing Airflow; the JSON form and
    `iqp://` URIs are left to Airflow to parse, as the connection `iqp_default`.
    """
    if url:
        return sqlalchemy_url(url)
    if (uri := ledger_connection_uri()) and _is_database_uri(uri):
        return sqlalchemy_url(uri)
    if found := _airflow_connection_url():
        return found
    return f"sqlite:///{airflow_home() / 'iqp_ledger.db'}"


def _is_database_uri(value: str) -> bool:
    return not value.lstrip().startswith("{") and not value.startswith(f"{IQP_CONN_TYPE}:")


def sqlalchemy_url(uri: str) -> str:
    """Airflow connection URIs say `postgres://`; SQLAlchemy wants a driver, and we ship psycopg 3."""
    scheme, sep, rest = uri.partition("://")
    if scheme in ("postgres", "postgresql"):
        return f"postgresql+psycopg{sep}{rest}"
    return uri


def _airflow_connection_url() -> str | None:
    """Ask Airflow's Task SDK (a worker's secrets backends); None where there is no such connection."""
    try:
        from airflow.sdk import BaseHook
        from airflow.sdk.exceptions import AirflowNotFoundException
    except ImportError:
        return None
    try:
        conn = BaseHook.get_connection(CONN_ID)
    except AirflowNotFoundException:
        return None
    return connection_url(conn)


def connection_url(conn: Connection) -> str:
    """An Airflow connection as a SQLAlchemy URL. Type `iqp` holds the URL whole (extra
    `sqlalchemy_url`, else host); database types are assembled from their fields.
    """
    if conn.conn_type == IQP_CONN_TYPE:
        if found := conn.extra_dejson.get("sqlalchemy_url") or conn.host:
            return sqlalchemy_url(found)
        raise InvalidSetting(
            f"connection {conn.conn_id!r} of type iqp has no SQLAlchemy URL: set its host or its extra `sqlalchemy_url`"
        )
    if conn.conn_type == "sqlite":
        return f"sqlite:///{conn.host}"
    return URL.create(
        sqlalchemy_url(f"{conn.conn_type}://").removesuffix("://"),
        username=conn.login or None,
        password=conn.password or None,
        host=conn.host or None,
        port=conn.port,
        database=conn.schema or None,
    ).render_as_string(hide_password=False)


def masked(url: str) -> str:
    """The URL with its password hidden, for messages and logs."""
    return make_url(url).render_as_string(hide_password=True)


def engine(url: str | None = None, read_only: bool = False) -> Engine:
    """One engine (and pool) per URL per process, and one more for read-only sessions."""
    resolved = ledger_url(url)
    read_only = read_only and make_url(resolved).get_backend_name() == "sqlite"  # only SQLite differs
    with _lock:
        if (resolved, read_only) not in _engines:
            _engines[resolved, read_only] = _create_engine(resolved, read_only)
        return _engines[resolved, read_only]


def _create_engine(url: str, read_only: bool) -> Engine:
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return create_engine(url, pool_pre_ping=True)
    if parsed.database and parsed.database != ":memory:":
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
    eng = create_engine(url, connect_args={"timeout": SQLITE_BUSY_SECONDS})
    event.listen(eng, "connect", _sqlite_on_connect)
    event.listen(eng, "begin", _sqlite_begin_deferred if read_only else _sqlite_begin_immediate)
    return eng


def _sqlite_on_connect(dbapi_connection: Any, _record: Any) -> None:
    """WAL lets readers run beside the one writer; the busy timeout makes writers queue, not fail."""
    dbapi_connection.isolation_level = None  # we issue BEGIN ourselves, see below
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_SECONDS * 1000}")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def _sqlite_begin_immediate(connection: Any) -> None:
    """Take the write lock up front: a deferred transaction that reads and then writes gets
    SQLITE_BUSY at once when another process wrote meanwhile, and no timeout helps there.
    """
    connection.exec_driver_sql("BEGIN IMMEDIATE")


def _sqlite_begin_deferred(connection: Any) -> None:
    """Readers (triggers polling) must not queue for the write lock: WAL gives them a snapshot."""
    connection.exec_driver_sql("BEGIN")


def _dispose_in_child() -> None:
    """A forked Airflow task must not reuse its parent's pooled connections."""
    for eng in _engines.values():
        eng.dispose(close=False)


os.register_at_fork(after_in_child=_dispose_in_child)


def migrate(url: str | None = None) -> str:
    """`alembic upgrade head` on the ledger, with no alembic.ini; returns the revision now there."""
    from alembic import command
    from alembic.config import Config
    from alembic.runtime.migration import MigrationContext

    resolved = ledger_url(url)
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("sqlalchemy.url", resolved.replace("%", "%%"))
    with _migration_lock:
        command.upgrade(config, "head")
        _migrated.add(resolved)
    with engine(resolved).connect() as connection:
        return str(MigrationContext.configure(connection).get_current_revision())


@contextmanager
def session_scope(url: str | None = None, read_only: bool = False) -> Iterator[Session]:
    """A session in one transaction: committed if the block succeeds, rolled back if it raises.
    The first use of a URL in a process migrates its schema. `read_only` sessions (what
    triggers use) do not take SQLite's write lock, so polling never holds up a grant.
    """
    resolved = ledger_url(url)
    if resolved not in _migrated:
        migrate(resolved)
    with Session(engine(resolved, read_only), expire_on_commit=False) as session, session.begin():
        yield session
