"""Warm-up suspects: a lone job far slower than its prediction, never a change of load, never the newest."""

from __future__ import annotations

import numpy as np

from airflow_iqp.learning.warmup import WARM_UP_FACTOR, falls_with_size, warm_up_suspects


def suspects(ratios: list[float]) -> list[int]:
    """Indices of the suspects among jobs that took `ratios` times their prediction of 10 s."""
    seconds = 10 * np.array(ratios)
    return np.flatnonzero(warm_up_suspects(seconds, np.full(len(ratios), 10.0))).tolist()


def test_a_lone_slow_job_is_a_suspect() -> None:
    assert suspects([6.5, 1.0]) == [0]  # the demo's first q6 batch: 8.5 s where 1.3 s was predicted
    assert suspects([1.0, 1.0, 3.0, 1.0, 1.0]) == [2]


def test_twice_the_prediction_is_the_line() -> None:
    assert suspects([WARM_UP_FACTOR * 0.99, 1.0]) == []
    assert suspects([WARM_UP_FACTOR * 1.01, 1.0]) == [0]


def test_a_change_of_load_slows_every_next_job_and_is_no_warm_up() -> None:
    assert suspects([1.0, 1.0, 2.5, 2.2, 2.6, 2.4]) == []
    assert suspects([1.0, 1.0, 3.0, 1.5]) == []  # the next job was slow too, if less


def test_the_newest_job_is_never_a_suspect() -> None:
    assert suspects([1.0, 1.0, 1.0, 5.0]) == []


def test_noisy_timings_raise_the_line() -> None:
    """Timings scattered by 25% either way put the line at about 3.7x: 2.5x is no outlier, 20x is."""
    scattered = [0.8, 1.25] * 4
    assert suspects([*scattered[:4], 2.5, *scattered[4:]]) == []
    assert suspects([*scattered[:4], 20.0, *scattered[4:]]) == [4]


def test_faster_jobs_are_never_suspects() -> None:
    assert suspects([0.1, 1.0, 0.2, 1.0]) == []


def test_with_no_reference_only_a_cost_that_fell_as_the_size_grew_is_a_suspect() -> None:
    def fell(sizes: list[int], seconds: list[float]) -> list[int]:
        return np.flatnonzero(falls_with_size(np.array(sizes, float), np.array(seconds))).tolist()

    assert fell([2000, 58_000], [8.5, 3.3]) == [0]  # the demo's first q6 batch on a fresh server
    assert fell([149_475, 878_485], [2.0, 2.63]) == []  # slower per row, not slower: no warm-up
    assert fell([17_000, 363_000], [2.36, 1.99]) == []  # a flat cost's noise is under the factor
    assert fell([58_000, 2000], [8.5, 3.3]) == []  # a larger job may take longer
    assert fell([2000, 58_000], [3.3, 8.5]) == []
