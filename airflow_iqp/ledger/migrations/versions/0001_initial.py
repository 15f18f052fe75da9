"""Initial ledger schema: queries, windows, batches, cost observations."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None


def upgrade() -> None:
    op.create_table(
        "queries",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("sql", sa.Text(), nullable=False),
        sa.Column("sql_path", sa.Text(), nullable=True),
        sa.Column("mode", sa.String(length=50), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_queries")),
        sa.UniqueConstraint("name", name=op.f("uq_queries_name")),
    )
    op.create_table(
        "cost_observations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("query_id", sa.Integer(), nullable=False),
        sa.Column("path", sa.String(length=20), nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("seconds", sa.Float(), nullable=False),
        sa.Column("observed_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("kind IN ('partial', 'merge')", name=op.f("ck_cost_observations_kind")),
        sa.CheckConstraint("path IN ('in_process', 'spark_submit')", name=op.f("ck_cost_observations_path")),
        sa.ForeignKeyConstraint(["query_id"], ["queries.id"], name=op.f("fk_cost_observations_query_id_queries")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_cost_observations")),
    )
    op.create_index(op.f("ix_cost_observations_query_id"), "cost_observations", ["query_id"])
    op.create_table(
        "windows",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("query_id", sa.Integer(), nullable=False),
        sa.Column("window_start", sa.DateTime(timezone=True), nullable=False),
        sa.Column("window_end", sa.DateTime(timezone=True), nullable=False),
        sa.Column("deadline", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expected_tuples", sa.BigInteger(), nullable=False),
        sa.Column("actual_tuples", sa.BigInteger(), nullable=True),
        sa.Column("plan", sa.JSON(), nullable=False),
        sa.Column("predicted_finish", sa.DateTime(timezone=True), nullable=True),
        sa.Column("actual_finish", sa.DateTime(timezone=True), nullable=True),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("deadline_met", sa.Boolean(), nullable=True),
        sa.Column("result_location", sa.Text(), nullable=True),
        sa.CheckConstraint("status IN ('planned', 'running', 'merged', 'failed')", name=op.f("ck_windows_status")),
        sa.ForeignKeyConstraint(["query_id"], ["queries.id"], name=op.f("fk_windows_query_id_queries")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_windows")),
        sa.UniqueConstraint("query_id", "window_start", name=op.f("uq_windows_query_id_window_start")),
    )
    op.create_index(op.f("ix_windows_query_id"), "windows", ["query_id"])
    op.create_table(
        "batches",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("window_id", sa.Integer(), nullable=False),
        sa.Column("batch_index", sa.Integer(), nullable=False),
        sa.Column("first_tuple", sa.BigInteger(), nullable=False),
        sa.Column("last_tuple", sa.BigInteger(), nullable=False),
        sa.Column("files", sa.JSON(), nullable=True),
        sa.Column("release", sa.DateTime(timezone=True), nullable=False),
        sa.Column("latest_start", sa.DateTime(timezone=True), nullable=False),
        sa.Column("planned_start", sa.DateTime(timezone=True), nullable=False),
        sa.Column("predicted_cost", sa.Float(), nullable=False),
        sa.Column("actual_start", sa.DateTime(timezone=True), nullable=True),
        sa.Column("actual_end", sa.DateTime(timezone=True), nullable=True),
        sa.Column("actual_tuples", sa.BigInteger(), nullable=True),
        sa.Column("actual_cost", sa.Float(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("output_location", sa.Text(), nullable=True),
        sa.CheckConstraint(
            "status IN ('planned', 'waiting', 'running', 'done', 'failed', 'skipped')", name=op.f("ck_batches_status")
        ),
        sa.ForeignKeyConstraint(
            ["window_id"], ["windows.id"], name=op.f("fk_batches_window_id_windows"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_batches")),
        sa.UniqueConstraint("window_id", "batch_index", name=op.f("uq_batches_window_id_batch_index")),
    )
    op.create_index(op.f("ix_batches_window_id"), "batches", ["window_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_batches_window_id"), table_name="batches")
    op.drop_table("batches")
    op.drop_index(op.f("ix_windows_query_id"), table_name="windows")
    op.drop_table("windows")
    op.drop_index(op.f("ix_cost_observations_query_id"), table_name="cost_observations")
    op.drop_table("cost_observations")
    op.drop_table("queries")
