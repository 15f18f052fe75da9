"""Event time from paths: templates and regexes, what they match, and what they refuse."""

from __future__ import annotations

import calendar
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_iqp.exceptions import InvalidDeclaration
from airflow_iqp.streams.pattern import compile_pattern

moments = st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(2999, 12, 31), timezones=st.just(UTC))


@pytest.mark.parametrize(
    ("pattern", "relative", "expected"),
    [
        ("dt={date}/hour={hour}", "dt=2026-01-01/hour=10/part-0.parquet", datetime(2026, 1, 1, 10, tzinfo=UTC)),
        ("dt={date}/hour={hour}", "region=eu/dt=2026-01-01/hour=7/x.parquet", datetime(2026, 1, 1, 7, tzinfo=UTC)),
        ("dt={date}", "dt=2026-03-04/part.json", datetime(2026, 3, 4, tzinfo=UTC)),
        ("{year}/{month}/{day}", "2026/02/28/f.csv", datetime(2026, 2, 28, tzinfo=UTC)),
        ("{year}/{month}", "2026/11/f.csv", datetime(2026, 11, 1, tzinfo=UTC)),
        ("events-{epoch}.json", "events-1767225600.json", datetime(2026, 1, 1, tzinfo=UTC)),
        ("ts={ts}", "ts=2026-01-01T10:30:00Z/p.parquet", datetime(2026, 1, 1, 10, 30, tzinfo=UTC)),
        ("ts={ts}", "ts=2026-01-01 10%3A30%3A00/p.parquet", datetime(2026, 1, 1, 10, 30, tzinfo=UTC)),
        ("at={datetime}", "at=2026-01-01T12:00:00+02:00/p", datetime(2026, 1, 1, 10, tzinfo=UTC)),
        (r"^(?P<date>\d{4}-\d{2}-\d{2})_(?P<hour>\d\d)", "2026-01-01_23.parquet", datetime(2026, 1, 1, 23, tzinfo=UTC)),
        (
            r"(?P<date>\d{4}-\d{2}-\d{2})(?:/h(?P<hour>\d+))?",
            "2026-01-02/x.parquet",
            datetime(2026, 1, 2, tzinfo=UTC),
        ),
    ],
)
def test_event_time(pattern: str, relative: str, expected: datetime) -> None:
    assert compile_pattern(pattern).event_time(relative) == expected


@pytest.mark.parametrize(
    ("pattern", "relative"),
    [
        ("dt={date}/hour={hour}", "part-0.parquet"),  # no partition at all
        ("dt={date}/hour={hour}", "dt=2026-01-01/part-0.parquet"),  # no hour
        ("dt={date}/hour={hour}", "dt=2026-01-01/hour=100/part.parquet"),  # three digits are no hour
        ("dt={date}/hour={hour}", "dt=2026-01-01/hour=25/part.parquet"),  # no valid time
        ("dt={date}", "xdt=2026-01-01/part.parquet"),  # a template starts at a path component
        ("{year}/{month}/{day}", "2026/02/30/f.csv"),
        ("ts={ts}", "ts=yesterday/p.parquet"),
    ],
)
def test_no_event_time_when_the_path_does_not_fit(pattern: str, relative: str) -> None:
    assert compile_pattern(pattern).event_time(relative) is None


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("", "pattern is empty"),
        ("dt={date:%Y}", "without a format or conversion"),
        ("dt={date}/d={date}", "names {date} twice"),
        ("dt={date", "not a valid template"),
        ("{year}/{hour}", "without gaps"),
        ("{date}/{minute}", "without gaps"),
        ("{date}/{year}", "without gaps"),
        ("{epoch}/{hour}", "epoch names a time on its own"),
        (r"(?P<when>\d+)", "unknown named groups ['when']"),
        (r"(?P<hour>\d+)", "names no usable time"),
    ],
)
def test_refuses_patterns_that_name_no_time(pattern: str, message: str) -> None:
    with pytest.raises(InvalidDeclaration) as raised:
        compile_pattern(pattern)
    assert message in str(raised.value)


@given(moments)
def test_hive_partition_names_its_hour(at: datetime) -> None:
    relative = f"dt={at:%Y-%m-%d}/hour={at.hour}/part-{at.microsecond}.parquet"
    expected = at.replace(minute=0, second=0, microsecond=0)
    assert compile_pattern("dt={date}/hour={hour}").event_time(relative) == expected


@given(moments)
def test_nested_fields_truncate_to_their_precision(at: datetime) -> None:
    relative = f"{at:%Y}/{at:%m}/{at:%d}/{at:%H}/{at:%M}/{at:%S}.csv"
    pattern = compile_pattern("{year}/{month}/{day}/{hour}/{minute}/{second}")
    assert pattern.event_time(relative) == at.replace(microsecond=0)
    assert compile_pattern("{year}/{month}").event_time(relative) == at.replace(
        day=1, hour=0, minute=0, second=0, microsecond=0
    )


@given(moments)
def test_epoch_and_iso_timestamps(at: datetime) -> None:
    seconds = calendar.timegm(at.utctimetuple())
    assert compile_pattern("e={epoch}").event_time(f"e={seconds}.{at.microsecond:06d}/x") == at
    assert compile_pattern("e={epoch}").event_time(f"e={seconds}/x") == at.replace(microsecond=0)
    assert compile_pattern("ts={ts}").event_time(f"ts={at.isoformat()}") == at
    shifted = at.astimezone(timezone(timedelta(hours=-5)))
    assert compile_pattern("ts={ts}").event_time(f"ts={shifted.isoformat()}") == at
