"""`iqp plan`: plan one window from command-line parameters or a fitted cost-model file."""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_iqp.constants import ExecutionPath
from airflow_iqp.planning import ArrivalCurve, LinearCost, plan_single_query
from airflow_iqp.planning.cost_model_file import PATHS, load_cost_model
from airflow_iqp.planning.single_query import METHODS
from airflow_iqp.planning.table import format_plan

if TYPE_CHECKING:
    import argparse

    from airflow_iqp.planning.cost import CostModel


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `iqp plan`."""
    p = subparsers.add_parser(
        "plan",
        help="plan the batches of one window",
        description="Plan one window: tuples arriving at a fixed rate from --window-start to "
        "--window-end, a result needed by --deadline seconds after the window end.",
    )
    p.add_argument("--tuples", type=int, required=True, help="tuples in the window")
    p.add_argument("--window-start", type=float, default=0.0, help="arrival time of the first tuple (s)")
    p.add_argument("--window-end", type=float, required=True, help="arrival time of the last tuple (s)")
    p.add_argument("--deadline", type=float, required=True, help="seconds after the window end")
    cost = p.add_mutually_exclusive_group(required=True)
    cost.add_argument("--cost-model", help="fitted cost model file (cost_models/<query>.json)")
    cost.add_argument("--per-tuple", type=float, help="linear cost: seconds per tuple")
    p.add_argument("--overhead", type=float, default=0.0, help="linear cost: seconds per batch")
    p.add_argument("--merge-per-partial", type=float, default=0.0, help="linear merge cost: seconds per partial")
    p.add_argument("--merge-overhead", type=float, default=0.0, help="linear merge cost: seconds per merge")
    p.add_argument(
        "--execution-path", choices=PATHS, default=ExecutionPath.SPARK_SUBMIT.value, help="which fitted model to use"
    )
    p.add_argument("--method", choices=METHODS, default=METHODS[0])
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print the plan; exit 1 if the deadline cannot be met."""
    cost: CostModel
    agg: CostModel
    if args.cost_model:
        fitted = load_cost_model(args.cost_model, args.execution_path)
        cost, agg = fitted.partial, fitted.merge
    else:
        cost = LinearCost(args.per_tuple, args.overhead)
        agg = LinearCost(args.merge_per_partial, args.merge_overhead)
    plan = plan_single_query(
        total=args.tuples,
        arrival=ArrivalCurve.fixed_rate(args.window_start, args.window_end, args.tuples),
        window_end=args.window_end,
        deadline=args.window_end + args.deadline,
        cost=cost,
        agg_cost=agg,
        method=args.method,
    )
    print(format_plan(plan))
    return 0 if plan.feasible else 1
