"""Capacity: the fewest cores for which the admission test holds, per phase of the window cycle.

A job runs on every core the resource holds when it is granted (the dispatcher still runs one
job at a time, none preempted), and takes its one-core time divided by the speedup at that
many cores (`Speedup`: measured points, `fit_speedup` from jobs timed at several core counts,
or a labelled default until measured; never assumed linear). The admission test
(`planning.admission`) then decides a core count the same way it decides one resource: scale
every job, test.

The cycle has two phases, because a window's work is not due at one time:

* **open**: while a window is open only its early work runs (batches of the input that has
  landed), and it is planned to be done by the window's close;
* **closed**: once a window closes, its final work (last batch and merge) is due by its
  deadline, while the next window's early work runs beside it.

`open` is the smallest capacity for which the early work alone passes the test with every
window's close as its deadline; `closed` the smallest for which that early work and every final
work pass it together. The phases are tested apart (the early work is taken as done by the
close, the final work as released there), which is what lets the capacity fall between
closes; the larger of the two is the peak, what fixed provisioning needs all the time.

Capacity is chosen for a probability of meeting every deadline (`confidence`), not for the
means: each query's window work is drawn many times (seeded) with lognormal factors of mean 1
and the query's relative spreads (its cost model's residuals, its arrival rate), each draw gets
its smallest capacity, and the answer is the quantile of those over the draws. Admission holds
at that capacity in at least that share of the draws (the open and closed phases each at
1 - (1 - confidence) / 2, so that both hold together at least `confidence`, by the union bound).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from airflow_iqp.planning.admission import Admission, RecurringQuery, admit
from airflow_iqp.planning.cost import largest_fitting
from airflow_iqp.validation import number, whole_number

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from airflow_iqp.planning.cost import LinearCost, PiecewiseLinearCost

SAMPLES = 200  # draws per capacity: the 0.975 quantile then rests on the 5 largest
SEED = 0


@dataclass(frozen=True)
class Speedup:
    """How much faster a job runs on more cores: (cores, one-core time / time at that many
    cores) points, interpolated linearly between them and flat past the last (more cores are
    not assumed to help beyond what was measured). `source` says where the points come from.
    """

    points: tuple[tuple[int, float], ...]
    source: str

    def __post_init__(self) -> None:
        if not self.points or self.points[0] != (1, 1.0):
            raise ValueError(f"speedup points must start at (1, 1.0), got {self.points[:1]!r}")
        previous_cores, previous = 0, 0.0
        for i, (cores, speedup) in enumerate(self.points):
            whole_number(cores, f"speedup points[{i}] cores", minimum=previous_cores + 1)
            number(speedup, f"speedup points[{i}] speedup", minimum=previous)
            if speedup > cores:
                raise ValueError(f"speedup points[{i}]: {speedup:g} on {cores} cores is more than linear")
            previous_cores, previous = cores, speedup

    @classmethod
    def amdahl(cls, serial: float, cores: Iterable[int]) -> Speedup:
        """Amdahl's law with a `serial` share of every job that no core count shortens."""
        number(serial, "serial", minimum=0)
        if serial > 1:
            raise ValueError(f"serial must be at most 1, got {serial!r}")
        # Clamped to [1, c]: rounding must not make one core faster than itself or any superlinear.
        points = tuple((c, min(float(c), max(1.0, 1 / (serial + (1 - serial) / c)))) for c in sorted(set(cores)))
        return cls(points, f"default until measured: Amdahl's law with {serial:.0%} of every job serial")

    @property
    def max_cores(self) -> int:
        """The most cores the points cover; more would not make a job faster."""
        return self.points[-1][0]

    def at(self, cores: int) -> float:
        """The speedup on `cores` cores (>= 1)."""
        whole_number(cores, "cores", minimum=1)
        for (c0, s0), (c1, s1) in zip(self.points, self.points[1:]):
            if cores <= c1:
                return s0 + (s1 - s0) * (cores - c0) / (c1 - c0)
        return self.points[-1][1]


@dataclass(frozen=True)
class CoreRun:
    """One job timed on `cores` cores: its input's size (rows, files: one unit per fit) and seconds."""

    cores: int
    size: float
    seconds: float


def _speedups(runs: Iterable[CoreRun]) -> dict[int, float]:
    """Per core count, the mean over sizes of one core's mean time over that count's mean time
    (sizes without one-core runs are left out: there is nothing to compare them with).
    """
    times: dict[tuple[float, int], list[float]] = {}
    for run in runs:
        whole_number(run.cores, "run cores", minimum=1)
        number(run.seconds, "run seconds", above=0)
        times.setdefault((run.size, run.cores), []).append(run.seconds)
    mean = {key: math.fsum(seconds) / len(seconds) for key, seconds in times.items()}
    ratios: dict[int, list[float]] = {}
    for (size, cores), seconds in mean.items():
        if (size, 1) in mean:
            ratios.setdefault(cores, []).append(mean[size, 1] / seconds)
    return {cores: math.fsum(r) / len(r) for cores, r in sorted(ratios.items())}


def fit_speedup(runs: Iterable[CoreRun], source: str) -> Speedup:
    """The speedup measured by `runs` (at least one core count above one, beside one-core runs
    of the same sizes): its points end where more cores stopped helping, so that a count
    measured no faster than a smaller one is not planned with, and are capped at linear.
    """
    measured = _speedups(runs)
    if 1 not in measured or len(measured) < 2:
        raise ValueError(f"a speedup needs one-core runs and runs on more cores of the same sizes, got {measured}")
    points = [(1, 1.0)]
    for cores, speedup in measured.items():
        if cores > 1:
            if speedup <= points[-1][1]:
                break
            points.append((cores, min(speedup, float(cores))))
    return Speedup(tuple(points), source)


@dataclass(frozen=True)
class HeldOut:
    """One run on more than one core, predicted from its size's one-core mean and the speedup
    fitted on the other sizes.
    """

    cores: int
    size: float
    seconds: float
    predicted: float

    @property
    def error(self) -> float:
        """Relative error of the prediction (positive: the model expected it slower)."""
        return self.predicted / self.seconds - 1


def held_out(runs: Sequence[CoreRun]) -> list[HeldOut]:
    """Every multi-core run predicted with its size left out of the fit (leave one size out):
    how well one speedup per core count carries over to a size it was not fitted on.
    """
    sizes = sorted({run.size for run in runs})
    out: list[HeldOut] = []
    for size in sizes:
        kept = [run for run in runs if run.size != size]
        one_core = [run.seconds for run in runs if run.size == size and run.cores == 1]
        if not one_core:
            continue
        speedup = fit_speedup(kept, "held out")
        base = math.fsum(one_core) / len(one_core)
        out.extend(
            HeldOut(run.cores, size, run.seconds, base / speedup.at(run.cores))
            for run in runs
            if run.size == size and run.cores > 1
        )
    return out


# Spark's per-job driver, scheduling and shuffle work does not shrink with executors: 10% serial
# is a conservative guess (8.8x at 64 cores), to be replaced by a model fitted from runs.
DEFAULT_SPEEDUP = Speedup.amdahl(0.1, (1, 2, 4, 8, 16, 32, 64))


@dataclass(frozen=True)
class QueryDemand:
    """One query's work per window on one core, and how far a window may stray from it."""

    task: RecurringQuery  # its times as the cost model has them, on `measured_cores`
    cost_spread: float = 0.0  # relative std of its jobs' times around the cost model
    rate_spread: float = 0.0  # relative std of a window's input around the rate planned with
    measured_cores: int = 1  # the cores its cost model was timed on

    def __post_init__(self) -> None:
        number(self.cost_spread, f"query {self.task.name!r}: cost_spread", minimum=0)
        number(self.rate_spread, f"query {self.task.name!r}: rate_spread", minimum=0)
        whole_number(self.measured_cores, f"query {self.task.name!r}: measured_cores", minimum=1)


@dataclass(frozen=True)
class PhaseCapacity:
    """The cores one phase needs (None: not even `Speedup.max_cores`), and the query that
    needs them: the first to miss with one core fewer (at one core, the one with least slack).
    """

    cores: int | None
    needed_by: str | None


@dataclass(frozen=True)
class Capacity:
    """The capacity per phase of the window cycle at `confidence`."""

    open: PhaseCapacity
    closed: PhaseCapacity
    confidence: float
    speedup: Speedup

    @property
    def peak(self) -> PhaseCapacity:
        """The larger phase (closed, unless the early work is the harder part): fixed provisioning's size."""
        if self.closed.cores is None or (self.open.cores is not None and self.closed.cores >= self.open.cores):
            return self.closed
        return self.open


@dataclass(frozen=True)
class Interval:
    """A stretch of the cycle from a synchronous start, and the cores it needs."""

    start: float
    end: float
    cores: int | None
    closed: tuple[str, ...]  # the queries whose window has closed and whose final work is due


def lognormal(rng: random.Random, spread: float) -> float:
    """A factor of mean 1 and relative standard deviation `spread` (1 when it is 0)."""
    if spread == 0:
        return 1.0
    sigma2 = math.log1p(spread**2)
    return math.exp(math.sqrt(sigma2) * rng.gauss(0.0, 1.0) - sigma2 / 2)


def _scaled(task: RecurringQuery, early: float, final: float, longest: float) -> RecurringQuery:
    return replace(task, work=early + final, final_work=final, longest_job=longest)


def _draw(demands: Sequence[QueryDemand], rng: random.Random | None, speedup: Speedup) -> list[RecurringQuery]:
    """One window of every query on one core: its early work, final work and longest job
    drawn (the window's input shared by all three, its early and final jobs' costs apart).
    """
    out = []
    for d in demands:
        t = d.task
        one_core = speedup.at(d.measured_cores)  # a model timed on more cores is slower on one
        rate = one_core if rng is None else one_core * lognormal(rng, d.rate_spread)
        early = final = 1.0
        if rng is not None:
            early, final = lognormal(rng, d.cost_spread), lognormal(rng, d.cost_spread)
        out.append(
            _scaled(
                t,
                (t.work - t.final_work) * rate * early,
                t.final_work * rate * final,
                t.longest_job * rate * max(early, final),
            )
        )
    return out


def open_tasks(tasks: Sequence[RecurringQuery]) -> list[RecurringQuery]:
    """The early work of every window that has any, due by the window's close."""
    return [
        RecurringQuery(t.name, t.period, t.period, t.work - t.final_work, t.longest_job)
        for t in tasks
        if t.work > t.final_work
    ]


def closed_tasks(tasks: Sequence[RecurringQuery]) -> list[RecurringQuery]:
    """The early work due by each close beside every final work, due by its deadline after it.

    When every window closes at once and its final work is due before the next close, the
    final works are all released together: none can have taken the resource just before
    another's release, so only an early job in flight blocks them (the open parts' term).
    """
    together = len({t.period for t in tasks}) == 1 and all(t.deadline <= 2 * t.period for t in tasks)
    finals = [
        RecurringQuery(
            f"{t.name} (after close)",
            t.period,
            t.deadline,
            t.final_work,
            0.0 if together else t.longest_job,
            t.final_work,
        )
        for t in tasks
        if t.final_work > 0
    ]
    return [*open_tasks(tasks), *finals]


GRID = 1024  # times are rounded to 1/1024 s (work up, deadlines down): exact and fast in admission


def _up(seconds: float) -> float:
    return math.ceil(seconds * GRID) / GRID


def at_cores(tasks: Sequence[RecurringQuery], cores: int, speedup: Speedup) -> list[RecurringQuery]:
    """The tasks with every job run on `cores` cores, on the 1/1024 s grid (never in their favour)."""
    factor = speedup.at(cores)
    return [
        replace(
            t,
            deadline=max(t.period, math.floor(t.deadline * GRID) / GRID) if t.final_work else t.deadline,
            work=_up(t.work / factor),
            final_work=_up(t.final_work / factor),
            longest_job=_up(t.longest_job / factor),
        )
        for t in tasks
    ]


def _admit(tasks: Sequence[RecurringQuery], cores: int, speedup: Speedup) -> Admission | None:
    """The test at `cores`; None when it cannot decide (utilization within a hair of 1), which
    counts as not holding.
    """
    try:
        return admit(at_cores(tasks, cores, speedup))
    except ValueError:  # admission's MAX_DEADLINES: the test interval is too long to decide
        return None


def smallest(tasks: Sequence[RecurringQuery], speedup: Speedup, hint: int = 1) -> int | None:
    """The fewest cores for which admission holds (0 with nothing to run; None: not even at
    `speedup.max_cores`). Admission only gets easier with cores, so `largest_fitting`'s search
    from `hint` (the answer of a similar draw) outwards finds it in a few tests.
    """
    if not tasks or all(t.work == 0 for t in tasks):
        return 0

    top = speedup.max_cores

    def misses(cores: int) -> bool:
        """Admission fails at `cores`: true below one core, false above the most."""
        if cores < 1:
            return True
        if cores > top:
            return False
        result = _admit(tasks, cores, speedup)
        return result is None or not result.feasible

    fewer = largest_fitting(min(max(hint, 1), top) - 1, misses)
    return None if fewer >= top else fewer + 1


def needed_by(tasks: Sequence[RecurringQuery], cores: int | None, speedup: Speedup) -> str | None:
    """The query that needs `cores`: the first to miss with one core fewer, or at one core the
    one with least slack; the first to miss at the most cores when no count is enough.
    """
    if cores == 0 or not tasks:
        return None
    fewer = speedup.max_cores if cores is None else cores - 1
    if fewer >= 1:
        result = _admit(tasks, fewer, speedup)
        if result is not None and result.first_miss is not None:
            return result.first_miss.name
    result = _admit(tasks, max(cores or 1, 1), speedup)
    if result is None:
        return None
    return min(result.queries, key=lambda q: q.slack).name


def _quantile(values: list[int | None], level: float) -> int | None:
    """The smallest value at least `level` of `values` are at or below (None counts as infinite)."""
    ranked = sorted(values, key=lambda v: math.inf if v is None else v)
    return ranked[max(0, math.ceil(level * len(ranked)) - 1)]


def _phase(
    draws: list[list[RecurringQuery]],
    split: Callable[[Sequence[RecurringQuery]], list[RecurringQuery]],
    level: float,
    speedup: Speedup,
) -> PhaseCapacity:
    """The phase's capacity at `level` over the draws, and who needs it in the draw that set it."""
    phased = [split(d) for d in draws]
    cores: list[int | None] = []
    for tasks in phased:
        hint = next((c for c in reversed(cores) if c is not None), 1)
        cores.append(smallest(tasks, speedup, hint))
    chosen = _quantile(cores, level)
    setter = phased[cores.index(chosen)]
    return PhaseCapacity(chosen, needed_by(setter, chosen, speedup))


def capacity(
    demands: Sequence[QueryDemand],
    *,
    confidence: float = 0.95,
    speedup: Speedup = DEFAULT_SPEEDUP,
    samples: int = SAMPLES,
    seed: int = SEED,
) -> Capacity:
    """The capacity per phase for which every deadline holds with probability `confidence`
    (exactly, from the means, when no query has a spread).
    """
    number(confidence, "confidence", above=0)
    if confidence >= 1:
        raise ValueError(f"confidence must be below 1, got {confidence!r}")
    whole_number(samples, "samples", minimum=1)
    if not demands:
        raise ValueError("capacity needs at least one query")
    uncertain = any(d.cost_spread or d.rate_spread for d in demands)
    rng = random.Random(seed)
    draws = [_draw(demands, rng, speedup) for _ in range(samples)] if uncertain else [_draw(demands, None, speedup)]
    per_phase = 1 - (1 - confidence) / 2
    return Capacity(
        open=_phase(draws, open_tasks, per_phase, speedup),
        closed=_phase(draws, closed_tasks, per_phase, speedup),
        confidence=confidence,
        speedup=speedup,
    )


def intervals(tasks: Sequence[RecurringQuery], result: Capacity) -> list[Interval]:
    """The cores over the first windows from a synchronous start: the closed phase's while
    some window's final work is due (from its close to its deadline), the open phase's between.
    """
    closes = [
        (k * t.period + t.period, k * t.period + t.deadline, t.name) for t in tasks for k in range(_cycles(t, tasks))
    ]
    end = max(t.deadline for t in tasks)
    bounds = sorted({0.0, end, *(c for c, _, _ in closes if c < end), *(d for _, d, _ in closes if d < end)})
    out: list[Interval] = []
    for start, stop in zip(bounds, bounds[1:]):
        due = tuple(sorted({name for close, deadline, name in closes if close <= start < deadline}))
        cores = result.closed.cores if due else result.open.cores
        if out and out[-1].cores == cores and out[-1].closed == due:
            out[-1] = replace(out[-1], end=stop)
        else:
            out.append(Interval(start, stop, cores, due))
    return out


def _cycles(task: RecurringQuery, tasks: Sequence[RecurringQuery]) -> int:
    """How many of `task`'s windows close before the latest first deadline."""
    return max(1, math.ceil(max(t.deadline for t in tasks) / task.period))


def describe(tasks: Sequence[RecurringQuery], result: Capacity) -> list[str]:
    """The capacity per phase and per interval of the first window cycle, and who needs the peak."""

    def cores(phase: PhaseCapacity) -> str:
        if phase.cores is None:
            return f"more than {result.speedup.max_cores} cores (no more help)"
        return f"{phase.cores} core{'' if phase.cores == 1 else 's'}"

    lines = [
        f"capacity for every deadline with probability {result.confidence:g} (speedup: {result.speedup.source}):",
        f"  while the windows are open: {cores(result.open)}",
        f"  once a window has closed:   {cores(result.closed)}",
        "per interval of the window cycle (seconds from a common start of the windows):",
    ]
    for interval in intervals(tasks, result):
        due = f"final work due: {', '.join(interval.closed)}" if interval.closed else "windows open"
        count = "-" if interval.cores is None else str(interval.cores)
        lines.append(f"  {interval.start:>8g} - {f'{interval.end:g} s':<10} {count:>3} cores  {due}")
    lines.append(f"peak: {cores(result.peak)}, needed by {result.peak.needed_by} (what fixed provisioning holds)")
    return lines


def residual_spread(measured: Iterable[tuple[float, float]], model: LinearCost | PiecewiseLinearCost) -> float:
    """The relative standard deviation of measured (tuples, seconds) around the model: the
    spread a fitted file's model has on the jobs it was fitted to (0 with fewer than two).
    """
    residuals = [seconds / model.cost(int(tuples)) - 1 for tuples, seconds in measured if model.cost(int(tuples)) > 0]
    if len(residuals) < 2:
        return 0.0
    mean = math.fsum(residuals) / len(residuals)
    return math.sqrt(math.fsum((r - mean) ** 2 for r in residuals) / (len(residuals) - 1))
