"""One DAG run per query window, started as the window opens.

Airflow's interval timetables run a data interval after it ends; an intermittent query instead
runs its batches *during* the window and must merge by the window's end (the deadline), so each
run's `run_after` is its window's start.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow.timetables.base import DagRunInfo, DataInterval, Timetable
from airflow.utils.types import DagRunType
from pendulum import UTC, DateTime, instance

from airflow_iqp.streams.assign import ORIGIN, window_start

if TYPE_CHECKING:
    from airflow.timetables.base import TimeRestriction


def _aware(at: datetime) -> DateTime:
    """Pendulum in UTC; a naive datetime is taken to be UTC already."""
    return instance(at, tz=UTC).in_timezone(UTC)


class WindowTimetable(Timetable):
    """Windows [origin + k*window, origin + (k+1)*window), each run starting when its window opens."""

    def __init__(self, window: timedelta, origin: datetime = ORIGIN) -> None:
        if window <= timedelta(0):
            raise ValueError(f"window must be positive, got {window}")
        self.window = window
        self.origin = _aware(origin)
        self.description = f"One run per {window} window, starting as the window opens"

    @property
    def summary(self) -> str:
        """Shown in the UI's schedule column."""
        return f"windows of {self.window}"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, WindowTimetable):
            return NotImplemented
        return (self.window, self.origin) == (other.window, other.origin)

    def __hash__(self) -> int:
        return hash((self.window, self.origin))

    def window_containing(self, at: datetime) -> DataInterval:
        """The window `at` falls in (a window includes its start, not its end)."""
        start = _aware(window_start(_aware(at), self.window, self.origin))
        return DataInterval(start=start, end=start + self.window)

    def _first_start_at_or_after(self, at: datetime) -> DateTime:
        window = self.window_containing(at)
        return window.start if window.start == at else window.end

    def infer_manual_data_interval(self, *, run_after: DateTime) -> DataInterval:
        """A manual run processes the window its run_after falls in."""
        return self.window_containing(run_after)

    def next_dagrun_info(
        self,
        *,
        last_automated_data_interval: DataInterval | None,
        restriction: TimeRestriction,
    ) -> DagRunInfo | None:
        """The next window to start, aligned to the origin; a missed window is skipped unless catchup is on."""
        candidates: list[DateTime] = []
        if last_automated_data_interval is not None:
            # Aligned again in case the window changed since the last run.
            candidates.append(self._first_start_at_or_after(last_automated_data_interval.end))
        elif restriction.earliest is None and restriction.catchup:
            return None  # nothing to catch up from
        if restriction.earliest is not None:
            candidates.append(self._first_start_at_or_after(restriction.earliest))
        if not restriction.catchup:
            # Missed windows are skipped, but the open one still has time left to run in.
            candidates.append(self.window_containing(DateTime.now(UTC)).start)
        start = max(candidates)
        if restriction.latest is not None and start > restriction.latest:
            return None
        return DagRunInfo(run_after=start, data_interval=DataInterval(start, start + self.window))

    def generate_run_id(
        self,
        *,
        run_type: DagRunType,
        run_after: DateTime,
        data_interval: DataInterval | None,
        **extra: Any,
    ) -> str:
        """Name the window; a manual run also names its trigger time, so it can repeat a window."""
        window = data_interval or self.window_containing(run_after)
        suffix = f"window_{window.start.isoformat()}_{window.end.isoformat()}"
        if run_type == DagRunType.MANUAL:
            suffix += f"_at_{run_after.isoformat()}"
        return run_type.generate_run_id(suffix=suffix)

    def serialize(self) -> dict[str, Any]:
        """Plain values for the serialized DAG."""
        return {"window_seconds": self.window.total_seconds(), "origin": self.origin.isoformat()}

    @classmethod
    def deserialize(cls, data: dict[str, Any]) -> WindowTimetable:
        """The timetable `serialize` described."""
        return cls(timedelta(seconds=data["window_seconds"]), datetime.fromisoformat(data["origin"]))
