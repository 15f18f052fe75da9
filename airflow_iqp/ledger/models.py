"""Ledger tables as SQLAlchemy 2 declarative models; `migrations/` creates the same schema."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
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
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

WINDOW_STATUSES = ("planned", "running", "merged", "failed")
BATCH_STATUSES = ("planned", "waiting", "running", "done", "failed", "skipped")
EXECUTION_PATHS = ("in_process", "spark_submit")
COST_KINDS = ("partial", "merge")
REQUEST_KINDS = ("partial", "merge")
REQUEST_STATES = ("waiting", "granted", "released", "expired")
OPEN_REQUEST_STATES = ("waiting", "granted")


def utcnow() -> datetime:
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC in and out on every backend (SQLite stores no offset, so we fix it to UTC)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r}: the ledger stores timezone-aware UTC only")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _one_of(column: str, values: tuple[str, ...]) -> CheckConstraint:
    listed = ", ".join(f"'{v}'" for v in values)
    return CheckConstraint(f"{column} IN ({listed})", name=column)


class Base(DeclarativeBase):
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
    __tablename__ = "queries"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    sql: Mapped[str] = mapped_column(Text)
    sql_path: Mapped[str | None] = mapped_column(Text)
    mode: Mapped[str] = mapped_column(String(50))
    params: Mapped[dict[str, Any]]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    windows: Mapped[list[Window]] = relationship(back_populates="query")


class Window(Base):
    __tablename__ = "windows"
    __table_args__ = (UniqueConstraint("query_id", "window_start"), _one_of("status", WINDOW_STATUSES))

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
    status: Mapped[str] = mapped_column(String(20), default="planned")
    deadline_met: Mapped[bool | None]
    result_location: Mapped[str | None] = mapped_column(Text)

    query: Mapped[Query] = relationship(back_populates="windows")
    batches: Mapped[list[Batch]] = relationship(
        back_populates="window", order_by="Batch.batch_index", cascade="all, delete-orphan"
    )


class Batch(Base):
    __tablename__ = "batches"
    __table_args__ = (UniqueConstraint("window_id", "batch_index"), _one_of("status", BATCH_STATUSES))

    id: Mapped[int] = mapped_column(primary_key=True)
    window_id: Mapped[int] = mapped_column(ForeignKey("windows.id", ondelete="CASCADE"), index=True)
    batch_index: Mapped[int]
    first_tuple: Mapped[int] = mapped_column(BigInteger)
    last_tuple: Mapped[int] = mapped_column(BigInteger)
    files: Mapped[dict[str, Any] | None]
    release: Mapped[datetime]
    latest_start: Mapped[datetime]
    planned_start: Mapped[datetime]
    predicted_cost: Mapped[float] = mapped_column(Float)
    actual_start: Mapped[datetime | None]
    actual_end: Mapped[datetime | None]
    actual_tuples: Mapped[int | None] = mapped_column(BigInteger)
    actual_cost: Mapped[float | None] = mapped_column(Float)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    status: Mapped[str] = mapped_column(String(20), default="planned")
    output_location: Mapped[str | None] = mapped_column(Text)
    slot: Mapped[int | None]  # dynamic mode: the mapped task that cut and runs this batch
    reason: Mapped[str | None] = mapped_column(String(40))  # dynamic mode: why it fired

    window: Mapped[Window] = relationship(back_populates="batches")


class CostObservation(Base):
    __tablename__ = "cost_observations"
    __table_args__ = (_one_of("path", EXECUTION_PATHS), _one_of("kind", COST_KINDS))

    id: Mapped[int] = mapped_column(primary_key=True)
    query_id: Mapped[int] = mapped_column(ForeignKey("queries.id"), index=True)
    path: Mapped[str] = mapped_column(String(20))
    kind: Mapped[str] = mapped_column(String(20))
    size: Mapped[int] = mapped_column(BigInteger)  # tuples for a partial, partials for a merge
    seconds: Mapped[float] = mapped_column(Float)
    observed_at: Mapped[datetime] = mapped_column(default=utcnow)


class Resource(Base):
    """One unit of the shared Spark capacity; whoever holds its lease may run one job on it.
    `fence` grows with every grant, so a stale holder's writes can be told apart.
    """

    __tablename__ = "resources"

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    holder_id: Mapped[int | None] = mapped_column(Integer)
    lease_expires: Mapped[datetime | None]
    fence: Mapped[int] = mapped_column(BigInteger, default=0)


_open = "state IN ('waiting', 'granted')"


class DispatchRequest(Base):
    """A batch or merge asking for a resource: what the policy ranks it by, and what it got.
    A window has at most one open (waiting or granted) request: a query runs one job at a time.
    """

    __tablename__ = "dispatch_requests"
    __table_args__ = (
        _one_of("kind", REQUEST_KINDS),
        _one_of("state", REQUEST_STATES),
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
    query: Mapped[str] = mapped_column(String(200))
    kind: Mapped[str] = mapped_column(String(20))
    slot: Mapped[int]  # the map index of the task that asks (-1: the merge)
    reason: Mapped[str] = mapped_column(String(40))
    deadline: Mapped[datetime]
    remaining_cost: Mapped[float] = mapped_column(Float)
    lease_seconds: Mapped[float] = mapped_column(Float)
    state: Mapped[str] = mapped_column(String(20), default="waiting")
    registered_at: Mapped[datetime]
    granted_at: Mapped[datetime | None]
    released_at: Mapped[datetime | None]
    resource_id: Mapped[int | None] = mapped_column(Integer)
    fence: Mapped[int | None] = mapped_column(BigInteger)
    ranking: Mapped[list[Any] | None]  # at the grant: every candidate, best first, with its key
