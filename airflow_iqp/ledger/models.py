"""Ledger tables as SQLAlchemy 2 declarative models; `migrations/` creates the same schema.

Modes, statuses, kinds and states are plain strings in the database, each column held to its
enum in `airflow_iqp.constants` by a CHECK constraint built from that enum.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
    false,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from airflow_iqp.constants import (
    OPEN_REQUEST_STATES,
    BatchStatus,
    CostSource,
    ExecutionPath,
    FileStatus,
    JobKind,
    Mode,
    RequestState,
    WindowStatus,
)

if TYPE_CHECKING:
    from collections.abc import Iterable
    from enum import StrEnum

DAG_ID_LENGTH = 250  # Airflow's own limit on a dag_id


def utcnow() -> datetime:
    """Now, timezone-aware in UTC: the only kind of time the ledger stores."""
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC in and out on every backend (SQLite stores no offset, so we fix it to UTC)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Refuse naive times; store aware ones in UTC."""
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r}: the ledger stores timezone-aware UTC only")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Read every time back as aware UTC."""
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _in(column: str, values: Iterable[StrEnum]) -> str:
    listed = ", ".join(f"'{v.value}'" for v in values)
    return f"{column} IN ({listed})"


def _one_of(column: str, enum: type[StrEnum]) -> CheckConstraint:
    """The column holds a value of `enum`, checked by the database itself."""
    return CheckConstraint(_in(column, enum), name=column)


class Base(DeclarativeBase):
    """Declarative base of the ledger's tables, with named constraints."""

    # Named constraints, so SQLite batch migrations can find them again.
    metadata = MetaData(
        naming_convention={
            "ix": "ix_%(column_0_label)s",
            "uq": "uq_%(table_name)s_%(column_0_N_name)s",
            "ck": "ck_%(table_name)s_%(constraint_name)s",
            "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
            "pk": "pk_%(table_name)s",
        }
    )
    type_annotation_map = {datetime: UTCDateTime(), dict[str, Any]: JSON(), list[Any]: JSON()}


class Query(Base):
    """An intermittent query as one DAG runs it: the DAG is the unit (two DAGs may run the same
    SQL, named alike, over different streams), with its SQL, mode and declared parameters.
    """

    __tablename__ = "queries"
    __table_args__ = (_one_of("mode", Mode),)

    id: Mapped[int] = mapped_column(primary_key=True)
    dag_id: Mapped[str] = mapped_column(String(DAG_ID_LENGTH), unique=True)
    name: Mapped[str] = mapped_column(String(200))  # the query's name (its file's stem)
    sql: Mapped[str] = mapped_column(Text)
    sql_path: Mapped[str | None] = mapped_column(Text)
    mode: Mapped[str] = mapped_column(String(50))
    params: Mapped[dict[str, Any]]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    windows: Mapped[list[Window]] = relationship(back_populates="query")


class Window(Base):
    """One window of a query: its plan, deadline and outcome, the Airflow run that processes it,
    and what its current result is and left out.
    """

    __tablename__ = "windows"
    __table_args__ = (
        UniqueConstraint("query_id", "window_start"),
        _one_of("status", WindowStatus),
        Index("ix_windows_query_id_run_id", "query_id", "run_id"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    query_id: Mapped[int] = mapped_column(ForeignKey("queries.id"), index=True)
    window_start: Mapped[datetime]
    window_end: Mapped[datetime]
    deadline: Mapped[datetime]
    expected_tuples: Mapped[int] = mapped_column(BigInteger)
    actual_tuples: Mapped[int | None] = mapped_column(BigInteger)
    plan: Mapped[dict[str, Any]]
    predicted_finish: Mapped[datetime | None]
    actual_finish: Mapped[datetime | None]
    status: Mapped[str] = mapped_column(String(20), default=WindowStatus.PLANNED.value)
    deadline_met: Mapped[bool | None]
    result_location: Mapped[str | None] = mapped_column(Text)  # the merge's committed output
    run_id: Mapped[str | None] = mapped_column(Text)  # the Airflow DAG run that planned it last
    result_uri: Mapped[str | None] = mapped_column(Text)  # the current published result (see Result)
    incomplete: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())  # a file quarantined
    late_files: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))
    backfill: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())  # planned by a backfill

    query: Mapped[Query] = relationship(back_populates="windows")
    batches: Mapped[list[Batch]] = relationship(
        back_populates="window", order_by="Batch.batch_index", cascade="all, delete-orphan"
    )


class Batch(Base):
    """One partial job of a window: its tuples, frozen input files, attempts and cost."""

    __tablename__ = "batches"
    __table_args__ = (UniqueConstraint("window_id", "batch_index"), _one_of("status", BatchStatus))

    id: Mapped[int] = mapped_column(primary_key=True)
    window_id: Mapped[int] = mapped_column(ForeignKey("windows.id", ondelete="CASCADE"), index=True)
    batch_index: Mapped[int]
    first_tuple: Mapped[int] = mapped_column(BigInteger)
    last_tuple: Mapped[int] = mapped_column(BigInteger)
    files: Mapped[dict[str, Any] | None]  # stream -> uris; each file's identity is in stream_files
    release: Mapped[datetime]
    latest_start: Mapped[datetime]
    planned_start: Mapped[datetime]
    predicted_cost: Mapped[float] = mapped_column(Float)
    actual_start: Mapped[datetime | None]
    actual_end: Mapped[datetime | None]
    actual_tuples: Mapped[int | None] = mapped_column(BigInteger)
    actual_cost: Mapped[float | None] = mapped_column(Float)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    status: Mapped[str] = mapped_column(String(20), default=BatchStatus.PLANNED.value)
    output_location: Mapped[str | None] = mapped_column(Text)
    slot: Mapped[int | None]  # dynamic mode: the mapped task that cut and runs this batch
    reason: Mapped[str | None] = mapped_column(String(40))  # dynamic mode: why it fired

    window: Mapped[Window] = relationship(back_populates="batches")


class CostObservation(Base):
    """One measured job: how long a partial of `size` tuples (or a merge of `size` partials) took."""

    __tablename__ = "cost_observations"
    __table_args__ = (
        _one_of("path", ExecutionPath),
        _one_of("kind", JobKind),
        Index("ix_cost_observations_recent", "query_id", "path", "kind", "observed_at"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    query_id: Mapped[int] = mapped_column(ForeignKey("queries.id"), index=True)
    path: Mapped[str] = mapped_column(String(20))
    kind: Mapped[str] = mapped_column(String(20))
    size: Mapped[int] = mapped_column(BigInteger)  # tuples for a partial, partials for a merge
    seconds: Mapped[float] = mapped_column(Float)
    observed_at: Mapped[datetime] = mapped_column(default=utcnow)


class CostModel(Base):
    """A cost model fitted for a DAG on one execution path; the newest is the one to plan with.
    `document` is `learning.LearnedCost.to_dict()` (or a model file's content, source "file").
    """

    __tablename__ = "cost_models"
    __table_args__ = (
        _one_of("path", ExecutionPath),
        _one_of("source", CostSource),
        Index("ix_cost_models_latest", "query_id", "path", "fitted_at"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    query_id: Mapped[int] = mapped_column(ForeignKey("queries.id"))
    path: Mapped[str] = mapped_column(String(20))
    fitted_at: Mapped[datetime] = mapped_column(default=utcnow)
    observations: Mapped[int] = mapped_column(Integer)
    source: Mapped[str] = mapped_column(String(20))
    document: Mapped[dict[str, Any]]


_frozen = f"status = '{FileStatus.FROZEN.value}'"


class StreamFile(Base):
    """One input file of a DAG's stream as the ledger knows it: frozen by a batch (the one
    record that counts it), or an event about it (late, rewritten, quarantined).

    At most one frozen record per DAG, stream and uri, enforced by the database: the
    exactly-once guarantee. An event is recorded once per file version (size and modification
    time) however often listings see it. A frozen record goes with its batch (ON DELETE
    CASCADE): a freeze is the batch's claim on the file, and a claim that outlived its batch
    would keep the file from every other batch while nothing counted it.
    """

    __tablename__ = "stream_files"
    __table_args__ = (
        _one_of("status", FileStatus),
        Index(
            "uq_stream_files_frozen",
            "query_id",
            "uri",
            "stream",
            unique=True,
            sqlite_where=text(_frozen),
            postgresql_where=text(_frozen),
        ),
        Index(
            "uq_stream_files_event",
            "query_id",
            "stream",
            "uri",
            "status",
            "size",
            "modified",
            unique=True,
            sqlite_where=text(f"NOT ({_frozen})"),
            postgresql_where=text(f"NOT ({_frozen})"),
        ),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    query_id: Mapped[int] = mapped_column(ForeignKey("queries.id"))
    window_id: Mapped[int | None] = mapped_column(ForeignKey("windows.id", ondelete="CASCADE"), index=True)
    batch_id: Mapped[int | None] = mapped_column(ForeignKey("batches.id", ondelete="CASCADE"), index=True)
    stream: Mapped[str] = mapped_column(String(200))
    uri: Mapped[str] = mapped_column(Text)
    size: Mapped[int] = mapped_column(BigInteger)
    modified: Mapped[datetime]
    etag: Mapped[str | None] = mapped_column(Text)
    rows: Mapped[int | None] = mapped_column(BigInteger)
    status: Mapped[str] = mapped_column(String(20))
    recorded_at: Mapped[datetime] = mapped_column(default=utcnow)
    note: Mapped[str | None] = mapped_column(Text)


class Result(Base):
    """One published result of a window. A re-merge (late files) or a backfill publishes a new
    one that replaces the window's current `result_uri`; the earlier ones stay here as history.
    """

    __tablename__ = "results"

    id: Mapped[int] = mapped_column(primary_key=True)
    window_id: Mapped[int] = mapped_column(ForeignKey("windows.id", ondelete="CASCADE"), index=True)
    uri: Mapped[str] = mapped_column(Text)
    rows: Mapped[int] = mapped_column(BigInteger)  # input rows behind the result
    finished_at: Mapped[datetime]
    deadline_met: Mapped[bool | None]  # None: backfilled, its deadline had passed before it was planned
    incomplete: Mapped[bool]
    late_files: Mapped[int]
    recorded_at: Mapped[datetime] = mapped_column(default=utcnow)


class Resource(Base):
    """One unit of the shared Spark capacity; whoever holds its lease may run one job on it.
    `fence` grows with every grant, so a stale holder's writes can be told apart.
    """

    __tablename__ = "resources"

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    holder_id: Mapped[int | None] = mapped_column(Integer)
    lease_expires: Mapped[datetime | None]
    fence: Mapped[int] = mapped_column(BigInteger, default=0)


_open = _in("state", OPEN_REQUEST_STATES)


class DispatchRequest(Base):
    """A batch or merge asking for a resource: what the policy ranks it by, and what it got.
    A window has at most one open (waiting or granted) request: a query runs one job at a time.
    """

    __tablename__ = "dispatch_requests"
    __table_args__ = (
        _one_of("kind", JobKind),
        _one_of("state", RequestState),
        Index(
            "uq_dispatch_requests_open_window",
            "window_id",
            unique=True,
            sqlite_where=text(_open),
            postgresql_where=text(_open),
        ),
        Index("ix_dispatch_requests_state", "state"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    window_id: Mapped[int] = mapped_column(ForeignKey("windows.id", ondelete="CASCADE"))
    query: Mapped[str] = mapped_column(String(DAG_ID_LENGTH))  # the DAG's id
    kind: Mapped[str] = mapped_column(String(20))
    slot: Mapped[int]  # the map index of the task that asks (-1: the merge)
    reason: Mapped[str] = mapped_column(String(40))
    deadline: Mapped[datetime]
    remaining_cost: Mapped[float] = mapped_column(Float)
    lease_seconds: Mapped[float] = mapped_column(Float)
    resume_seconds: Mapped[float | None] = mapped_column(Float)  # the grant's wait for its task to take it
    state: Mapped[str] = mapped_column(String(20), default=RequestState.WAITING.value)
    registered_at: Mapped[datetime]
    granted_at: Mapped[datetime | None]
    released_at: Mapped[datetime | None]
    resource_id: Mapped[int | None] = mapped_column(Integer)
    fence: Mapped[int | None] = mapped_column(BigInteger)
    ranking: Mapped[list[Any] | None]  # at the grant: every candidate, best first, with its key
    held: Mapped[str | None] = mapped_column(Text)  # why a grant last kept the resource idle instead
    taken_by: Mapped[str | None] = mapped_column(Text)  # the task attempt running under the grant
    cores: Mapped[int | None] = mapped_column(Integer)  # what the grant gave (None: the connection's default)


class ExecutorLease(Base):
    """One executor the lease controller held (`runtime.leases`): from its registration with the
    application's driver to its release (None: still held), for the bill and the capacity view.
    """

    __tablename__ = "executor_leases"
    __table_args__ = (UniqueConstraint("application", "executor"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    application: Mapped[str] = mapped_column(String(200))  # the Spark application's id
    executor: Mapped[str] = mapped_column(String(100))
    cores: Mapped[int] = mapped_column(Integer)
    started_at: Mapped[datetime]
    released_at: Mapped[datetime | None]
