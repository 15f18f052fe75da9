"""Backfilled windows: a window remembers that a backfill planned it, and a backfilled result
records no deadline outcome (its deadline had passed before it was planned).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"


def upgrade() -> None:
    with op.batch_alter_table("windows") as batch:
        batch.add_column(sa.Column("backfill", sa.Boolean(), nullable=False, server_default=sa.false()))
    with op.batch_alter_table("results") as batch:
        batch.alter_column("deadline_met", existing_type=sa.Boolean(), nullable=True)


def downgrade() -> None:
    op.execute("UPDATE results SET deadline_met = false WHERE deadline_met IS NULL")
    with op.batch_alter_table("results") as batch:
        batch.alter_column("deadline_met", existing_type=sa.Boolean(), nullable=False)
    with op.batch_alter_table("windows") as batch:
        batch.drop_column("backfill")
