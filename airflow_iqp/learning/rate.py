"""Arrival rates learned from the inputs of a DAG's last windows (`rate="learn"`).

A producer's pace changes (hour of day, upstream backlogs), so only the last `RECENT_WINDOWS`
windows whose input is final count, each as it came: the rate is their files over their
seconds, and rows per file their rows over their files. Summing before dividing weighs each
window by its length and each file alike, so one window with a few odd files moves the rate
little, and a change of pace is followed within `RECENT_WINDOWS` windows.

The answer is a plain `LearnedRate`, not the declaration's `ArrivalRate` (which belongs to the
Airflow side); the caller builds one from its two numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from airflow_iqp.validation import whole_number

if TYPE_CHECKING:
    from collections.abc import Iterable

RECENT_WINDOWS = 6


@dataclass(frozen=True)
class WindowInput:
    """What one window received once its input was final: its files and their rows."""

    start: datetime
    end: datetime
    files: int
    rows: int

    def __post_init__(self) -> None:
        if not isinstance(self.start, datetime) or not isinstance(self.end, datetime) or self.end <= self.start:
            raise ValueError(f"a window needs datetimes start < end, got {self.start!r} and {self.end!r}")
        object.__setattr__(self, "files", whole_number(self.files, "files", minimum=0))
        object.__setattr__(self, "rows", whole_number(self.rows, "rows", minimum=0))
        if self.rows and not self.files:
            raise ValueError(f"the window starting {self.start} has {self.rows} rows but no files")


@dataclass(frozen=True)
class LearnedRate:
    """Files per second and rows per file over the last `windows` windows."""

    files_per_second: float
    rows_per_file: float
    windows: int


def learned_rate(history: Iterable[WindowInput]) -> LearnedRate | None:
    """The arrival rate of the last windows, or None when they saw no file or no row.

    With None there is nothing to plan from: the window runs as one batch once its input is
    final (and its files and rows then count for the next window's rate).
    """
    recent = sorted(history, key=lambda w: w.start)[-RECENT_WINDOWS:]
    files = sum(w.files for w in recent)
    rows = sum(w.rows for w in recent)
    if not files or not rows:
        return None
    return LearnedRate(
        files_per_second=files / sum((w.end - w.start).total_seconds() for w in recent),
        rows_per_file=rows / files,
        windows=len(recent),
    )
