"""`iqp simulate`: the paper's multi-query experiment (Fig. 7) on the simulated shared resource.

By default the 13 queries come from the fitted cost models (tuples = rows) over the paper's
stream: 4500 files of 9300 rows, one file per second, arriving per `--profile`, one window
ending at 4500 s. Queries are sorted by single-batch cost and get staggered deadlines
D_i = we + delta * (sum of cost(N_j) for j <= i), for delta in 1.0 .. 0.1.

`--workload FILE.json` lists the queries instead (deadlines are still staggered by delta):

    {
      "window_end": 100,                      # seconds, shared by every query
      "queries": [
        {
          "name": "q1",
          "cost": {"points": [[tuples, seconds], ...]} | {"per_tuple": s, "overhead": s},
          "merge": same forms as "cost" (optional: merges are free),
          "arrival": {"points": [[time, cumulative tuples], ...]} | {"start": s, "end": s, "total": n},
          "total": n,                         # optional: the arrival's tuples
          "submit_at": s                      # optional: the first arrival
        }
      ]
    }
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from airflow_iqp.data.replay import PROFILES, arrival_offset
from airflow_iqp.dynamic.chart import bar_chart
from airflow_iqp.planning.arrival import ArrivalCurve
from airflow_iqp.planning.cost import LinearCost, PiecewiseLinearCost
from airflow_iqp.planning.cost_model_file import PATHS, load_cost_model
from airflow_iqp.simulate import SimQuery, SimResult, simulate

PAPER_FILES, ROWS_PER_FILE, WINDOW_END = 4500, 9300, 4500.0
DELTAS = (1.0, 0.8, 0.6, 0.4, 0.2, 0.1)
# (column, policy, MinBatch on)
MODES = (
    ("edf", "edf", True),
    ("llf", "llf", True),
    ("sjf", "sjf", True),
    ("rr", "rr", True),
    ("edf-trad", "edf", False),
    ("llf-trad", "llf", False),
)


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "simulate",
        help="compare multi-query policies on a simulated shared resource (Fig. 7)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--cost-models", type=Path, default=Path("cost_models"), help="directory of fitted cost models")
    p.add_argument("--workload", type=Path, help="JSON file listing the queries instead (schema above)")
    p.add_argument("--profile", choices=PROFILES, default="FR", help="arrival profile of the paper's stream")
    p.add_argument("--alpha", type=float, default=0.5, help="MinBatch cost allowance over one batch")
    p.add_argument("--tau-max", type=float, default=30.0, help="longest a batch may block the resource (s)")
    # in_process by default: one shared session is the paper's one-batch-at-a-time cluster, and
    # the spark_submit start-up alone exceeds the paper's tau_max of 30 s for most queries.
    p.add_argument("--path", choices=PATHS, default="in_process", help="which fitted model to use")
    p.add_argument("--png", type=Path, help="also draw the table as a bar chart")
    p.set_defaults(func=run)


def _paper_queries(directory: Path, path: str, profile: str) -> tuple[list[SimQuery], float]:
    files = sorted(directory.glob("*.json"))
    if not files:
        raise ValueError(f"--cost-models {directory} holds no cost model (*.json)")
    points = [(1.0 + arrival_offset(profile, i, PAPER_FILES), ROWS_PER_FILE * (i + 1)) for i in range(PAPER_FILES)]
    arrival = ArrivalCurve.from_points(points)
    queries = []
    for file in files:
        model = load_cost_model(file, path)
        queries.append(SimQuery(model.query, arrival.total, arrival, WINDOW_END, WINDOW_END, model.partial, model.merge))
    return queries, WINDOW_END


def _field(entry: dict[str, Any], key: str, where: str) -> Any:
    if key not in entry:
        raise ValueError(f"{where}.{key} is missing")
    return entry[key]


def _cost(section: Any, where: str) -> LinearCost | PiecewiseLinearCost:
    if not isinstance(section, dict):
        raise ValueError(f"{where} must be an object with 'points' or 'per_tuple'")
    try:
        if "points" in section:
            return PiecewiseLinearCost(section["points"])
        return LinearCost(_field(section, "per_tuple", where), section.get("overhead", 0.0))
    except (TypeError, ValueError) as err:
        raise ValueError(f"{where}: {err}") from None


def _arrival(section: Any, where: str) -> ArrivalCurve:
    if not isinstance(section, dict):
        raise ValueError(f"{where} must be an object with 'points' or 'start', 'end' and 'total'")
    try:
        if "points" in section:
            return ArrivalCurve.from_points(section["points"])
        return ArrivalCurve.fixed_rate(*(_field(section, k, where) for k in ("start", "end", "total")))
    except (TypeError, ValueError) as err:
        raise ValueError(f"{where}: {err}") from None


def _workload_queries(file: Path) -> tuple[list[SimQuery], float]:
    try:
        document = json.loads(file.read_text())
    except FileNotFoundError:
        raise ValueError(f"workload {file} does not exist") from None
    except json.JSONDecodeError as err:
        raise ValueError(f"workload {file} is not valid JSON: {err}") from None
    if not isinstance(document, dict):
        raise ValueError(f"workload {file} must be a JSON object")
    window_end = _field(document, "window_end", "workload")
    if isinstance(window_end, bool) or not isinstance(window_end, int | float):
        raise ValueError(f"workload.window_end must be a number of seconds, got {window_end!r}")
    entries = _field(document, "queries", "workload")
    if not isinstance(entries, list) or not entries:
        raise ValueError("workload.queries must be a non-empty list")
    queries = []
    for i, entry in enumerate(entries):
        where = f"workload.queries[{i}]"
        if not isinstance(entry, dict):
            raise ValueError(f"{where} must be an object")
        arrival = _arrival(_field(entry, "arrival", where), f"{where}.arrival")
        queries.append(
            SimQuery(
                name=_field(entry, "name", where),
                total=entry.get("total", arrival.total),
                arrival=arrival,
                window_end=float(window_end),
                deadline=float(window_end),
                cost=_cost(_field(entry, "cost", where), f"{where}.cost"),
                agg_cost=_cost(entry["merge"], f"{where}.merge") if "merge" in entry else None,
                submit_at=entry.get("submit_at"),
            )
        )
    return queries, float(window_end)


def staggered(queries: list[SimQuery], window_end: float, delta: float) -> list[SimQuery]:
    """Sorted by single-batch cost, D_i = we + delta * (sum of cost(N_j), j <= i): Section 7.4 (reading)."""
    ordered = sorted(queries, key=lambda q: (q.cost.cost(q.tuples), q.name))
    out, running = [], 0.0
    for q in ordered:
        running += q.cost.cost(q.tuples)
        out.append(SimQuery(q.name, q.total, q.arrival, q.window_end, window_end + delta * running, q.cost, q.agg_cost, q.submit_at))
    return out


def run(args: argparse.Namespace) -> int:
    if args.workload:
        queries, window_end = _workload_queries(args.workload)
    else:
        queries, window_end = _paper_queries(args.cost_models, args.path, args.profile)
    results: dict[float, list[SimResult]] = {}
    for delta in DELTAS:
        workload = staggered(queries, window_end, delta)
        results[delta] = [
            simulate(workload, policy=policy, alpha=args.alpha, tau_max=args.tau_max, min_batch=on)
            for _, policy, on in MODES
        ]
    last = staggered(queries, window_end, DELTAS[-1])
    print(f"{len(queries)} queries, alpha {args.alpha:g}, tau_max {args.tau_max:g} s, window end {window_end:g} s")
    work = sum(q.cost.cost(q.tuples) for q in queries)
    print(f"sum of single-batch costs {work:.1f} s ({work / window_end:.2f}x the window); "
          f"largest deadline at delta {DELTAS[-1]}: {max(q.deadline for q in last):.1f} s")
    print("cells: deadlines met / queries, normalized cost (total over the sum of single-batch costs)")
    print(f"{'delta':>6}" + "".join(f"{name:>16}" for name, _, _ in MODES))
    for delta, row in results.items():
        cells = "".join(f"{f'{r.met_count}/{len(r.outcomes)} {r.normalized_cost:.2f}x':>16}" for r in row)
        print(f"{delta:>6.1f}{cells}")
    if args.png:
        n = len(queries)
        bar_chart(
            args.png,
            [
                [[r.met_count / n for r in row] for row in results.values()],
                [[r.normalized_cost for r in row] for row in results.values()],
            ],
            tops=[1.0, None],
        )
        print(f"wrote {args.png}: top deadlines met, bottom normalized cost; one group per delta, "
              f"bars in column order {', '.join(name for name, _, _ in MODES)}")
    return 0
