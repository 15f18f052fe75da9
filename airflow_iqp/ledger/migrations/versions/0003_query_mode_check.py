"""A query's mode is static or dynamic: a CHECK on queries.mode, as on the other status columns.

The values are written out rather than read from `airflow_iqp.constants.Mode`: a migration
records the schema of its revision, and must not change when the enum does.
"""

from __future__ import annotations

from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"

NAME = "ck_queries_mode"


def upgrade() -> None:
    # SQLite cannot add a constraint to a table: batch mode copies the table with it.
    with op.batch_alter_table("queries") as batch:
        batch.create_check_constraint(op.f(NAME), "mode IN ('static', 'dynamic')")


def downgrade() -> None:
    with op.batch_alter_table("queries") as batch:
        batch.drop_constraint(op.f(NAME), type_="check")
