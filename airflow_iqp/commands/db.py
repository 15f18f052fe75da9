"""`iqp db migrate`: bring the ledger database's schema up to date. `iqp db prune`: drop the
per-file rows of old merged windows (ledger/prune.py).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse

_UNITS = {"d": timedelta(days=1), "h": timedelta(hours=1), "m": timedelta(minutes=1)}


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `iqp db migrate` and `iqp db prune`."""
    parser = subparsers.add_parser("db", help="manage the ledger database")
    commands = parser.add_subparsers(dest="db_command", required=True)
    mig = commands.add_parser("migrate", help="create or upgrade the ledger schema (safe to repeat)")
    mig.add_argument("--url", help="SQLAlchemy or Airflow connection URL (default: the iqp_default connection)")
    mig.set_defaults(func=_migrate)
    prune = commands.add_parser(
        "prune",
        help="drop the file rows of merged windows older than a cutoff; keep windows, batches, results, costs",
        description="Drop the stream_files rows of the merged windows that ended before now less --older-than, "
        "for the DAGs that DAGS_FOLDER declares (their streams' history= says how far back files may land; a "
        "cutoff inside it is refused). Windows, batches, results, costs and models are kept.",
    )
    prune.add_argument("dags_folder", type=Path, metavar="DAGS_FOLDER", help="folder of the DAG files")
    prune.add_argument("--older-than", required=True, type=duration, help="such as 30d, 12h or 90m")
    prune.add_argument("--url", help="SQLAlchemy or Airflow connection URL (default: the iqp_default connection)")
    prune.set_defaults(func=_prune)


def duration(text: str) -> timedelta:
    """`30d`, `12h`, `90m`: a whole number of days, hours or minutes."""
    match = re.fullmatch(r"\s*(\d+)\s*([dhm])\s*", text)
    if match is None or int(match[1]) == 0:
        raise ValueError(f"not a duration: {text!r}; give a whole number of days, hours or minutes, e.g. 30d")
    return int(match[1]) * _UNITS[match[2]]


def _migrate(args: argparse.Namespace) -> int:
    from airflow_iqp.ledger.engine import ledger_url, masked, migrate

    url = ledger_url(args.url)
    revision = migrate(url)
    print(f"ledger {masked(url)} at revision {revision}")
    return 0


def _prune(args: argparse.Namespace) -> int:
    from airflow_iqp.commands.check import declarations
    from airflow_iqp.ledger import session_scope
    from airflow_iqp.ledger.engine import ledger_url, masked
    from airflow_iqp.ledger.prune import prune
    from airflow_iqp.runtime.inputs import retention

    found, invalid = declarations(args.dags_folder)
    for file, err in invalid.items():
        print(f"{file.name}: invalid declaration, its DAGs are left as they are: {err}")
    url = ledger_url(args.url)
    with session_scope(url) as session:
        report = prune(session, [retention(d) for d in found], args.older_than, datetime.now(UTC))
    print(f"ledger {masked(url)}:")
    for p in report.pruned:
        kinds = ", ".join(f"{n} {status}" for status, n in p.rows.items()) or "none"
        up_to = f"{p.cutoff:%Y-%m-%d %H:%M} UTC"
        print(f"{p.dag_id}: dropped {p.total} file row(s) ({kinds}) of {p.windows} window(s) ended by {up_to}")
    if report.left:
        print(f"left as they are (no DAG file in {args.dags_folder} declares them): {', '.join(report.left)}")
    return 1 if invalid else 0
