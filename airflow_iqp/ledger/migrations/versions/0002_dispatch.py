"""Dispatcher: shared resources with leases, the requests that queue for them, and the slot
and trigger reason of dynamic-mode batches.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"

OPEN = "state IN ('waiting', 'granted')"


def upgrade() -> None:
    with op.batch_alter_table("batches") as batch:
        batch.add_column(sa.Column("slot", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("reason", sa.String(length=40), nullable=True))
    op.create_table(
        "resources",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("holder_id", sa.Integer(), nullable=True),
        sa.Column("lease_expires", sa.DateTime(timezone=True), nullable=True),
        sa.Column("fence", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_resources")),
    )
    op.create_table(
        "dispatch_requests",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("window_id", sa.Integer(), nullable=False),
        sa.Column("query", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("slot", sa.Integer(), nullable=False),
        sa.Column("reason", sa.String(length=40), nullable=False),
        sa.Column("deadline", sa.DateTime(timezone=True), nullable=False),
        sa.Column("remaining_cost", sa.Float(), nullable=False),
        sa.Column("lease_seconds", sa.Float(), nullable=False),
        sa.Column("state", sa.String(length=20), nullable=False),
        sa.Column("registered_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("granted_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("released_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("resource_id", sa.Integer(), nullable=True),
        sa.Column("fence", sa.BigInteger(), nullable=True),
        sa.Column("ranking", sa.JSON(), nullable=True),
        sa.CheckConstraint("kind IN ('partial', 'merge')", name=op.f("ck_dispatch_requests_kind")),
        sa.CheckConstraint(
            "state IN ('waiting', 'granted', 'released', 'expired')", name=op.f("ck_dispatch_requests_state")
        ),
        sa.ForeignKeyConstraint(
            ["window_id"], ["windows.id"], name=op.f("fk_dispatch_requests_window_id_windows"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_dispatch_requests")),
    )
    op.create_index(
        "uq_dispatch_requests_open_window",
        "dispatch_requests",
        ["window_id"],
        unique=True,
        sqlite_where=sa.text(OPEN),
        postgresql_where=sa.text(OPEN),
    )
    op.create_index("ix_dispatch_requests_state", "dispatch_requests", ["state"])


def downgrade() -> None:
    op.drop_index("ix_dispatch_requests_state", table_name="dispatch_requests")
    op.drop_index("uq_dispatch_requests_open_window", table_name="dispatch_requests")
    op.drop_table("dispatch_requests")
    op.drop_table("resources")
    with op.batch_alter_table("batches") as batch:
        batch.drop_column("reason")
        batch.drop_column("slot")
