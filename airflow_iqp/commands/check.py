"""`iqp check DAGS_FOLDER`: can every declared query meet its deadlines on the shared resource?

Each DAG file is run as Airflow parses it (no database is touched); every intermittent query it
declares with a fitted cost model and a declared rate is priced per window (`demand`) and the
set goes through the non-preemptive EDF demand test (`planning.admission`) on one resource: the
dispatcher runs one job at a time per resource, and none can be preempted. A query that learns
its cost model is priced by its prior (a packaged query's packaged model), the model its
learning starts from; one with no prior, or that learns its rate, has no price before it has
run, so it is listed and left out.
Exit 0 when every deadline holds, 1 when one fails or a DAG file's declaration is invalid.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_iqp.constants import ExecutionPath
from airflow_iqp.dag_files import declared
from airflow_iqp.declaration import RUNS_ON, ArrivalRate
from airflow_iqp.exceptions import InvalidDeclaration
from airflow_iqp.planning.admission import admit, blocking
from airflow_iqp.planning.capacity import QueryDemand, capacity, describe, residual_spread
from airflow_iqp.planning.cost_model_file import FittedCostModel
from airflow_iqp.runtime.demand import window_demand

if TYPE_CHECKING:
    import argparse

    from airflow_iqp.declaration import CostModel, Declaration
    from airflow_iqp.planning.admission import Admission, QueryAdmission, RecurringQuery


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add `iqp check`."""
    p = subparsers.add_parser(
        "check",
        help="admission: can every declared query of a dags folder meet its deadlines together?",
        description=__doc__,
    )
    p.add_argument("dags_folder", type=Path, metavar="DAGS_FOLDER", help="folder of DAG files")
    p.add_argument(
        "--execution-path",
        choices=[path.value for path in RUNS_ON],
        default=ExecutionPath.SPARK_CONNECT.value,
        help="which fitted model prices the jobs (default spark_connect, as the demo runs)",
    )
    p.add_argument(
        "--capacity",
        action="store_true",
        help="also print the fewest cores per interval of the window cycle for which every deadline holds",
    )
    p.add_argument(
        "--confidence",
        type=float,
        default=0.95,
        help="with --capacity: the probability of meeting every deadline it is sized for (default 0.95)",
    )
    p.set_defaults(func=run)


def capacity_demand(task: RecurringQuery, model: CostModel) -> QueryDemand:
    """The task with its file's residual spread (of its measured partials) and the cores it was
    timed on; a declared rate has no spread.
    """
    if not isinstance(model, FittedCostModel):
        return QueryDemand(task)
    document = json.loads(model.source.read_text())
    section = document["paths"][model.path.value]["partial"]
    entries = [m for m in section.get("measured") or [] if isinstance(m, dict)]
    measured = [(m["tuples"], m["seconds"]) for m in entries if {"tuples", "seconds"} <= m.keys()]
    cpus = (document.get("machine") or {}).get("cpus")
    cores = cpus if isinstance(cpus, int) and cpus >= 1 else 1  # unknown: as timed on one core
    return QueryDemand(task, cost_spread=residual_spread(measured, model.partial), measured_cores=cores)


def declarations(folder: Path) -> tuple[list[Declaration], dict[Path, InvalidDeclaration]]:
    """Every intermittent query the folder's DAG files declare, and the files whose declaration is invalid."""
    if not folder.is_dir():
        raise ValueError(f"DAGS_FOLDER {folder} is not a directory")
    found: list[Declaration] = []
    invalid: dict[Path, InvalidDeclaration] = {}
    for path in sorted(folder.glob("*.py")):
        try:
            found.extend(declared(path).values())
        except InvalidDeclaration as err:
            invalid[path] = err
    return found, invalid


def verdict(result: QueryAdmission, tasks: dict[str, RecurringQuery]) -> str:
    """One query's line: the deadline that fails first and by how much, or the least slack."""
    where = f"+{result.at:g} s{' after close' if result.final else ''}"
    if result.blocked_by is not None:
        where += f", behind {result.blocked_by}'s {tasks[result.blocked_by].longest_job:.1f} s job"
    if result.met:
        return f"holds: {result.slack:.1f} s to spare at {where}"
    return f"MISSES by {-result.slack:.1f} s at {where}"


def report(tasks: list[RecurringQuery], admission: Admission) -> list[str]:
    """The table of queries and the overall answer."""
    by_name = {t.name: t for t in tasks}
    header = ("dag", "window", "due", "work/window", "after close", "longest job", "verdict")
    rows = [
        (
            t.name,
            f"{t.period:g} s",
            f"+{t.deadline - t.period:g} s",
            f"{t.work:.1f} s",
            f"{t.final_work:.1f} s",
            f"{t.longest_job:.1f} s",
            verdict(r, by_name),
        )
        for t, r in zip(tasks, admission.queries)
    ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header) - 1)]
    lines = ["  ".join([*(cell.ljust(w) for cell, w in zip(row[:-1], widths)), row[-1]]) for row in [header, *rows]]
    lines.append(
        "deadlines in seconds after a common start of the windows (after close: of the work that waits "
        "for its window to close, from that close)"
    )
    lines.append(f"utilization {admission.utilization:.3f} of one resource")
    miss = admission.first_miss
    if miss is None:
        lines.append("feasible: every deadline holds under non-preemptive EDF")
    else:
        lines.append(
            f"infeasible: {miss.name}'s deadline fails first, short by {-miss.slack:.1f} s "
            f"(at +{miss.at:g} s{' after close' if miss.final else ''})"
        )
    return lines


def priced(
    found: list[Declaration], path: ExecutionPath, invalid: dict[Path, InvalidDeclaration]
) -> list[tuple[Declaration, ArrivalRate, CostModel]]:
    """The declarations with a fitted model (or a learned one's prior) on `path` and a declared
    rate; the others are listed (one whose model file lacks the path is added to `invalid`).
    """
    from airflow_iqp.runtime.costs import prior_model

    out: list[tuple[Declaration, ArrivalRate, CostModel]] = []
    for declaration in found:
        prior = prior_model(declaration, path) if declaration.learns_cost else None
        if (declaration.learns_cost and prior is None) or not isinstance(declaration.rate, ArrivalRate):
            learns = "arrival rate" if not isinstance(declaration.rate, ArrivalRate) else "cost model without a prior"
            print(f"{declaration.dag_id}: not checked: it learns its {learns}, so it has no price before it runs")
            continue
        if prior is not None:
            out.append((declaration, declaration.rate, prior))
            continue
        try:
            out.append((declaration, declaration.rate, declaration.fitted_model(path)))
        except InvalidDeclaration as err:
            print(f"{declaration.dag_id}: not checked on {path.value}: {err}")
            invalid[Path(declaration.dag_id)] = err
    return out


def run(args: argparse.Namespace) -> int:
    """Print the admission result per query; 1 if a deadline fails or a declaration is invalid.

    Static plans leave room for the longest job another query may hold the resource for, as
    the `plan` task does: each query is priced once alone for its longest job, then again
    planned against its deadline less the others' longest job.
    """
    found, invalid = declarations(args.dags_folder)
    path = ExecutionPath(args.execution_path)
    for file, err in invalid.items():
        print(f"{file.name}: invalid declaration: {err}")
    queries = priced(found, path, invalid)
    if not queries:
        print(f"no query of {args.dags_folder} can be priced on {path.value}: nothing to check")
        return 1 if invalid else 0
    alone = {d.dag_id: window_demand(d, rate, model).longest_job for d, rate, model in queries}
    tasks = [window_demand(d, rate, model, blocking(d.dag_id, alone)[0]) for d, rate, model in queries]
    admission = admit(tasks)
    print(f"{len(tasks)} queries of {args.dags_folder} on one shared resource, priced on {path.value}:")
    print("\n".join(report(tasks, admission)))
    if args.capacity:
        demands = [capacity_demand(t, model) for t, (_, _, model) in zip(tasks, queries)]
        print("\n".join(describe(tasks, capacity(demands, confidence=args.confidence))))
    return 0 if admission.feasible and not invalid else 1
