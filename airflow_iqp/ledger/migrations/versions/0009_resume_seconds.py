"""How long a grant waits for its task to take it (NULL: no wait, as before): a grant to a task
deferred in the triggerer must outlast its resume (trigger, scheduler, executor, a new task
process), or the resource goes to the next request before the granted job starts.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"


def upgrade() -> None:
    with op.batch_alter_table("dispatch_requests") as batch:
        batch.add_column(sa.Column("resume_seconds", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("dispatch_requests") as batch:
        batch.drop_column("resume_seconds")
