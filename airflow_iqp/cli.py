"""The `iqp` command: one subcommand per module in `airflow_iqp.commands`."""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import TYPE_CHECKING

from airflow_iqp.exceptions import IqpError

if TYPE_CHECKING:
    from collections.abc import Sequence

# Each module defines `register(subparsers)`, which adds its subcommand and sets `func`.
COMMAND_MODULES = (
    "airflow_iqp.commands.plan",
    "airflow_iqp.commands.data",
    "airflow_iqp.commands.fit_cost_model",
    "airflow_iqp.commands.db",
    "airflow_iqp.commands.simulate",
    "airflow_iqp.commands.result",
    "airflow_iqp.commands.connect_server",
    "airflow_iqp.commands.check",
)


def build_parser() -> argparse.ArgumentParser:
    """The `iqp` parser, with every module of COMMAND_MODULES registered."""
    parser = argparse.ArgumentParser(prog="iqp", description=__doc__)
    subparsers = parser.add_subparsers(dest="command", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one `iqp` command; a ValueError or one of our errors is printed as one line and exits 2."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ValueError, IqpError) as err:
        print(f"iqp {args.command}: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
