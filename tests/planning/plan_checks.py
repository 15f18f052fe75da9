"""What every plan must satisfy, whatever planned it."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from airflow_iqp.planning import Plan
    from tests.planning.brute_force import Instance


def assert_valid_schedule(inst: Instance, plan: Plan, deadline: float) -> None:
    assert plan.batches, "a window with tuples needs at least one batch"
    expected_first = 1
    previous_end = -math.inf
    for batch in plan.batches:
        assert batch.first == expected_first, "batches must cover the tuples in arrival order"
        assert batch.size >= 1
        assert batch.release == inst.arrival.time_of(batch.last)
        assert batch.start >= batch.release, "a batch may only hold tuples that have arrived"
        assert batch.start >= previous_end, "one batch at a time"
        assert batch.cost == inst.cost.cost(batch.size)
        assert batch.end == batch.start + inst.cost.cost(batch.size)
        previous_end = batch.end
        expected_first += batch.size
    assert expected_first == inst.total + 1, "every tuple exactly once"
    assert plan.batches[-1].start >= inst.window_end, "the last batch waits for the window to close"
    if len(plan.batches) == 1:
        assert plan.merge is None
        assert plan.finish == plan.batches[0].end
    else:
        assert plan.merge is not None
        assert plan.merge.start >= previous_end
        assert plan.merge.end == plan.merge.start + inst.agg(len(plan.batches))
        assert plan.finish == plan.merge.end
    assert math.isclose(
        plan.total_cost,
        math.fsum(inst.cost.cost(b.size) for b in plan.batches) + inst.agg(len(plan.batches)),
        rel_tol=1e-12,
    )
    if plan.feasible:
        assert plan.finish <= deadline
        assert plan.reason is None
    else:
        assert plan.reason
        assert plan.earliest_deadline is not None
        assert plan.finish <= plan.earliest_deadline
