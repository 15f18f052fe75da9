"""`iqp simulate`: the paper's multi-query experiment (Section 7.4, Fig. 7) on a simulated shared
resource that runs one batch at a time.

The paper's protocol, as implemented (docs/simulation.md discusses it):
  * The stream is 4500 files at one file per second: file i (0-based) is due at i + 1 s under
    FR; --profile shifts the arrivals (VR1-VR4, as `iqp data replay`). The window starts at
    1 s (the first file's slot) and ends at 4500 s (the last file's slot) for every query.
  * Every query is submitted at the window start, with alpha and tau_max for MinBatch.
  * Deadlines are staggered: in --order (single-batch cost ascending by default),
    D_1 = we + delta * cost(N_1) and D_i = D_(i-1) + delta * cost(N_i), i.e.
    D_i = we + delta * (sum of cost(N_j) for j <= i), for delta in 1.0 .. 0.1.
  * Columns: EDF, LLF, SJF and RR with MinBatch; edf-trad and llf-trad are the traditional
    baselines without MinBatch, where each pick processes all the files that have arrived.
  * Cells: deadlines met / queries, and the total cost over the sum of single-batch costs.

--volume sets how many rows a window holds for each query (the cost models' unit is rows of
the streams a query reads, so orders-only, lineitem-only and join queries differ):
  measured  each model's largest measured batch (its whole stream at the model's `scale`):
            the models are then only interpolated, never extrapolated upwards.
  paper     the paper's stream: 4500 files of about 9300 orders rows (TPC-H scale 27.9);
            every model is extrapolated along its last fitted segment.
  SF        a TPC-H scale factor > 0: rows = measured rows * SF / the model's scale.

`--workload FILE.json` lists the queries instead (deadlines are still staggered by delta;
--volume, --profile and --path do not apply):

    {
      "window_end": 100,                      # seconds >= 0, shared by every query
      "queries": [
        {
          "name": "q1",
          "cost": {"points": [[tuples, seconds], ...]} | {"per_tuple": s, "overhead": s},
          "merge": same forms as "cost" (optional: merges are free),
          "arrival": {"points": [[time, cumulative tuples], ...]} | {"start": s, "end": s, "total": n},
          "total": n | null,                  # optional: the arrival's tuples; null = unknown
          "submit_at": s                      # optional: the first arrival
        }
      ]
    }
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airflow_iqp.data.replay import PROFILES, arrival_offset
from airflow_iqp.dynamic.chart import bar_chart
from airflow_iqp.planning.arrival import ArrivalCurve
from airflow_iqp.planning.cost import LinearCost, PiecewiseLinearCost
from airflow_iqp.planning.cost_model_file import PATHS, load_cost_model
from airflow_iqp.planning.min_batch import min_batch_size
from airflow_iqp.simulation import SimQuery, SimResult, simulate

PAPER_FILES = 4500
PAPER_ROWS_PER_FILE = 9300  # "each file consists of around 9300 tuples": orders rows (1.2 MB)
ORDERS_PER_SCALE = 1_500_000  # TPC-H: orders rows per unit of scale factor
PAPER_SCALE = PAPER_FILES * PAPER_ROWS_PER_FILE / ORDERS_PER_SCALE  # 27.9, i.e. the paper's ~25 GB
WINDOW_START, WINDOW_END = 1.0, float(PAPER_FILES)  # FR slots of the first and the last file
ROWS_PER_FILE = PAPER_ROWS_PER_FILE  # kept for importers of the old name
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
VOLUMES = ("measured", "paper")


def volume_arg(text: str) -> str | float:
    """--volume: 'measured', 'paper' or a TPC-H scale factor > 0."""
    if text in VOLUMES:
        return text
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(
            f"must be 'measured', 'paper' or a TPC-H scale factor > 0 (e.g. 0.1), got {text!r}"
        )
    return value


def positive_arg(text: str) -> float:
    """--alpha and --tau-max: a finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text!r}")
    return value


def policies_arg(text: str) -> tuple[str, ...]:
    """--policies: a comma-separated subset of the table's columns."""
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    known = [name for name, _, _ in MODES]
    unknown = [name for name in names if name not in known]
    if not names:
        raise argparse.ArgumentTypeError(f"must list at least one of {', '.join(known)}, got {text!r}")
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown policy {unknown[0]!r}; choose a comma-separated list of {', '.join(known)}"
        )
    if len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"lists a policy twice: {text!r}")
    return names


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "simulate",
        help="compare multi-query policies on a simulated shared resource (Fig. 7)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--cost-models", type=Path, default=Path("cost_models"), help="directory of fitted cost models")
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
        choices=("cost", "random"),
        default="cost",
        help="order in which deadlines are staggered: single-batch cost ascending (default) or a "
        "random permutation drawn with --seed (the paper picks the first query at random)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of --order random")
    p.add_argument(
        "--policies",
        type=policies_arg,
        default=tuple(name for name, _, _ in MODES),
        help="comma-separated columns to run (default all: edf,llf,sjf,rr,edf-trad,llf-trad)",
    )
    p.add_argument("--png", type=Path, help="also draw the table as a bar chart")
    p.set_defaults(func=run)


# --- the paper's 13 queries from the fitted cost models -------------------------------------


@dataclass(frozen=True)
class Volume:
    """How a query's window was sized: the model's measured stream and the simulated one."""

    query: str
    model_scale: float
    measured_rows: int
    scale: float
    rows: int


def _measured(document: Any, file: Path, path: str, fitted: PiecewiseLinearCost) -> tuple[float, int]:
    """The model's TPC-H scale and its largest measured batch (rows), checked."""
    scale = document.get("scale")
    if isinstance(scale, bool) or not isinstance(scale, int | float) or not math.isfinite(scale) or scale <= 0:
        raise ValueError(
            f"cost model {file}: scale must be the TPC-H scale factor it was measured at (> 0), got {scale!r}"
        )
    measured = document["paths"][path]["partial"].get("measured")
    if measured is None:  # a hand-written model: its fitted range is what is known
        return float(scale), int(fitted.points[-1][0])
    where = f"cost model {file} paths.{path}.partial.measured"
    if not isinstance(measured, list) or not measured:
        raise ValueError(f"{where} must be a non-empty list of {{'tuples', 'seconds'}} objects")
    sizes = []
    for i, entry in enumerate(measured):
        tuples = entry.get("tuples") if isinstance(entry, dict) else None
        if isinstance(tuples, bool) or not isinstance(tuples, int) or tuples < 1:
            raise ValueError(f"{where}[{i}].tuples must be a whole number >= 1, got {tuples!r}")
        sizes.append(tuples)
    return float(scale), max(sizes)


def _paper_queries(
    directory: Path, path: str, profile: str, volume: str | float = "measured"
) -> tuple[list[SimQuery], float]:
    queries, window_end, _ = paper_workload(directory, path, profile, volume)
    return queries, window_end


def paper_workload(
    directory: Path, path: str, profile: str, volume: str | float = "measured"
) -> tuple[list[SimQuery], float, list[Volume]]:
    """The 13 queries over the paper's 4500-file stream, each window sized by `volume`."""
    files = sorted(directory.glob("*.json"))
    if not files:
        raise ValueError(f"--cost-models {directory} holds no cost model (*.json)")
    slots = [WINDOW_START + arrival_offset(profile, i, PAPER_FILES) for i in range(PAPER_FILES)]
    queries, volumes = [], []
    for file in files:
        model = load_cost_model(file, path)  # validates the JSON and the fitted models
        model_scale, measured_rows = _measured(json.loads(file.read_text()), file, path, model.partial)
        scale = model_scale if volume == "measured" else PAPER_SCALE if volume == "paper" else float(volume)
        rows = round(measured_rows * scale / model_scale)
        if rows < 1:
            raise ValueError(
                f"--volume {volume} leaves query {model.query} without a row ({measured_rows} rows at scale {model_scale:g})"
            )
        # Rows spread evenly over the files; a file's rows all land at its slot.
        arrival = ArrivalCurve.from_points((t, rows * (i + 1) // PAPER_FILES) for i, t in enumerate(slots))
        queries.append(
            SimQuery(model.query, rows, arrival, WINDOW_END, WINDOW_END, model.partial, model.merge, WINDOW_START)
        )
        volumes.append(Volume(model.query, model_scale, measured_rows, scale, rows))
    return queries, WINDOW_END, volumes


# --- a workload file ------------------------------------------------------------------------

QUERY_FIELDS = ("name", "cost", "merge", "arrival", "total", "submit_at")


def _field(entry: dict[str, Any], key: str, where: str) -> Any:
    if key not in entry:
        raise ValueError(f"{where}.{key} is missing")
    return entry[key]


def _number(value: Any, where: str, *, minimum: float | None = 0.0) -> float:
    """A finite JSON number (not a bool or a string), at least `minimum`."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{where} must be a finite number, got {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{where} must be >= {minimum:g}, got {value!r}")
    return float(value)


def _whole(value: Any, where: str, minimum: int) -> int:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not float(value).is_integer()
        or value < minimum
    ):
        raise ValueError(f"{where} must be a whole number >= {minimum}, got {value!r}")
    return int(value)


def _pairs(section: dict[str, Any], where: str) -> list[list[Any]]:
    points = section["points"]
    if not isinstance(points, list) or not points:
        raise ValueError(f"{where}.points must be a non-empty list of pairs, got {points!r}")
    for i, point in enumerate(points):
        if not isinstance(point, list) or len(point) != 2:
            raise ValueError(f"{where}.points[{i}] must be a pair [x, y], got {point!r}")
    return points


def _unknown_keys(section: dict[str, Any], allowed: tuple[str, ...], where: str) -> None:
    for key in section:
        if key not in allowed:
            raise ValueError(f"{where} has an unknown field {key!r} (expected {', '.join(allowed)})")


def _cost(section: Any, where: str) -> LinearCost | PiecewiseLinearCost:
    if not isinstance(section, dict):
        raise ValueError(f"{where} must be an object with 'points' or 'per_tuple'")
    try:
        if "points" in section:
            _unknown_keys(section, ("points",), where)
            points = _pairs(section, where)
            for i, (tuples, seconds) in enumerate(points):
                _number(tuples, f"{where}.points[{i}] tuples")
                _number(seconds, f"{where}.points[{i}] seconds")
            return PiecewiseLinearCost(points)
        _unknown_keys(section, ("per_tuple", "overhead"), where)
        return LinearCost(
            _number(_field(section, "per_tuple", where), f"{where}.per_tuple"),
            _number(section.get("overhead", 0.0), f"{where}.overhead"),
        )
    except (TypeError, ValueError) as err:
        message = str(err)
        raise ValueError(message if message.startswith(where) else f"{where}: {message}") from None


def _arrival(section: Any, where: str) -> ArrivalCurve:
    if not isinstance(section, dict):
        raise ValueError(f"{where} must be an object with 'points' or 'start', 'end' and 'total'")
    try:
        if "points" in section:
            _unknown_keys(section, ("points",), where)
            points = _pairs(section, where)
            for i, (t, count) in enumerate(points):
                _number(t, f"{where}.points[{i}] time")
                _whole(count, f"{where}.points[{i}] cumulative tuples", 0)
            curve: ArrivalCurve = ArrivalCurve.from_points(points)
        else:
            _unknown_keys(section, ("start", "end", "total"), where)
            start = _number(_field(section, "start", where), f"{where}.start")
            end = _number(_field(section, "end", where), f"{where}.end")
            total = _whole(_field(section, "total", where), f"{where}.total", 1)
            curve = ArrivalCurve.fixed_rate(start, end, total)
    except (TypeError, ValueError) as err:
        message = str(err)
        raise ValueError(message if message.startswith(where) else f"{where}: {message}") from None
    if curve.total < 1:
        raise ValueError(f"{where} must deliver at least one tuple")
    return curve


def _workload_queries(file: Path) -> tuple[list[SimQuery], float]:
    try:
        document = json.loads(file.read_text())
    except FileNotFoundError:
        raise ValueError(f"--workload {file} does not exist") from None
    except OSError as err:
        raise ValueError(f"--workload {file} cannot be read: {err.strerror or err}") from None
    except UnicodeDecodeError as err:
        raise ValueError(f"--workload {file} is not UTF-8 text: {err}") from None
    except json.JSONDecodeError as err:
        raise ValueError(f"--workload {file} is not valid JSON: {err}") from None
    if not isinstance(document, dict):
        raise ValueError(f"--workload {file} must hold a JSON object with window_end and queries")
    _unknown_keys(document, ("window_end", "queries"), "workload")
    raw_end = _field(document, "window_end", "workload")
    if isinstance(raw_end, bool) or not isinstance(raw_end, int | float):
        raise ValueError(f"workload.window_end must be a number of seconds, got {raw_end!r}")
    window_end = _number(raw_end, "workload.window_end")
    entries = _field(document, "queries", "workload")
    if not isinstance(entries, list) or not entries:
        raise ValueError("workload.queries must be a non-empty list")
    queries: list[SimQuery] = []
    seen: dict[str, int] = {}
    for i, entry in enumerate(entries):
        where = f"workload.queries[{i}]"
        if not isinstance(entry, dict):
            raise ValueError(f"{where} must be an object")
        _unknown_keys(entry, QUERY_FIELDS, where)
        name = _field(entry, "name", where)
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"{where}.name must be a non-empty string, got {name!r}")
        if name in seen:
            raise ValueError(f"{where}.name {name!r} is already the name of queries[{seen[name]}]")
        seen[name] = i
        arrival = _arrival(_field(entry, "arrival", where), f"{where}.arrival")
        total = entry.get("total", arrival.total)
        if total is not None:
            total = _whole(total, f"{where}.total", 1)
            if total > arrival.total:
                raise ValueError(f"{where}.total ({total}) exceeds the {arrival.total} tuples of its arrival")
        submit_at = entry.get("submit_at")
        if submit_at is not None:
            submit_at = _number(submit_at, f"{where}.submit_at")
        queries.append(
            SimQuery(
                name=name,
                total=total,
                arrival=arrival,
                window_end=window_end,
                deadline=window_end,
                cost=_cost(_field(entry, "cost", where), f"{where}.cost"),
                agg_cost=_cost(entry["merge"], f"{where}.merge") if "merge" in entry else None,
                submit_at=submit_at,
            )
        )
    return queries, window_end


# --- the protocol ---------------------------------------------------------------------------


def deadline_order(queries: list[SimQuery], order: str = "cost", seed: int = 0) -> list[str]:
    """Names in the order deadlines are staggered: single-batch cost ascending, or seeded random."""
    by_cost = [q.name for q in sorted(queries, key=lambda q: (q.cost.cost(q.tuples), q.name))]
    if order == "cost":
        return by_cost
    if order == "random":
        shuffled = sorted(by_cost)
        random.Random(seed).shuffle(shuffled)
        return shuffled
    raise ValueError(f"--order must be cost or random, got {order!r}")


def staggered(
    queries: list[SimQuery], window_end: float, delta: float, order: list[str] | None = None
) -> list[SimQuery]:
    """D_i = D_(i-1) + delta * cost(N_i) from D_0 = we, i.e. we + delta * (sum of cost(N_j), j <= i),
    in `order` (default: single-batch cost ascending): Section 7.4 (reading).

    Accumulating deadline by deadline, as a back-to-back schedule accumulates finish times,
    keeps a schedule that meets a deadline exactly from missing it by a rounding error.
    """
    by_name = {q.name: q for q in queries}
    names = deadline_order(queries) if order is None else order
    if sorted(names) != sorted(by_name):
        raise ValueError("order must name every query exactly once")
    out, deadline = [], float(window_end)
    for name in names:
        q = by_name[name]
        deadline += delta * q.cost.cost(q.tuples)
        out.append(SimQuery(q.name, q.total, q.arrival, q.window_end, deadline, q.cost, q.agg_cost, q.submit_at))
    return out


def _check_tau_max(queries: list[SimQuery], tau_max: float) -> None:
    for q in queries:
        if q.cost.cost(1) > tau_max:
            raise ValueError(
                f"--tau-max {tau_max:g} s is below the cost of one tuple of query {q.name!r} ({q.cost.cost(1):g} s): "
                "no batch of it would fit"
            )


def _min_batch_summary(queries: list[SimQuery], alpha: float, tau_max: float, files: int | None) -> str:
    """MinBatch per query, in files of the stream (paper: 180 to 1125 files, 25 to 4 batches)."""
    parts = []
    for q in sorted(queries, key=lambda q: q.name):
        if q.total is None:
            continue
        mb = min_batch_size(total=q.total, cost=q.cost, agg_cost=q.agg_cost, alpha=alpha, tau_max=tau_max)
        size = f"{mb.size * files / q.total:.0f}f" if files else f"{mb.size}t"
        parts.append(f"{q.name} {size}/{mb.batches(q.total)}b{'' if mb.alpha_met else '!'}")
    unit = "files" if files else "tuples"
    return f"MinBatch ({unit}/batches; ! = alpha not reachable within tau_max): " + ", ".join(parts)


def run(args: argparse.Namespace) -> int:
    if args.workload:
        for option in ("volume", "profile", "path"):
            if getattr(args, option) is not None:
                print(
                    f"iqp simulate: note: --{option} applies to the fitted cost models, not to --workload; ignored",
                    file=sys.stderr,
                )
        queries, window_end = _workload_queries(args.workload)
        volumes: list[Volume] = []
        source = f"workload {args.workload}"
        files = None
    else:
        volume = "measured" if args.volume is None else args.volume
        profile = args.profile or "FR"
        path = args.path or "in_process"
        queries, window_end, volumes = paper_workload(args.cost_models, path, profile, volume)
        scales = sorted({v.scale for v in volumes})
        rows = sorted(v.rows for v in volumes)
        source = (
            f"{PAPER_FILES} files at 1 file/s, profile {profile}, path {path}, volume {volume} "
            f"(TPC-H scale {', '.join(f'{s:g}' for s in scales)}: {rows[0]}..{rows[-1]} rows per query; "
            f"models measured up to {max(v.measured_rows for v in volumes)} rows at scale "
            f"{', '.join(sorted({f'{v.model_scale:g}' for v in volumes}))})"
        )
        files = PAPER_FILES
    _check_tau_max(queries, args.tau_max)
    modes = [m for m in MODES if m[0] in args.policies]
    order = deadline_order(queries, args.order, args.seed)
    results: dict[float, list[SimResult]] = {}
    for delta in DELTAS:
        workload = staggered(queries, window_end, delta, order)
        results[delta] = [
            simulate(workload, policy=policy, alpha=args.alpha, tau_max=args.tau_max, min_batch=on)
            for _, policy, on in modes
        ]
    last = staggered(queries, window_end, DELTAS[-1], order)
    print(f"{len(queries)} queries from {source}")
    print(
        f"alpha {args.alpha:g}, tau_max {args.tau_max:g} s, window end {window_end:g} s, "
        f"deadlines staggered in {args.order} order{f' (seed {args.seed})' if args.order == 'random' else ''}: "
        f"{' < '.join(order)}"
    )
    work = sum(q.cost.cost(q.tuples) for q in queries)
    print(
        f"sum of single-batch costs {work:.1f} s ({work / window_end:.3f}x the window); "
        f"largest deadline at delta {DELTAS[-1]}: {max(q.deadline for q in last):.1f} s"
    )
    print(_min_batch_summary(queries, args.alpha, args.tau_max, files))
    print("cells: deadlines met / queries, normalized cost (total over the sum of single-batch costs)")
    print(f"{'delta':>6}" + "".join(f"{name:>16}" for name, _, _ in modes))
    for delta, row in results.items():
        cells = "".join(f"{f'{r.met_count}/{len(r.outcomes)} {r.normalized_cost:.2f}x':>16}" for r in row)
        print(f"{delta:>6.1f}{cells}")
    if args.png:
        n = len(queries)
        try:
            bar_chart(
                args.png,
                [
                    [[r.met_count / n for r in row] for row in results.values()],
                    [[r.normalized_cost for r in row] for row in results.values()],
                ],
                tops=[1.0, None],
            )
        except OSError as err:
            raise ValueError(f"--png {args.png} cannot be written: {err.strerror or err}") from None
        print(
            f"wrote {args.png}: top deadlines met, bottom normalized cost; one group per delta, "
            f"bars in column order {', '.join(name for name, _, _ in modes)}"
        )
    return 0
