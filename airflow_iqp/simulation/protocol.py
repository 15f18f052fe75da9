"""The paper's multi-query experiment (Section 7.4, Fig. 7), as implemented (docs/simulation.md).

* The stream is 4500 files at one file per second: file i (0-based) is due at i + 1 s under FR;
  other profiles shift the arrivals (VR1-VR4, as `iqp data replay`). The window starts at 1 s
  (the first file's slot) and ends at 4500 s (the last file's slot) for every query.
* Every query is submitted at the window start, with alpha and tau_max for MinBatch.
* Deadlines are staggered: in an order (single-batch cost ascending, or a seeded permutation),
  D_i = D_(i-1) + delta * cost(N_i) from D_0 = we, for delta in 1.0 .. 0.1.
* Columns: EDF, LLF, SJF and RR with MinBatch; edf-trad and llf-trad are the traditional
  baselines without MinBatch, where each pick processes all the tuples that have arrived;
  edf-idle and llf-idle are EDF and LLF with MinBatch and inserted idle time (the resource
  waits for a job of an earlier deadline about to be released that would miss behind the job
  it would otherwise start). All but these two never idle while a job is ready.
  With `--spread S`, jobs take the model's cost times a seeded random factor of mean 1 and
  relative standard deviation S; the `-margin` columns (edf-margin, llf-margin,
  edf-idle-margin, llf-idle-margin, chosen with --policies) estimate every job at
  1 + K*S times the model (--margin K), as a learned model's plans do.
* Cells: deadlines met, and the total cost over the sum of single-batch costs.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from airflow_iqp.constants import Policy
from airflow_iqp.planning.arrival import ArrivalCurve
from airflow_iqp.planning.cost_model_file import load_cost_model
from airflow_iqp.planning.min_batch import min_batch_size
from airflow_iqp.simulation.engine import Noise, SimQuery, SimResult, simulate
from airflow_iqp.tpch.replay import arrival_offset
from airflow_iqp.validation import number, whole_number

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from airflow_iqp.planning.cost import PiecewiseLinearCost

PAPER_FILES = 4500
PAPER_ROWS_PER_FILE = 9300  # "each file consists of around 9300 tuples": orders rows (1.2 MB)
ORDERS_PER_SCALE = 1_500_000  # TPC-H: orders rows per unit of scale factor
PAPER_SCALE = PAPER_FILES * PAPER_ROWS_PER_FILE / ORDERS_PER_SCALE  # 27.9, i.e. the paper's ~25 GB
WINDOW_START, WINDOW_END = 1.0, float(PAPER_FILES)  # FR slots of the first and the last file
DELTAS = (1.0, 0.8, 0.6, 0.4, 0.2, 0.1)
VOLUMES = ("measured", "paper")
ORDERS = ("cost", "random")


@dataclass(frozen=True)
class Column:
    """One column of the table: a policy, with MinBatch or as the traditional baseline, idling
    or not.
    """

    name: str
    policy: Policy
    min_batch: bool
    idle: bool = False
    margin: bool = False  # estimates jobs with the margin (Experiment.noise)


COLUMNS = (
    Column("edf", Policy.EDF, True),
    Column("llf", Policy.LLF, True),
    Column("sjf", Policy.SJF, True),
    Column("rr", Policy.RR, True),
    Column("edf-trad", Policy.EDF, False),
    Column("llf-trad", Policy.LLF, False),
    Column("edf-idle", Policy.EDF, True, idle=True),
    Column("llf-idle", Policy.LLF, True, idle=True),
)
# Not run by default: with the model's costs exact (no --spread) they equal their columns above.
MARGIN_COLUMNS = (
    Column("edf-margin", Policy.EDF, True, margin=True),
    Column("llf-margin", Policy.LLF, True, margin=True),
    Column("edf-idle-margin", Policy.EDF, True, idle=True, margin=True),
    Column("llf-idle-margin", Policy.LLF, True, idle=True, margin=True),
)


@dataclass(frozen=True)
class Volume:
    """How a query's window was sized: the model's measured stream and the simulated one."""

    query: str
    model_scale: float
    measured_rows: int
    scale: float
    rows: int


def _measured(document: object, file: Path, path: str, fitted: PiecewiseLinearCost) -> tuple[float, int]:
    """The model's TPC-H scale and its largest measured batch (rows), checked."""
    scale = document.get("scale") if isinstance(document, dict) else None
    try:
        model_scale = number(scale, "scale", above=0)
    except ValueError:
        raise ValueError(
            f"cost model {file}: scale must be the TPC-H scale factor it was measured at (> 0), got {scale!r}"
        ) from None
    measured = document["paths"][path]["partial"].get("measured") if isinstance(document, dict) else None
    if measured is None:  # a hand-written model: its fitted range is what is known
        return model_scale, int(fitted.points[-1][0])
    where = f"cost model {file} paths.{path}.partial.measured"
    if not isinstance(measured, list) or not measured:
        raise ValueError(f"{where} must be a non-empty list of {{'tuples', 'seconds'}} objects")
    sizes = [
        whole_number(entry.get("tuples") if isinstance(entry, dict) else None, f"{where}[{i}].tuples", minimum=1)
        for i, entry in enumerate(measured)
    ]
    return model_scale, max(sizes)


def paper_workload(
    directory: Path, path: str, profile: str, volume: str | float = "measured"
) -> tuple[list[SimQuery], float, list[Volume]]:
    """The queries of every cost model in `directory` over the paper's 4500-file stream.

    `volume` sets the rows of each window (the models count rows of the streams a query reads,
    so orders-only, lineitem-only and join queries differ): `measured` is each model's largest
    measured batch (interpolated only), `paper` the paper's stream (TPC-H scale 27.9,
    extrapolated), a number that TPC-H scale factor.
    """
    if isinstance(volume, str) and volume not in VOLUMES:
        raise ValueError(f"--volume must be one of {', '.join(VOLUMES)} or a TPC-H scale factor, got {volume!r}")
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
                f"--volume {volume} leaves query {model.query} without a row "
                f"({measured_rows} rows at scale {model_scale:g})"
            )
        # Rows spread evenly over the files; a file's rows all land at its slot.
        arrival = ArrivalCurve.from_points((t, rows * (i + 1) // PAPER_FILES) for i, t in enumerate(slots))
        queries.append(
            SimQuery(model.query, rows, arrival, WINDOW_END, WINDOW_END, model.partial, model.merge, WINDOW_START)
        )
        volumes.append(Volume(model.query, model_scale, measured_rows, scale, rows))
    return queries, WINDOW_END, volumes


def deadline_order(queries: Sequence[SimQuery], order: str = "cost", seed: int = 0) -> list[str]:
    """Names in the order deadlines are staggered: single-batch cost ascending, or seeded random
    (the paper picks the first query at random).
    """
    by_cost = [q.name for q in sorted(queries, key=lambda q: (q.cost.cost(q.tuples), q.name))]
    if order == "cost":
        return by_cost
    if order == "random":
        shuffled = sorted(by_cost)
        random.Random(seed).shuffle(shuffled)
        return shuffled
    raise ValueError(f"--order must be one of {', '.join(ORDERS)}, got {order!r}")


def staggered(
    queries: Sequence[SimQuery], window_end: float, delta: float, order: Sequence[str] | None = None
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


@dataclass(frozen=True)
class Experiment:
    """One run of the protocol: the queries, their deadline order and MinBatch's parameters."""

    queries: list[SimQuery]
    window_end: float
    order: list[str]  # deadlines are staggered in this order
    alpha: float
    tau_max: float
    noise: Noise = Noise()  # how jobs stray from the model, and the margin of the -margin columns

    def __post_init__(self) -> None:
        for q in self.queries:
            if q.cost.cost(1) > self.tau_max:
                raise ValueError(
                    f"--tau-max {self.tau_max:g} s is below the cost of one tuple of query {q.name!r} "
                    f"({q.cost.cost(1):g} s): no batch of it would fit"
                )

    @property
    def single_batch_cost(self) -> float:
        """Sum of cost(N) over the queries: the work of one batch each."""
        return sum(q.cost.cost(q.tuples) for q in self.queries)

    def workload(self, delta: float) -> list[SimQuery]:
        """The queries with their deadlines staggered by `delta`."""
        return staggered(self.queries, self.window_end, delta, self.order)

    def run(self, columns: Sequence[Column], deltas: Sequence[float] = DELTAS) -> Table:
        """Simulate every column at every delta."""
        rows = {}
        for delta in deltas:
            queries = self.workload(delta)
            rows[delta] = [
                simulate(
                    queries,
                    policy=c.policy,
                    alpha=self.alpha,
                    tau_max=self.tau_max,
                    min_batch=c.min_batch,
                    idle=c.idle,
                    noise=self.noise if c.margin else replace(self.noise, margin=0.0),
                )
                for c in columns
            ]
        return Table(tuple(columns), rows, len(self.queries), self.alpha)


@dataclass(frozen=True)
class Table:
    """Fig. 7 as numbers: one result per column for each delta."""

    columns: tuple[Column, ...]
    rows: dict[float, list[SimResult]]
    queries: int
    alpha: float  # MinBatch's allowance: its policies cost at most 1 + alpha


def min_batch_summary(queries: Sequence[SimQuery], alpha: float, tau_max: float, files: int | None) -> str:
    """MinBatch per query, in files of the stream if `files` is given (the paper's: 180 to 1125
    files, 25 to 4 batches), in tuples otherwise; queries of unknown total are left out.
    """
    parts = []
    for q in sorted(queries, key=lambda q: q.name):
        if q.total is None:
            continue
        mb = min_batch_size(total=q.total, cost=q.cost, agg_cost=q.agg_cost, alpha=alpha, tau_max=tau_max)
        size = f"{mb.size * files / q.total:.0f}f" if files else f"{mb.size}t"
        parts.append(f"{q.name} {size}/{mb.batches(q.total)}b{'' if mb.alpha_met else '!'}")
    unit = "files" if files else "tuples"
    return f"MinBatch ({unit}/batches; ! = alpha not reachable within tau_max): " + ", ".join(parts)
