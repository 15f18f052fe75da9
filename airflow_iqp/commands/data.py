"""`iqp data generate` and `iqp data replay`: make the TPC-H stream, then feed it in over time."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from airflow_iqp.tpch.replay import PROFILES

if TYPE_CHECKING:
    import argparse


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `iqp data generate` and `iqp data replay`."""
    parser = subparsers.add_parser("data", help="generate and replay the TPC-H input stream")
    commands = parser.add_subparsers(dest="data_command", required=True)

    gen = commands.add_parser("generate", help="tpchgen-cli, then orders/lineitem split into arrival files")
    gen.add_argument("--out", type=Path, required=True, help="directory to (re)create")
    gen.add_argument("--scale", type=float, default=0.01, help="TPC-H scale factor (default 0.01)")
    gen.add_argument("--files", type=int, default=60, help="arrival files per stream (default 60)")
    gen.add_argument("--seconds-per-file", type=float, default=1.0, help="event-time gap between files")
    gen.set_defaults(func=_generate)

    rep = commands.add_parser("replay", help="land stream files into a directory following a rate profile")
    rep.add_argument("--source", type=Path, required=True, help="a directory made by `iqp data generate`")
    rep.add_argument("--landing", type=Path, required=True, help="files land in LANDING/<stream>/")
    rep.add_argument("--profile", choices=PROFILES, default="FR", help="arrival-rate profile (default FR)")
    rep.add_argument("--speedup", type=float, default=1.0, help="divide every arrival time by this")
    rep.add_argument("--start-index", type=int, default=0, help="resume at this file index")
    rep.set_defaults(func=_replay)


def _generate(args: argparse.Namespace) -> int:
    from airflow_iqp.tpch.generate import generate

    manifest = generate(args.out, args.scale, args.files, args.seconds_per_file)
    rows = {stream: sum(f.rows for f in files) for stream, files in manifest.streams.items()}
    print(f"wrote {manifest.files} files per stream to {args.out}: {rows}")
    return 0


def _replay(args: argparse.Namespace) -> int:
    from airflow_iqp.tpch.replay import replay

    landed = replay(args.source, args.landing, args.profile, args.speedup, args.start_index)
    print(f"landed {landed} file indexes into {args.landing}")
    return 0
