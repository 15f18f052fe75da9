"""Learned arrival rates: steady input recovered, the last windows count, nothing seen gives None."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_iqp.learning.rate import RECENT_WINDOWS, LearnedRate, WindowInput, learned_rate

ORIGIN = datetime(2026, 1, 1, tzinfo=UTC)
TEN_MINUTES = timedelta(minutes=10)


def windows(files: list[int], rows_per_file: int = 1000, length: timedelta = TEN_MINUTES) -> list[WindowInput]:
    return [
        WindowInput(ORIGIN + i * length, ORIGIN + (i + 1) * length, n, n * rows_per_file) for i, n in enumerate(files)
    ]


@given(
    files=st.integers(1, 500),
    rows_per_file=st.integers(1, 10**6),
    minutes=st.integers(1, 24 * 60),
    count=st.integers(1, 20),
)
def test_a_steady_stream_is_recovered(files: int, rows_per_file: int, minutes: int, count: int) -> None:
    rate = learned_rate(windows([files] * count, rows_per_file, timedelta(minutes=minutes)))
    assert rate is not None
    assert rate.files_per_second == pytest.approx(files / (minutes * 60))
    assert rate.rows_per_file == pytest.approx(rows_per_file)
    assert rate.windows == min(count, RECENT_WINDOWS)


def test_no_history_gives_none() -> None:
    assert learned_rate([]) is None


def test_windows_without_files_or_rows_give_none() -> None:
    assert learned_rate(windows([0, 0, 0])) is None
    assert learned_rate(windows([3, 2], rows_per_file=0)) is None


def test_only_the_last_windows_count() -> None:
    """The producer went from 100 to 10 files a window: the old pace is forgotten."""
    history = windows([100] * 10 + [10] * RECENT_WINDOWS)
    rate = learned_rate(history)
    assert rate == LearnedRate(files_per_second=10 / 600, rows_per_file=1000.0, windows=RECENT_WINDOWS)
    partly = learned_rate(windows([100] * 10 + [10] * (RECENT_WINDOWS - 1)))
    assert partly is not None
    assert partly.files_per_second == pytest.approx((100 + 10 * (RECENT_WINDOWS - 1)) / (600 * RECENT_WINDOWS))


def test_the_order_comes_from_the_window_starts() -> None:
    history = windows([100] * 10 + [10] * RECENT_WINDOWS)
    shuffled = history[:]
    random.Random(4).shuffle(shuffled)
    assert learned_rate(shuffled) == learned_rate(history)


def test_empty_windows_lower_the_rate_but_not_rows_per_file() -> None:
    rate = learned_rate(windows([6, 0, 6, 0], rows_per_file=50))
    assert rate == LearnedRate(files_per_second=12 / 2400, rows_per_file=50.0, windows=4)


def test_files_and_rows_are_summed_before_dividing() -> None:
    """A short window with a few big files moves the rate by its share of the time and files."""
    history = [
        WindowInput(ORIGIN, ORIGIN + timedelta(minutes=50), 50, 50_000),
        WindowInput(ORIGIN + timedelta(hours=1), ORIGIN + timedelta(hours=1, minutes=10), 2, 20_000),
    ]
    assert learned_rate(history) == LearnedRate(files_per_second=52 / 3600, rows_per_file=70_000 / 52, windows=2)


@pytest.mark.parametrize(
    ("start", "end", "files", "rows", "message"),
    [
        (ORIGIN, ORIGIN, 1, 1, "start < end"),
        (ORIGIN + TEN_MINUTES, ORIGIN, 1, 1, "start < end"),
        ("2026-01-01", ORIGIN, 1, 1, "datetimes"),
        (ORIGIN, ORIGIN + TEN_MINUTES, -1, 0, "files must be >= 0"),
        (ORIGIN, ORIGIN + TEN_MINUTES, 1, 2.5, "rows must be a whole number"),
        (ORIGIN, ORIGIN + TEN_MINUTES, 0, 10, "10 rows but no files"),
    ],
)
def test_a_bad_window_is_refused(start: object, end: object, files: object, rows: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        WindowInput(start, end, files, rows)  # type: ignore[arg-type]
