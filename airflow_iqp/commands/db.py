"""`iqp db migrate`: bring the ledger database's schema up to date."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `iqp db migrate`."""
    parser = subparsers.add_parser("db", help="manage the ledger database")
    commands = parser.add_subparsers(dest="db_command", required=True)
    mig = commands.add_parser("migrate", help="create or upgrade the ledger schema (safe to repeat)")
    mig.add_argument("--url", help="SQLAlchemy or Airflow connection URL (default: the iqp_default connection)")
    mig.set_defaults(func=_migrate)


def _migrate(args: argparse.Namespace) -> int:
    from airflow_iqp.ledger.engine import ledger_url, masked, migrate

    url = ledger_url(args.url)
    revision = migrate(url)
    print(f"ledger {masked(url)} at revision {revision}")
    return 0
