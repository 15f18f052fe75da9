"""Which task attempt runs a granted request: a retry of the same task must not run under a
lease the attempt before it still holds.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"


def upgrade() -> None:
    with op.batch_alter_table("dispatch_requests") as batch:
        batch.add_column(sa.Column("taken_by", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("dispatch_requests") as batch:
        batch.drop_column("taken_by")
