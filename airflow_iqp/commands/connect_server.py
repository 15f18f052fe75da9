"""`iqp connect-server start|stop|status`: the Spark Connect server IQP jobs run on.

    iqp connect-server start [--port 15002] [--master local[2]] [--cores MIN,MAX|plan] [--token T] [--state-dir D]
    iqp connect-server status [--state-dir D]
    iqp connect-server stop [--state-dir D]

`start` returns once the server answers and prints the Airflow connection that points at it:
set it as `iqp_spark` (e.g. `AIRFLOW_CONN_IQP_SPARK='{...}'`) and the DAGs' jobs run on Connect.
`--foreground` runs the server in place instead (a container's main process); with
`--bind 0.0.0.0` on a private network, where clients reach it by another name than
`localhost`, use `--no-token`: the Connect client sends a token only over TLS or to localhost.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from airflow_iqp.settings import PLAN
from airflow_iqp.spark.connect_server import (
    DEFAULT_MASTER,
    DEFAULT_PORT,
    LOOPBACK,
    Cores,
    default_state_dir,
    run_foreground,
    start,
    status,
    stop,
)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `iqp connect-server start|stop|status`."""
    parser = subparsers.add_parser("connect-server", help="run the Spark Connect server IQP jobs run on")
    commands = parser.add_subparsers(dest="server_command", required=True)
    state = {"type": Path, "help": "pid, token and log of the server (default $AIRFLOW_HOME/iqp-connect-server)"}

    up = commands.add_parser("start", help="start the server in the background; returns once it answers")
    up.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"gRPC port (default {DEFAULT_PORT})")
    up.add_argument("--master", default=DEFAULT_MASTER, help=f"Spark master (default {DEFAULT_MASTER})")
    up.add_argument("--token", help="the token clients must send (default: a new random one, kept in the state dir)")
    up.add_argument("--no-token", action="store_true", help="accept clients without a token (a private network only)")
    up.add_argument("--bind", default=LOOPBACK, help=f"address to listen on (default {LOOPBACK}: this machine only)")
    up.add_argument("--driver-memory", default="2g", help="the server's JVM heap (default 2g)")
    up.add_argument(
        "--cores",
        type=_bounds,
        metavar="MIN,MAX|plan",
        help="a cluster's executors scale with the jobs between MIN and MAX one-core executors (Spark dynamic "
        "allocation): the capacity plan's open-phase cores and its peak (`iqp check --capacity`); an executor "
        "idle for [iqp] billing_unit_seconds is released. `plan`: the server's lease controller leases them as "
        "the ledger's capacity plan needs, up to [iqp] max_cores, and releases each at the end of a paid "
        "billing unit unless the plan needs it again",
    )
    up.add_argument("--foreground", action="store_true", help="run the server in this process (containers)")
    up.add_argument("--state-dir", **state)  # type: ignore[arg-type]  # argparse's kwargs are not typed per key
    up.set_defaults(func=_start)

    for name, func, text in (("status", _status, "show pid, URL and health"), ("stop", _stop, "stop the server")):
        sub = commands.add_parser(name, help=text)
        sub.add_argument("--state-dir", **state)  # type: ignore[arg-type]
        sub.set_defaults(func=func)


def _bounds(value: str) -> Cores:
    """`MIN,MAX` as two whole numbers, or `plan`."""
    if value.strip().lower() == PLAN:
        return PLAN
    least, _, most = value.partition(",")
    try:
        return int(least), int(most)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected MIN,MAX (two whole numbers), got {value!r}") from None


def _start(args: argparse.Namespace) -> int:
    if args.no_token and args.token:
        raise ValueError("--token and --no-token exclude each other")
    if args.foreground:
        run_foreground(
            port=args.port,
            master=args.master,
            bind=args.bind,
            driver_memory=args.driver_memory,
            token=args.token,
            cores=args.cores,
        )
    state_dir = args.state_dir or default_state_dir()
    server = start(
        state_dir,
        port=args.port,
        master=args.master,
        token=args.token,
        authenticate=not args.no_token,
        bind=args.bind,
        driver_memory=args.driver_memory,
        cores=args.cores,
    )
    print(f"Spark Connect server running: pid {server.pid}, {server.url}, master {server.master}, log {server.log}")
    print(f"AIRFLOW_CONN_IQP_SPARK='{json.dumps(server.connection())}'")
    return 0


def _status(args: argparse.Namespace) -> int:
    state_dir = args.state_dir or default_state_dir()
    server = status(state_dir)
    if server is None:
        print(f"no Spark Connect server running from {state_dir}")
        return 1
    health = "answering" if server.answers() else "NOT answering"
    print(f"pid {server.pid}, {server.url}, master {server.master}: {health}; log {server.log}")
    return 0 if server.answers() else 1


def _stop(args: argparse.Namespace) -> int:
    state_dir = args.state_dir or default_state_dir()
    server = stop(state_dir)
    print(f"stopped the Spark Connect server (pid {server.pid})" if server else f"no server running from {state_dir}")
    return 0
