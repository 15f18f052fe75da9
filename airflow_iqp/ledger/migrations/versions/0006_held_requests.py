"""Inserted idle time: why the dispatcher last kept the resource free rather than grant a request.

- `dispatch_requests.held`: the reason, in words (the job of an earlier deadline it waited for).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"


def upgrade() -> None:
    op.add_column("dispatch_requests", sa.Column("held", sa.Text(), nullable=True))


def downgrade() -> None:
    # A plain DROP COLUMN (SQLite >= 3.35): batch mode would copy the table and its partial index.
    op.drop_column("dispatch_requests", "held")
