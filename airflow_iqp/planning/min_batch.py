"""MinBatchSize (Section 4): the smallest batch that keeps batching within alpha of one batch.

Small batches keep a non-preemptive scheduler responsive, large ones save overhead. The answer
is the smallest b whose total cost (N tuples in batches of b, plus the merge of ceil(N/b)
partials) is within (1 + alpha) of one batch of N, and whose own cost fits in tau_max, the
longest a batch may block the shared resource. A cost every batch pays outside the model (the
orchestrator's task that runs it) counts against alpha, since batching multiplies it, but not
against tau_max, since it does not hold the shared resource. For 10^9 tuples a scan over b is far too slow:
a monotone lower bound finds where the answer can start, and from there the cost is walked in
pieces on which it is linear in b, so each piece is settled in O(1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from airflow_iqp.planning.cost import CostModel, LinearCost, PiecewiseLinearCost, largest_fitting
from airflow_iqp.validation import number, whole_number


@dataclass(frozen=True)
class MinBatch:
    """The smallest batch size within alpha (and tau_max), and what batching at it costs."""

    size: int
    cost_ratio: float  # batched cost (with merge) over the single-batch cost
    alpha_met: bool

    def batches(self, total: int) -> int:
        """Batches of this size that `total` tuples make."""
        return -(-total // self.size)


@dataclass(frozen=True)
class _PerBatch:
    """A batch's modelled cost plus `extra` seconds each batch pays outside the model."""

    model: LinearCost | PiecewiseLinearCost
    extra: float

    def cost(self, n: int) -> float:
        return 0.0 if n <= 0 else self.model.cost(n) + self.extra

    def segments(self, limit: int) -> list[tuple[int, int, float, float]]:
        return [(lo, hi, a + self.extra, slope) for lo, hi, a, slope in self.model.segments(limit)]


class _BatchedCost:
    """cost_b(N) + agg(ceil(N/b)) and the pieces on which it is linear in b."""

    def __init__(self, total: int, cost: _PerBatch, agg_cost: CostModel | None) -> None:
        self.total = total
        self.cost = cost
        self.agg_cost = agg_cost
        self.ranges = cost.segments(total)

    def agg(self, batches: int) -> float:
        return 0.0 if batches <= 1 or self.agg_cost is None else self.agg_cost.cost(batches)

    def __call__(self, b: int) -> float:
        full, rest = divmod(self.total, b)
        return full * self.cost.cost(b) + self.cost.cost(rest) + self.agg(full + (rest > 0))

    def range_of(self, n: int) -> tuple[int, int, float, float]:
        for r in self.ranges:
            if r[0] <= n <= r[1]:
                return r
        raise ValueError(f"no cost range holds {n}: ranges cover 1..{self.total} only")

    def lower_bound(self, b: int) -> float:
        """N times the least per-tuple cost of any batch up to b, plus the merge: never above
        the real cost of batches of b, and non-increasing in b.
        """
        per_tuple = math.inf
        for lo, hi, a, slope in self.ranges:
            if lo > b:
                break
            top = min(hi, b)
            per_tuple = min(per_tuple, (a + slope * lo) / lo, (a + slope * top) / top)
        return self.total * per_tuple + self.agg(-(-self.total // b))

    def first_within(self, start: int, stop: int, limit: float) -> int | None:
        """Smallest b in [start, stop] with cost <= limit, piece by piece."""
        b = start
        while b <= stop:
            full = self.total // b
            rest = self.total - full * b
            if rest == 0:
                if self(b) <= limit:
                    return b
                b += 1
                continue
            b_lo, b_hi, a_b, s_b = self.range_of(b)
            r_lo, _, a_r, s_r = self.range_of(rest)
            # Same number of full batches, same cost range for b and for the remainder.
            end = min(stop, self.total // full, b_hi, (self.total - r_lo) // full)
            if end >= b and self._linear_hit(b, end, limit) is not None:
                return self._linear_hit(b, end, limit)
            b = max(end, b) + 1
        return None

    def _linear_hit(self, lo: int, hi: int, limit: float) -> int | None:
        """On [lo, hi] the cost is linear in b: solve for the crossing, then confirm exactly."""
        f_lo, f_hi = self(lo), self(hi)
        if f_lo <= limit:
            return lo
        if f_hi > limit or hi == lo:
            return None
        slope = (f_hi - f_lo) / (hi - lo)
        guess = lo + math.ceil((f_lo - limit) / -slope)
        guess = min(max(guess, lo + 1), hi)
        fits_before = largest_fitting(hi - guess, lambda d: d <= hi - lo and self(hi - d) <= limit)
        return hi - fits_before


def min_batch_size(
    *,
    total: int,
    cost: LinearCost | PiecewiseLinearCost,
    agg_cost: CostModel | None = None,
    alpha: float,
    tau_max: float,
    per_batch: float = 0.0,
) -> MinBatch:
    """MinBatchSize: the smallest b within (1 + alpha) of one batch whose cost fits tau_max; if none
    is within alpha, the largest b that fits tau_max, with `alpha_met` False. `per_batch` is what
    each batch costs beyond `cost` (its task): in the totals compared, not in tau_max.
    """
    total = whole_number(total, "total", minimum=1)
    alpha = number(alpha, "alpha", minimum=0)
    tau_max = number(tau_max, "tau_max")
    per_batch = number(per_batch, "per_batch", minimum=0)
    if cost.cost(1) > tau_max:
        raise ValueError(
            f"tau_max ({tau_max:g} s) is below the cost of a single tuple ({cost.cost(1):g} s): no batch fits"
        )
    charged = _PerBatch(cost, per_batch)
    batched = _BatchedCost(total, charged, agg_cost)
    single = charged.cost(total)
    limit = (1 + alpha) * single
    largest = min(total, cost.max_tuples(tau_max))

    def ratio(b: int) -> float:
        return batched(b) / single if single > 0 else 1.0

    # The bound is only used to skip sizes, so rounding must not make it skip the answer.
    bound_limit = limit * (1 + 1e-9) + 1e-12
    if batched.lower_bound(largest) <= bound_limit:
        # Smallest b whose lower bound fits: nothing below it can fit.
        start = largest - largest_fitting(
            largest - 1, lambda d: d <= largest - 1 and batched.lower_bound(largest - d) <= bound_limit
        )
        found = batched.first_within(start, largest, limit)
        if found is not None:
            return MinBatch(found, ratio(found), True)
    return MinBatch(largest, ratio(largest), False)
