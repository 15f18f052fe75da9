from __future__ import annotations

from datetime import date
from decimal import Decimal

from benchmarks.ssbench.check import canonical, canonical_rows, mismatch


def test_canonical_numbers_are_floats_and_dates_text():
    assert canonical(Decimal("1.50")) == 1.5
    assert canonical(3) == 3.0
    assert canonical(date(1995, 3, 15)) == "1995-03-15"
    assert canonical(None) is None
    assert canonical(True) == "true"
    assert canonical_rows([(Decimal("2"), "x")]) == [(2.0, "x")]


def test_equal_results_within_tolerance():
    truth = [(1.0, "a"), (2.0, "b")]
    assert mismatch([(2.0 + 1e-12, "b"), (1.0, "a")], truth, ordered=False) is None
    assert mismatch([(1.0, "a"), (2.0 + 1e-12, "b")], truth, ordered=True) is None


def test_order_matters_only_when_the_query_orders():
    truth = [(1.0, "a"), (2.0, "b")]
    assert mismatch([(2.0, "b"), (1.0, "a")], truth, ordered=True) is not None


def test_a_different_value_or_row_count_is_reported():
    assert "row 0" in (mismatch([(1.01,)], [(1.0,)], ordered=False) or "")
    assert "1 rows, expected 2" == mismatch([(1.0,)], [(1.0,), (2.0,)], ordered=False)
    assert mismatch([("a",)], [(None,)], ordered=False) is not None
