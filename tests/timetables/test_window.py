"""WindowTimetable, called the way Airflow's scheduler calls it, without a scheduler."""

from __future__ import annotations

from datetime import datetime, timedelta

import pendulum
import pytest
from airflow.timetables.base import DagRunInfo, DataInterval, TimeRestriction
from airflow.utils.types import DagRunType

from airflow_iqp.timetables import WindowTimetable

FIVE_MINUTES = timedelta(minutes=5)
NOW = pendulum.datetime(2026, 11, 22, 10, 7, 30)


def at(hour: int, minute: int, second: int = 0) -> pendulum.DateTime:
    return pendulum.datetime(2026, 11, 22, hour, minute, second)


def window(start: pendulum.DateTime, length: timedelta = FIVE_MINUTES) -> DagRunInfo:
    return DagRunInfo(run_after=start, data_interval=DataInterval(start, start + length))


@pytest.fixture
def timetable() -> WindowTimetable:
    return WindowTimetable(FIVE_MINUTES)


@pytest.fixture(autouse=True)
def frozen_now(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pendulum.DateTime, "now", classmethod(lambda cls, tz=None: NOW))


def test_windows_are_aligned_to_the_origin_and_include_only_their_start(timetable: WindowTimetable) -> None:
    assert timetable.window_containing(at(10, 3)) == DataInterval(at(10, 0), at(10, 5))
    assert timetable.window_containing(at(10, 5)) == DataInterval(at(10, 5), at(10, 10))
    shifted = WindowTimetable(FIVE_MINUTES, origin=datetime(2000, 1, 1, 0, 2, tzinfo=pendulum.UTC))
    assert shifted.window_containing(at(10, 3)) == DataInterval(at(10, 2), at(10, 7))
    before_origin = pendulum.datetime(1999, 12, 31, 23, 58)
    assert timetable.window_containing(before_origin).start == pendulum.datetime(1999, 12, 31, 23, 55)


def test_first_run_starts_at_the_first_window_opening_after_start_date(timetable: WindowTimetable) -> None:
    restriction = TimeRestriction(earliest=at(9, 3), latest=None, catchup=True)
    info = timetable.next_dagrun_info(last_automated_data_interval=None, restriction=restriction)
    assert info == window(at(9, 5))
    assert info is not None
    assert info.data_interval is not None
    assert info.run_after == info.data_interval.start  # runs during its window, not after it


def test_start_date_on_a_window_boundary_is_that_window(timetable: WindowTimetable) -> None:
    restriction = TimeRestriction(earliest=at(9, 5), latest=None, catchup=True)
    assert timetable.next_dagrun_info(last_automated_data_interval=None, restriction=restriction) == window(at(9, 5))


def test_catchup_runs_every_window_in_turn(timetable: WindowTimetable) -> None:
    restriction = TimeRestriction(earliest=at(9, 0), latest=None, catchup=True)
    last = DataInterval(at(9, 5), at(9, 10))
    assert timetable.next_dagrun_info(last_automated_data_interval=last, restriction=restriction) == window(at(9, 10))


def test_without_catchup_the_open_window_is_next(timetable: WindowTimetable) -> None:
    restriction = TimeRestriction(earliest=at(9, 0), latest=None, catchup=False)
    assert timetable.next_dagrun_info(last_automated_data_interval=None, restriction=restriction) == window(at(10, 5))
    last = DataInterval(at(9, 5), at(9, 10))
    assert timetable.next_dagrun_info(last_automated_data_interval=last, restriction=restriction) == window(at(10, 5))


def test_without_catchup_a_future_start_date_wins(timetable: WindowTimetable) -> None:
    restriction = TimeRestriction(earliest=at(11, 1), latest=None, catchup=False)
    assert timetable.next_dagrun_info(last_automated_data_interval=None, restriction=restriction) == window(at(11, 5))


def test_without_catchup_or_start_date_the_open_window_runs(timetable: WindowTimetable) -> None:
    restriction = TimeRestriction(earliest=None, latest=None, catchup=False)
    assert timetable.next_dagrun_info(last_automated_data_interval=None, restriction=restriction) == window(at(10, 5))


def test_nothing_to_catch_up_from_without_start_date(timetable: WindowTimetable) -> None:
    restriction = TimeRestriction(earliest=None, latest=None, catchup=True)
    assert timetable.next_dagrun_info(last_automated_data_interval=None, restriction=restriction) is None


def test_end_date_is_inclusive_of_a_window_start(timetable: WindowTimetable) -> None:
    last = DataInterval(at(9, 5), at(9, 10))
    inclusive = TimeRestriction(earliest=at(9, 0), latest=at(9, 10), catchup=True)
    assert timetable.next_dagrun_info(last_automated_data_interval=last, restriction=inclusive) == window(at(9, 10))
    over = TimeRestriction(earliest=at(9, 0), latest=at(9, 9), catchup=True)
    assert timetable.next_dagrun_info(last_automated_data_interval=last, restriction=over) is None


def test_a_changed_window_realigns_after_the_last_run() -> None:
    ten_minutes = WindowTimetable(timedelta(minutes=10))
    last = DataInterval(at(9, 0), at(9, 5))  # from when the DAG had 5-minute windows
    restriction = TimeRestriction(earliest=at(9, 0), latest=None, catchup=True)
    info = ten_minutes.next_dagrun_info(last_automated_data_interval=last, restriction=restriction)
    assert info == window(at(9, 10), timedelta(minutes=10))


def test_a_manual_run_covers_the_window_it_was_triggered_in(timetable: WindowTimetable) -> None:
    assert timetable.infer_manual_data_interval(run_after=at(10, 7, 30)) == DataInterval(at(10, 5), at(10, 10))


def test_run_ids_name_the_window(timetable: WindowTimetable) -> None:
    scheduled = timetable.generate_run_id(
        run_type=DagRunType.SCHEDULED, run_after=at(10, 0), data_interval=DataInterval(at(10, 0), at(10, 5))
    )
    assert scheduled == "scheduled__window_2026-11-22T10:00:00+00:00_2026-11-22T10:05:00+00:00"
    manual = timetable.generate_run_id(run_type=DagRunType.MANUAL, run_after=at(10, 3), data_interval=None)
    assert manual == ("manual__window_2026-11-22T10:00:00+00:00_2026-11-22T10:05:00+00:00_at_2026-11-22T10:03:00+00:00")


def test_serialization_round_trips(timetable: WindowTimetable) -> None:
    shifted = WindowTimetable(timedelta(seconds=90), origin=datetime(2026, 1, 1, 0, 0, 30, tzinfo=pendulum.UTC))
    for original in (timetable, shifted):
        data = original.serialize()
        assert WindowTimetable.deserialize(data) == original
        assert WindowTimetable.deserialize(data).serialize() == data
    assert timetable.serialize() == {"window_seconds": 300.0, "origin": "2000-01-01T00:00:00+00:00"}


def test_summary_and_description_say_the_window(timetable: WindowTimetable) -> None:
    assert timetable.summary == "windows of 0:05:00"
    assert "0:05:00" in timetable.description


@pytest.mark.parametrize("bad", [timedelta(0), timedelta(minutes=-5)])
def test_window_must_be_positive(bad: timedelta) -> None:
    with pytest.raises(ValueError, match="positive"):
        WindowTimetable(bad)
