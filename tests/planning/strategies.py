"""Hypothesis strategies for small planning instances.

Every number is a multiple of 1/4 and every piecewise segment spans a power of two of tuples,
so all sums and interpolations are exact in binary floating point and a deadline that a plan
meets exactly is not lost to rounding.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hypothesis import strategies as st

from airflow_iqp.planning import ArrivalCurve, LinearCost, PiecewiseLinearCost
from tests.planning.brute_force import Instance

if TYPE_CHECKING:
    from airflow_iqp.planning.cost import CostModel

quarters = st.integers(min_value=0, max_value=16).map(lambda q: q / 4)


@st.composite
def arrivals(draw: st.DrawFn, total: int) -> ArrivalCurve:
    if draw(st.booleans()):
        start = draw(quarters)
        return ArrivalCurve.fixed_rate(start, start + (total - 1) * draw(st.sampled_from([0.25, 0.5, 1.0, 2.0])), total)
    gaps = draw(st.lists(st.integers(0, 12), min_size=total, max_size=total))
    points: list[tuple[float, int]] = []
    t, n = 0.0, 0
    for gap in gaps:  # uneven: bursts (gap 0 merges into one step) and pauses
        t += gap / 4
        n += 1
        if points and points[-1][0] == t:
            points[-1] = (t, n)
        else:
            points.append((t, n))
    return ArrivalCurve.from_points(points)


linear_costs = st.builds(
    LinearCost,
    per_tuple=st.integers(1, 8).map(lambda q: q / 4),
    overhead=st.integers(0, 8).map(lambda q: q / 4),
)


@st.composite
def concave_costs(draw: st.DrawFn) -> PiecewiseLinearCost:
    """Measured-looking costs: an overhead, then ever cheaper tuples (so cost(n)/n never rises)."""
    slope = draw(st.integers(2, 8)) / 4
    y = slope + draw(st.integers(0, 8)) / 4
    points = [(1.0, y)]
    x = 1.0
    for _ in range(draw(st.integers(0, 3))):
        width = draw(st.sampled_from([1, 2, 4]))
        x, y = x + width, y + slope * width
        points.append((x, y))
        slope = slope / 2
    return PiecewiseLinearCost(points)


def merge_costs() -> st.SearchStrategy[LinearCost | None]:
    return st.one_of(
        st.none(),
        st.builds(
            LinearCost,
            per_tuple=st.integers(0, 4).map(lambda q: q / 4),
            overhead=st.integers(0, 4).map(lambda q: q / 4),
        ),
    )


@st.composite
def instances(draw: st.DrawFn, costs: st.SearchStrategy[CostModel], max_total: int = 9) -> Instance:
    total = draw(st.integers(1, max_total))
    arrival = draw(arrivals(total))
    window_end = arrival.time_of(total) + draw(st.sampled_from([0.0, 0.0, 0.5, 1.0]))
    return Instance(total, arrival, window_end, draw(costs), draw(merge_costs()))


@st.composite
def deadlines(draw: st.DrawFn, inst: Instance) -> float:
    """From hopeless to generous, around the window end."""
    return max(inst.arrival.time_of(1), inst.window_end + draw(st.integers(-4, 40)) / 4)
