"""The lease pool: started units are billed, the BTU-aware release never bills more than releasing at once;
`enact` applies the same rule to running executors."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_iqp.planning.elastic import LeasePool, enact

BTU = 60.0


def test_a_core_no_longer_needed_stays_until_its_paid_unit_ends_and_is_reused_if_needed_again() -> None:
    pool = LeasePool(BTU)
    pool.need(0.0, 2)
    pool.need(10.0, 0)
    assert pool.held(59.0) == 2, "paid until 60 s: still leased"
    pool.need(50.0, 1)  # needed again before the unit ends: one kept, no new lease
    assert len(pool.leases) == 2
    assert pool.held(61.0) == 1
    pool.close(70.0)
    assert pool.billed() == 60.0 + 120.0  # one unit, and two started units of the kept core
    assert pool.peak() == 2


def test_releasing_at_once_bills_the_started_unit_all_the_same() -> None:
    pool = LeasePool(BTU)
    pool.need(0.0, 1)
    pool.release_now(5.0, 1)
    pool.need(20.0, 1)
    pool.release_now(25.0, 1)
    assert pool.held(30.0) == 0
    assert pool.billed() == 120.0, "two leases, one started unit each"


def test_a_held_lease_has_no_bill_and_bad_values_are_refused() -> None:
    pool = LeasePool(BTU)
    pool.need(0.0, 1)
    with pytest.raises(ValueError, match="no bill"):
        pool.billed()
    with pytest.raises(ValueError, match="btu must be > 0"):
        LeasePool(0)
    with pytest.raises(ValueError, match="cores must be >= 0"):
        pool.need(1.0, -1)


needs = st.lists(st.tuples(st.integers(1, 200), st.integers(0, 4)), min_size=1, max_size=12)


@given(needs, st.sampled_from([10.0, 60.0, 3600.0]))
def test_btu_aware_release_holds_what_is_needed_and_bills_no_more_than_releasing_at_once(
    steps: list[tuple[int, int]], btu: float
) -> None:
    aware, eager = LeasePool(btu), LeasePool(btu)
    now = 0.0
    for gap, cores in steps:
        now += gap
        aware.need(now, cores)
        assert aware.held(now) >= cores
        surplus = eager.held(now) - cores
        if surplus > 0:
            eager.release_now(now, surplus)
        else:
            eager.need(now, cores)
        assert eager.held(now) == cores
    now += 1
    aware.close(now)
    eager.release_now(now, eager.held(now))
    for lease in aware.leases:  # released at the end of a paid unit, never inside one
        assert lease.end is not None
        assert ((lease.end - lease.start) / btu).is_integer()
    assert aware.billed() <= eager.billed()
    assert aware.billed() >= btu * max(cores for _, cores in steps)


def test_a_surplus_executor_is_released_only_as_its_paid_unit_ends_and_first_the_one_ending_first() -> None:
    started = {"0": 0.0, "1": 30.0}
    assert enact(started, 2, 40.0, BTU, 10.0).release == (), "both needed"
    kept = enact(started, 1, 40.0, BTU, 10.0)
    assert kept.release == (), "executor 0's unit ends at 60 s: 20 s away, more than the notice"
    assert kept.total == 2, "the cluster is not asked for fewer than run until one is released"
    ending = enact(started, 1, 51.0, BTU, 10.0)
    assert ending.release == ("0",), "0's unit ends first (60 s against 90 s)"
    assert ending.total == 1
    assert enact(started, 0, 85.0, BTU, 10.0).release == ("1",), "0 is in its second unit, ending at 120 s"


def test_a_shortfall_is_asked_for_at_once_and_an_idle_cluster_goes_to_none() -> None:
    assert enact({}, 2, 0.0, BTU, 10.0) == enact({"0": 0.0}, 2, 1.0, BTU, 10.0)
    assert enact({"0": 0.0}, 2, 1.0, BTU, 10.0).total == 2
    assert enact({"0": 0.0, "1": 0.0}, 0, 55.0, BTU, 10.0).release == ("0", "1")
    assert enact({"0": 0.0, "1": 0.0}, 0, 55.0, BTU, 10.0).total == 0
    with pytest.raises(ValueError, match="need must be >= 0"):
        enact({}, -1, 0.0, BTU, 10.0)


@given(st.lists(st.floats(0, 500), max_size=6), st.integers(0, 6), st.floats(0, 1000), st.sampled_from([10.0, 60.0]))
def test_enact_keeps_what_the_plan_needs_and_releases_only_near_a_units_end(
    starts: list[float], need: int, later: float, btu: float
) -> None:
    started = {str(i): start for i, start in enumerate(starts)}
    now = max(starts, default=0.0) + later
    notice = btu / 4
    action = enact(started, need, now, btu, notice)
    assert action.total >= need
    assert len(started) - len(action.release) >= min(need, len(started)), "never below the plan"
    assert action.total == max(need, len(started) - len(action.release))
    for executor in action.release:
        into_unit = (now - started[executor]) % btu
        assert into_unit >= btu - notice or into_unit == 0, "released only in the last notice of a unit"
