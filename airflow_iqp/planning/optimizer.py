"""Exact least-cost batching as a mixed-integer program (the paper's Section 3.2, extended).

For each batch count n the model has integer sizes x_i, continuous starts s_i and:
  sum x_i = N; s_i + cost(x_i) <= s_{i+1}; s_n + cost(x_n) <= D - agg(n);
  s_i >= time_of(x_1 + ... + x_i)  (the batch's newest tuple has arrived).
The paper's model only covers linear cost; here a piecewise-linear cost gets one binary per
linear range, and a step arrival curve one binary per step, so the model stays exact. Solver
tolerances make an answer only nearly feasible, so the sizes it picks are re-timed exactly
with Window.schedule before they are trusted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from airflow_iqp.planning.arrival import FixedRateArrival, StepArrival
from airflow_iqp.planning.cost import LinearCost, PiecewiseLinearCost

if TYPE_CHECKING:
    from ortools.linear_solver import pywraplp

    from airflow_iqp.planning.plan import Batch
    from airflow_iqp.planning.window import Window

# Relative slack allowed between the two phases (least cost, then latest batches).
_COST_TOLERANCE = 1e-9


def _lower_hull(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    hull: list[tuple[float, float]] = []
    for p in points:
        while len(hull) >= 2:
            (x1, y1), (x2, y2) = hull[-2], hull[-1]
            if (y2 - y1) * (p[0] - x1) >= (p[1] - y1) * (x2 - x1):
                hull.pop()
            else:
                break
        hull.append(p)
    return hull


def _interpolate(hull: list[tuple[float, float]], x: float) -> float:
    for (x1, y1), (x2, y2) in zip(hull, hull[1:]):
        if x <= x2:
            return y1 + (y2 - y1) * (x - x1) / (x2 - x1)
    return hull[-1][1]


@dataclass(frozen=True)
class _Model:
    solver: pywraplp.Solver
    sizes: list[pywraplp.Variable]
    batch_cost: pywraplp.LinearExpr
    prefix_sum: pywraplp.LinearExpr


class BatchOptimizer:
    """Least-cost batch sizes for one window and deadline."""

    def __init__(self, window: Window) -> None:
        if not isinstance(window.cost, LinearCost | PiecewiseLinearCost):
            raise ValueError(
                f"method='mip' supports LinearCost and PiecewiseLinearCost, not {type(window.cost).__name__}"
            )
        if not isinstance(window.arrival, FixedRateArrival | StepArrival):
            raise ValueError(f"method='mip' does not know arrival curve {type(window.arrival).__name__}")
        self.window = window
        self.cost: LinearCost | PiecewiseLinearCost = window.cost  # narrowed by the checks above
        self.arrival: FixedRateArrival | StepArrival = window.arrival
        # Times are shifted to start at the first arrival: epoch-sized numbers would eat the
        # solver's absolute tolerances.
        self.origin = window.arrival.first_arrival
        n = window.total
        breakpoints = [(1.0, window.cost.cost(1)), (float(n), window.cost.cost(n))]
        if isinstance(window.cost, PiecewiseLinearCost):
            breakpoints += [(float(lo), window.cost.cost(lo)) for lo, _, _, _ in window.cost.segments(n)]
        self._cost_hull = _lower_hull(sorted(set(breakpoints)))

    def lower_bound(self, batches: int) -> float:
        """No plan with this many batches costs less: Jensen on the cost's convex hull."""
        per_batch = (
            _interpolate(self._cost_hull, self.window.total / batches)
            if self.window.total > 1
            else self._cost_hull[0][1]
        )
        return batches * per_batch + self.window.agg(batches)

    def _build(self, batches: int, deadline: float) -> _Model:
        from ortools.linear_solver import pywraplp  # here: the package is imported at every DAG parse

        w = self.window
        solver = pywraplp.Solver.CreateSolver("SCIP")
        horizon = deadline - self.origin
        big = w.total - batches + 1
        sizes = [solver.IntVar(1, big, f"x{i}") for i in range(batches)]
        starts = [solver.NumVar(0.0, horizon, f"s{i}") for i in range(batches)]
        durations = [self._cost_expr(solver, x, big, i) for i, x in enumerate(sizes)]
        solver.Add(sum(sizes) == w.total)
        prefix: list[pywraplp.LinearExpr] = []
        running: pywraplp.LinearExpr = 0
        for i, x in enumerate(sizes):
            running = running + x
            prefix.append(running)
            if i < batches - 1:
                self._release(solver, starts[i], running, i)
                solver.Add(starts[i] + durations[i] <= starts[i + 1])
        solver.Add(starts[-1] >= w.ready(w.total) - self.origin)
        solver.Add(starts[-1] + durations[-1] <= w.batches_bound(deadline, batches) - self.origin)
        return _Model(solver, sizes, sum(durations), sum(prefix[:-1]))

    def _cost_expr(self, solver: pywraplp.Solver, x: pywraplp.Variable, big: int, i: int) -> pywraplp.LinearExpr:
        cost = self.cost
        if isinstance(cost, LinearCost):
            return cost.overhead + cost.per_tuple * x
        pieces = [(lo, min(hi, big), a, b) for lo, hi, a, b in cost.segments(big)]
        chosen = [solver.BoolVar(f"seg{i}_{k}") for k in range(len(pieces))]
        amount = [solver.NumVar(0.0, hi, f"amt{i}_{k}") for k, (_, hi, _, _) in enumerate(pieces)]
        solver.Add(sum(chosen) == 1)
        for y, z, (lo, hi, _, _) in zip(chosen, amount, pieces):
            solver.Add(z >= lo * y)
            solver.Add(z <= hi * y)
        solver.Add(x == sum(amount))
        return sum(a * y + b * z for y, z, (_, _, a, b) in zip(chosen, amount, pieces))

    def _release(self, solver: pywraplp.Solver, start: pywraplp.Variable, arrived: pywraplp.LinearExpr, i: int) -> None:
        arrival = self.arrival
        if isinstance(arrival, FixedRateArrival):
            solver.Add(start >= arrival.start - self.origin + (arrived - 1) * arrival.gap)
            return
        steps = [solver.BoolVar(f"step{i}_{j}") for j in range(len(arrival.times))]
        solver.Add(sum(steps) == 1)
        solver.Add(arrived <= sum(c * z for c, z in zip(arrival.counts, steps)))
        solver.Add(start >= sum((t - self.origin) * z for t, z in zip(arrival.times, steps)))

    def _solve(self, model: _Model) -> list[int] | None:
        from ortools.linear_solver import pywraplp

        status = model.solver.Solve()
        if status not in (pywraplp.Solver.OPTIMAL, pywraplp.Solver.FEASIBLE):
            return None
        return [round(x.solution_value()) for x in model.sizes]

    def best_for(self, batches: int, deadline: float) -> list[Batch] | None:
        """Least-cost plan with exactly this many batches; among equals, the latest batches.

        If the solver's answer is only feasible within its tolerance, it is asked once more
        with the deadline pulled in by a hair, so that its answer holds exactly.
        """
        for margin in (0.0, 1e-6 * max(1.0, deadline - self.origin)):
            for sizes in self._candidates(batches, deadline - margin):
                timed = self.window.schedule(sizes, deadline)
                if timed is not None:
                    return timed
        return None

    def _candidates(self, batches: int, deadline: float) -> list[list[int]]:
        model = self._build(batches, deadline)
        model.solver.Minimize(model.batch_cost)
        cheapest = self._solve(model)
        if cheapest is None or batches == 1:
            return [cheapest] if cheapest else []
        least = model.solver.Objective().Value()
        model.solver.Add(model.batch_cost <= least + _COST_TOLERANCE * max(1.0, abs(least)))
        model.solver.Minimize(model.prefix_sum)
        latest = self._solve(model)
        return [sizes for sizes in (latest, cheapest) if sizes and sum(sizes) == self.window.total]

    def optimize(self, deadline: float) -> list[Batch] | None:
        """Try n = 1, 2, ... until no larger n can beat the best plan found."""
        best: list[Batch] | None = None
        best_cost = math.inf
        for batches in range(1, self.window.total + 1):
            if self.lower_bound(batches) > best_cost * (1 + _COST_TOLERANCE):
                break
            if isinstance(self.cost, LinearCost) and best is not None:
                break  # linear cost grows with every batch: the first feasible n is cheapest
            plan = self.best_for(batches, deadline)
            if plan is None:
                continue
            cost = math.fsum(b.cost for b in plan) + self.window.agg(batches)
            if cost < best_cost * (1 - _COST_TOLERANCE):
                best, best_cost = plan, cost
        return best
