"""`iqp simulate`: the paper's multi-query experiment (Section 7.4, Fig. 7) on a simulated shared
resource that runs one batch at a time. Jobs are ordered by the live dispatcher's ranking, so
a column predicts what `[iqp] policy` runs.

--volume sets how many rows a window holds for each query (the cost models' unit is rows of
the streams a query reads, so orders-only, lineitem-only and join queries differ):
  measured  each model's largest measured batch (its whole stream at the model's `scale`):
            the models are then only interpolated, never extrapolated upwards.
  paper     the paper's stream: 4500 files of about 9300 orders rows (TPC-H scale 27.9);
            every model is extrapolated along its last fitted segment.
  SF        a TPC-H scale factor > 0: rows = measured rows * SF / the model's scale.

`--workload FILE.json` lists the queries instead (deadlines are still staggered by delta;
--volume, --profile and --path do not apply); its format is below.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from airflow_iqp.example_files import example_dir
from airflow_iqp.planning.cost_model_file import PATHS
from airflow_iqp.simulation import capacity, protocol, report, workload
from airflow_iqp.simulation.engine import Noise
from airflow_iqp.tpch.replay import PROFILES
from airflow_iqp.validation import number

# The examples' fitted models, as declaration.EXAMPLE_COST_MODELS (not imported: it loads Airflow).
EXAMPLE_COST_MODELS = example_dir("cost_models")


def volume_arg(text: str) -> str | float:
    """--volume: 'measured', 'paper' or a TPC-H scale factor > 0."""
    if text in protocol.VOLUMES:
        return text
    try:
        return number(float(text), "--volume", above=0)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be 'measured', 'paper' or a TPC-H scale factor > 0 (e.g. 0.1), got {text!r}"
        ) from None


def positive_arg(text: str) -> float:
    """--alpha and --tau-max: a finite number > 0."""
    try:
        return number(float(text), "value", above=0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text!r}") from None


def non_negative_arg(text: str) -> float:
    """--spread and --margin: a finite number >= 0."""
    try:
        return number(float(text), "value", minimum=0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text!r}") from None


def columns_arg(text: str) -> tuple[protocol.Column, ...]:
    """--policies: a comma-separated subset of the table's columns, in the order given."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    by_name = {c.name: c for c in (*protocol.COLUMNS, *protocol.MARGIN_COLUMNS)}
    known = ", ".join(by_name)
    if not names:
        raise argparse.ArgumentTypeError(f"must list at least one of {known}, got {text!r}")
    if unknown := [name for name in names if name not in by_name]:
        raise argparse.ArgumentTypeError(f"unknown policy {unknown[0]!r}; choose a comma-separated list of {known}")
    if len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"lists a policy twice: {text!r}")
    return tuple(by_name[name] for name in names)


def controllers_arg(text: str) -> tuple[str, ...]:
    """--capacity: a comma-separated subset of the capacity controllers, in the order given."""
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    known = ", ".join(capacity.CONTROLLERS)
    if not names or any(n not in capacity.CONTROLLERS for n in names):
        raise argparse.ArgumentTypeError(f"choose a comma-separated list of {known}, got {text!r}")
    if len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"lists a controller twice: {text!r}")
    return names


def confidence_arg(text: str) -> float:
    """--confidence: a probability strictly between 0 and 1."""
    try:
        value = number(float(text), "value", above=0)
    except ValueError:
        value = 1.0
    if value >= 1:
        raise argparse.ArgumentTypeError(f"must be a probability between 0 and 1 (e.g. 0.95), got {text!r}")
    return value


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add `iqp simulate` and its options."""
    p = subparsers.add_parser(
        "simulate",
        help="compare multi-query policies on a simulated shared resource (Fig. 7)",
        description="\n".join(doc or "" for doc in (__doc__, protocol.__doc__, workload.__doc__)),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--cost-models",
        type=Path,
        default=EXAMPLE_COST_MODELS,
        help="directory of fitted cost models (default: the examples' shipped with the package)",
    )
    p.add_argument("--workload", type=Path, help="JSON file listing the queries instead (schema above)")
    p.add_argument(
        "--volume",
        type=volume_arg,
        default=None,
        metavar="{measured,paper,SF}",
        help="rows per window for the fitted models: 'measured' (default: each model's largest measured "
        "batch, no extrapolation), 'paper' (4500 files x 9300 orders rows = TPC-H scale 27.9, "
        "extrapolated) or a TPC-H scale factor > 0",
    )
    p.add_argument(
        "--profile", choices=PROFILES, default=None, help="arrival profile of the paper's stream (default FR)"
    )
    p.add_argument("--alpha", type=positive_arg, default=0.5, help="MinBatch cost allowance over one batch (> 0)")
    p.add_argument(
        "--tau-max",
        type=positive_arg,
        default=30.0,
        help="longest a batch may block the resource (s); at least one tuple's cost of every query",
    )
    # in_process by default: one shared session is the paper's one-batch-at-a-time cluster, and
    # the spark_submit start-up alone takes 11-16 s of the paper's tau_max of 30 s.
    p.add_argument("--path", choices=PATHS, default=None, help="which fitted model to use (default in_process)")
    p.add_argument(
        "--order",
        choices=protocol.ORDERS,
        default="cost",
        help="order in which deadlines are staggered: single-batch cost ascending (default) or a "
        "random permutation drawn with --seed (the paper picks the first query at random)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of --order random and of --spread's draws")
    p.add_argument(
        "--spread",
        type=non_negative_arg,
        default=0.0,
        help="jobs take the model's cost times a random factor of mean 1 and this relative standard "
        "deviation (default 0: exactly the model's)",
    )
    p.add_argument(
        "--margin",
        type=non_negative_arg,
        default=2.0,
        help="the -margin columns estimate every job at 1 + MARGIN x spread times the model's cost "
        "(default 2, as learned models are planned: costs.MARGIN_K)",
    )
    p.add_argument(
        "--policies",
        type=columns_arg,
        default=protocol.COLUMNS,
        help="comma-separated columns to run (default edf,llf,sjf,rr,edf-trad,llf-trad,edf-idle,llf-idle; "
        "also edf-margin,llf-margin,edf-idle-margin,llf-idle-margin)",
    )
    p.add_argument("--png", type=Path, help="also draw the table: deadlines met and cost per delta and policy")
    p.add_argument(
        "--capacity",
        type=controllers_arg,
        help="compare elastic capacity instead of policies (EDF with MinBatch on cores leased by the BTU): "
        "a comma-separated subset of elastic,fixed,reactive",
    )
    p.add_argument(
        "--btu", type=positive_arg, default=capacity.BTU, help="billing time unit of a core (s), with --capacity"
    )
    p.add_argument(
        "--confidence",
        type=confidence_arg,
        default=capacity.CONFIDENCE,
        help="probability of meeting every deadline the capacity is sized for, with --capacity (default 0.95)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Simulate every chosen column at every delta; print the setting and the table."""
    if args.workload:
        for option in ("volume", "profile", "path"):
            if getattr(args, option) is not None:
                print(
                    f"iqp simulate: note: --{option} applies to the fitted cost models, not to --workload; ignored",
                    file=sys.stderr,
                )
        queries, window_end = workload.load_workload(args.workload)
        source = f"workload {args.workload}"
        title = f"{len(queries)} queries of {args.workload.name}"
        files = None
    else:
        volume = "measured" if args.volume is None else args.volume
        profile = args.profile or "FR"
        path = args.path or "in_process"
        queries, window_end, volumes = protocol.paper_workload(args.cost_models, path, profile, volume)
        shown = volume if isinstance(volume, str) else f"{volume:g}"
        scales = sorted({v.scale for v in volumes})
        rows = sorted(v.rows for v in volumes)
        source = (
            f"{protocol.PAPER_FILES} files at 1 file/s, profile {profile}, path {path}, volume {shown} "
            f"(TPC-H scale {', '.join(f'{s:g}' for s in scales)}: {rows[0]}..{rows[-1]} rows per query; "
            f"models measured up to {max(v.measured_rows for v in volumes)} rows at scale "
            f"{', '.join(sorted({f'{v.model_scale:g}' for v in volumes}))})"
        )
        title = f"{len(queries)} queries, {protocol.PAPER_FILES} files, profile {profile}, {path}, volume {shown}"
        files = protocol.PAPER_FILES
    order = protocol.deadline_order(queries, args.order, args.seed)
    if args.spread == 0 and any(c.margin for c in args.policies):
        print(
            "iqp simulate: note: without --spread jobs take exactly the model's cost, and the -margin "
            "columns add no margin",
            file=sys.stderr,
        )
    noise = Noise(args.spread, args.margin, args.seed)
    experiment = protocol.Experiment(queries, window_end, order, args.alpha, args.tau_max, noise)
    if args.capacity:
        compared = capacity.table(experiment, protocol.DELTAS, args.capacity, btu=args.btu, confidence=args.confidence)
        lines = report.capacity_lines(compared, len(queries), args.btu)
        print("\n".join([*report.setting(experiment, source, f"{args.order} order", files), *lines]))
        return 0
    table = experiment.run(args.policies)
    order_text = f"{args.order} order{f' (seed {args.seed})' if args.order == 'random' else ''}"
    if args.spread:
        order_text += f"; job costs spread {args.spread:g} (seed {args.seed}), margin {args.margin:g}"
    print("\n".join([*report.setting(experiment, source, order_text, files), *report.table_lines(table)]))
    if args.png:
        title = (
            "Multi-query policies on one shared resource (iqp simulate)\n"
            f"{title}; alpha {args.alpha:g}, tau_max {args.tau_max:g} s, deadlines in {order_text}"
        )
        try:
            report.draw(table, title, args.png)
        except OSError as err:
            raise ValueError(f"--png {args.png} cannot be written: {err.strerror or err}") from None
        print(f"wrote {args.png}")
    return 0
