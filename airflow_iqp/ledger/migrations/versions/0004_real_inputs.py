"""Real inputs: the DAG is the ledger's unit, every input file is recorded, results keep their
history, and fitted cost models are stored.

- `queries.dag_id` (unique; existing rows take their name), `name` no longer unique;
- `windows`: the Airflow run, the published result, incomplete (a file quarantined), late files;
- `stream_files`: each input file frozen by a batch (at most once per DAG and path: a partial
  unique index) and the events about files (late, rewritten, quarantined; once per version);
- `results`: every published result of a window; `cost_models`: fitted models per path;
- `cost_observations.path` may be `spark_connect`; `dispatch_requests.query` holds a dag_id.

Values are written out rather than read from the enums: a migration records the schema of its
revision, and must not change when an enum does.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"

DAG_ID_LENGTH = 250
FROZEN = "status = 'frozen'"
OPEN = "state IN ('waiting', 'granted')"
OLD_PATHS = "path IN ('in_process', 'spark_submit')"
PATHS = "path IN ('in_process', 'spark_submit', 'spark_connect')"


def upgrade() -> None:
    # Added nullable, filled, then held NOT NULL and unique: batch mode copies the table on SQLite.
    op.add_column("queries", sa.Column("dag_id", sa.String(length=DAG_ID_LENGTH), nullable=True))
    op.execute("UPDATE queries SET dag_id = name")
    with op.batch_alter_table("queries") as batch:
        batch.alter_column("dag_id", existing_type=sa.String(length=DAG_ID_LENGTH), nullable=False)
        batch.drop_constraint(op.f("uq_queries_name"), type_="unique")
        batch.create_unique_constraint(op.f("uq_queries_dag_id"), ["dag_id"])

    op.add_column("windows", sa.Column("run_id", sa.Text(), nullable=True))
    op.add_column("windows", sa.Column("result_uri", sa.Text(), nullable=True))
    op.add_column("windows", sa.Column("incomplete", sa.Boolean(), server_default=sa.false(), nullable=False))
    op.add_column("windows", sa.Column("late_files", sa.Integer(), server_default=sa.text("0"), nullable=False))
    op.create_index("ix_windows_query_id_run_id", "windows", ["query_id", "run_id"])

    with op.batch_alter_table("cost_observations") as batch:
        batch.drop_constraint(op.f("ck_cost_observations_path"), type_="check")
        batch.create_check_constraint(op.f("ck_cost_observations_path"), PATHS)
    op.create_index("ix_cost_observations_recent", "cost_observations", ["query_id", "path", "kind", "observed_at"])

    _resize_dispatch_query(DAG_ID_LENGTH)

    op.create_table(
        "stream_files",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("query_id", sa.Integer(), nullable=False),
        sa.Column("window_id", sa.Integer(), nullable=True),
        sa.Column("batch_id", sa.Integer(), nullable=True),
        sa.Column("stream", sa.String(length=200), nullable=False),
        sa.Column("uri", sa.Text(), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("modified", sa.DateTime(timezone=True), nullable=False),
        sa.Column("etag", sa.Text(), nullable=True),
        sa.Column("rows", sa.BigInteger(), nullable=True),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("note", sa.Text(), nullable=True),
        sa.CheckConstraint(
            "status IN ('frozen', 'late', 'rewritten', 'quarantined')", name=op.f("ck_stream_files_status")
        ),
        sa.ForeignKeyConstraint(["query_id"], ["queries.id"], name=op.f("fk_stream_files_query_id_queries")),
        sa.ForeignKeyConstraint(
            ["window_id"], ["windows.id"], name=op.f("fk_stream_files_window_id_windows"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["batch_id"], ["batches.id"], name=op.f("fk_stream_files_batch_id_batches"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_stream_files")),
    )
    op.create_index(op.f("ix_stream_files_window_id"), "stream_files", ["window_id"])
    op.create_index(op.f("ix_stream_files_batch_id"), "stream_files", ["batch_id"])
    op.create_index(
        "uq_stream_files_frozen",
        "stream_files",
        ["query_id", "uri", "stream"],
        unique=True,
        sqlite_where=sa.text(FROZEN),
        postgresql_where=sa.text(FROZEN),
    )
    op.create_index(
        "uq_stream_files_event",
        "stream_files",
        ["query_id", "stream", "uri", "status", "size", "modified"],
        unique=True,
        sqlite_where=sa.text(f"NOT ({FROZEN})"),
        postgresql_where=sa.text(f"NOT ({FROZEN})"),
    )

    op.create_table(
        "results",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("window_id", sa.Integer(), nullable=False),
        sa.Column("uri", sa.Text(), nullable=False),
        sa.Column("rows", sa.BigInteger(), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("deadline_met", sa.Boolean(), nullable=False),
        sa.Column("incomplete", sa.Boolean(), nullable=False),
        sa.Column("late_files", sa.Integer(), nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["window_id"], ["windows.id"], name=op.f("fk_results_window_id_windows"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_results")),
    )
    op.create_index(op.f("ix_results_window_id"), "results", ["window_id"])

    op.create_table(
        "cost_models",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("query_id", sa.Integer(), nullable=False),
        sa.Column("path", sa.String(length=20), nullable=False),
        sa.Column("fitted_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("observations", sa.Integer(), nullable=False),
        sa.Column("source", sa.String(length=20), nullable=False),
        sa.Column("document", sa.JSON(), nullable=False),
        sa.CheckConstraint(PATHS, name=op.f("ck_cost_models_path")),
        sa.CheckConstraint("source IN ('calibration', 'refit', 'file')", name=op.f("ck_cost_models_source")),
        sa.ForeignKeyConstraint(["query_id"], ["queries.id"], name=op.f("fk_cost_models_query_id_queries")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_cost_models")),
    )
    op.create_index("ix_cost_models_latest", "cost_models", ["query_id", "path", "fitted_at"])


def _resize_dispatch_query(length: int) -> None:
    """`dispatch_requests.query` holds a dag_id, which Airflow allows 250 characters. On SQLite
    batch mode copies the table; its partial index is dropped and made again around the copy
    rather than trusting reflection to carry the index's WHERE clause over.
    """
    index, where = "uq_dispatch_requests_open_window", sa.text(OPEN)
    op.drop_index(index, table_name="dispatch_requests")
    with op.batch_alter_table("dispatch_requests") as batch:
        batch.alter_column("query", existing_type=sa.String(), type_=sa.String(length=length), existing_nullable=False)
    op.create_index(index, "dispatch_requests", ["window_id"], unique=True, sqlite_where=where, postgresql_where=where)


def downgrade() -> None:
    """Back to 0003: fails if two DAGs ran queries of the same name (0003 held names unique), and
    drops spark_connect observations (0003 had no such path).
    """
    op.drop_index("ix_cost_models_latest", table_name="cost_models")
    op.drop_table("cost_models")
    op.drop_index(op.f("ix_results_window_id"), table_name="results")
    op.drop_table("results")
    op.drop_index("uq_stream_files_event", table_name="stream_files")
    op.drop_index("uq_stream_files_frozen", table_name="stream_files")
    op.drop_index(op.f("ix_stream_files_batch_id"), table_name="stream_files")
    op.drop_index(op.f("ix_stream_files_window_id"), table_name="stream_files")
    op.drop_table("stream_files")

    _resize_dispatch_query(200)

    op.drop_index("ix_cost_observations_recent", table_name="cost_observations")
    op.execute("DELETE FROM cost_observations WHERE path = 'spark_connect'")
    with op.batch_alter_table("cost_observations") as batch:
        batch.drop_constraint(op.f("ck_cost_observations_path"), type_="check")
        batch.create_check_constraint(op.f("ck_cost_observations_path"), OLD_PATHS)

    op.drop_index("ix_windows_query_id_run_id", table_name="windows")
    with op.batch_alter_table("windows") as batch:
        batch.drop_column("late_files")
        batch.drop_column("incomplete")
        batch.drop_column("result_uri")
        batch.drop_column("run_id")

    with op.batch_alter_table("queries") as batch:
        batch.drop_constraint(op.f("uq_queries_dag_id"), type_="unique")
        batch.create_unique_constraint(op.f("uq_queries_name"), ["name"])
        batch.drop_column("dag_id")
