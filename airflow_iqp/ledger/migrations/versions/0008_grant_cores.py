"""How many cores a grant gave its job (NULL: the grant named none, the Spark connection's
default applies): the dispatcher grants a job its cores, not just a slot.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"


def upgrade() -> None:
    with op.batch_alter_table("dispatch_requests") as batch:
        batch.add_column(sa.Column("cores", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("dispatch_requests") as batch:
        batch.drop_column("cores")
