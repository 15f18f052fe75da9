"""The executors the lease controller held (`--cores plan`), each from its registration to its
release: what a provider bills, read by the capacity view and the live benchmark.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"


def upgrade() -> None:
    op.create_table(
        "executor_leases",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("application", sa.String(length=200), nullable=False),
        sa.Column("executor", sa.String(length=100), nullable=False),
        sa.Column("cores", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("released_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_executor_leases")),
        sa.UniqueConstraint("application", "executor", name=op.f("uq_executor_leases_application_executor")),
    )


def downgrade() -> None:
    op.drop_table("executor_leases")
