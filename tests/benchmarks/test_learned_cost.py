"""The learned-cost benchmark's bookkeeping: which windows it runs and how it scores them.

The benchmark is a script, not a package module, so it is loaded from its file.
"""

from __future__ import annotations

import importlib.util
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "learned_cost.py"
_spec = importlib.util.spec_from_file_location("learned_cost", SCRIPT)
assert _spec is not None
assert _spec.loader is not None
bench = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = bench  # dataclasses look their module up while the file runs
_spec.loader.exec_module(bench)


def test_windows_are_consecutive_and_aligned_to_the_grid() -> None:
    window = timedelta(seconds=90)
    after = datetime(2026, 3, 1, 12, 0, 7, tzinfo=UTC)
    starts = bench.window_starts(4, window, after)
    assert len(starts) == 4
    assert starts[0] >= after
    assert starts[0] - window < after, "the first window that opens at or after `after`"
    assert all((s - bench.ORIGIN) % window == timedelta(0) for s in starts)
    assert [b - a for a, b in zip(starts, starts[1:])] == [window] * 3


def test_a_window_opening_exactly_then_is_the_first() -> None:
    window = timedelta(seconds=90)
    on_grid = bench.ORIGIN + 1000 * window
    assert bench.window_starts(1, window, on_grid) == [on_grid]


def job(window: int, name: str, predicted: float | None, actual: float, plan: str = "planned") -> object:
    return bench.Job(window, plan, name, 1000, predicted, actual, predicted)


def test_a_window_sums_its_batches_and_keeps_its_merge_apart() -> None:
    jobs = [
        job(2, "batch 0", 12.0, 10.0),
        job(2, "batch 1", 18.0, 20.0),
        job(2, "merge", 9.0, 12.0),
    ]
    [cost] = bench.window_costs(jobs)
    assert cost.batches == 2
    assert cost.predicted == pytest.approx(30.0)
    assert cost.actual == pytest.approx(30.0)
    assert cost.error == pytest.approx(0.0)
    assert cost.mean_batch_error == pytest.approx((0.2 + 0.1) / 2), "single batches err although the sum does not"
    assert cost.merge_error == pytest.approx(-0.25)


def test_a_window_without_a_prediction_has_no_error() -> None:
    jobs = [
        job(1, "batch 0", None, 14.0, plan="calibration"),
        job(1, "batch 1", None, 19.0, plan="calibration"),
        job(1, "merge", None, 12.0, plan="calibration"),
    ]
    [cost] = bench.window_costs(jobs)
    assert cost.plan == "calibration"
    assert cost.predicted is None
    assert cost.error is None
    assert cost.mean_batch_error is None
    assert cost.merge_error is None
    assert cost.actual == pytest.approx(33.0)


def test_the_target_counts_only_predicted_windows_from_the_third_on() -> None:
    jobs = [
        job(1, "batch 0", None, 10.0, plan="calibration"),
        job(2, "batch 0", 20.0, 10.0),  # +100%, before the target applies
        job(3, "batch 0", 11.0, 10.0),  # +10%
        job(4, "batch 0", 8.5, 10.0),  # -15%
        job(5, "batch 0", None, 10.0, plan="historical"),
    ]
    assert bench.worst_error(bench.window_costs(jobs)) == pytest.approx(0.15)
    assert bench.worst_error(bench.window_costs(jobs[:2])) is None


@pytest.mark.parametrize(
    ("how", "kind"),
    [
        ("planned at 0.333333 files/s of ~100000 rows", "planned"),
        ("calibration: one unit first, the rest once final", "calibration"),
        ("historical: its input is final, one batch now", "historical"),
    ],
)
def test_plan_kind_from_what_the_plan_task_recorded(how: str, kind: str) -> None:
    assert bench.plan_kind(how) == kind
