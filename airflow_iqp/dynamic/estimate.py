"""Estimates the scheduler needs when the input does not say: how many tuples, and when.

Section 4.4: the total of a window may be unknown until it closes, and input may run slow.
Both estimates assume the window's tuples arrive at an even rate up to its end, which is
what a source that keeps its nominal rate would deliver.
"""

from __future__ import annotations


def estimate_total(arrived: int, first_arrival: float, now: float, window_end: float) -> int:
    """Tuples the window will hold, extrapolating the rate observed so far to its end.

    Before any time has elapsed there is no rate to extrapolate, so the guess is what arrived.
    """
    elapsed = now - first_arrival
    if now >= window_end or elapsed <= 0 or arrived <= 0:
        return arrived
    return max(arrived, round(arrived * (window_end - first_arrival) / elapsed))


def expected_time_of(n: int, total: int, first_arrival: float, window_end: float) -> float:
    """When tuple n should have arrived at the nominal rate: total tuples evenly over the window.

    Once this has passed, waiting longer for n tuples only burns the query's slack.
    """
    if n >= total or total <= 1:
        return window_end
    return first_arrival + (n - 1) * (window_end - first_arrival) / (total - 1)
