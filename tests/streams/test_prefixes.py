"""Which directories a path stream's walk lists for a window: every file of the window, and
(for Hive layouts) nothing of other spans. The walk is simulated over a set of paths, as
streams/listing.py does it over a filesystem.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_iqp.streams.files import is_data
from airflow_iqp.streams.pattern import compile_pattern
from airflow_iqp.streams.prefixes import Layout, Verdict, layout_of

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

T0 = datetime(2026, 1, 30, tzinfo=UTC)  # a month's end inside the generated range


def walk(layout: Layout, paths: Iterable[str], start: datetime, end: datetime) -> tuple[set[str], int]:
    """The files a walk lists, and how many directories it lists (one `ls` each)."""
    tree: dict[str, set[str]] = {}
    files = set(paths)
    for path in files:
        parts = path.split("/")
        for depth in range(len(parts)):
            tree.setdefault("/".join(parts[:depth]), set()).add(parts[depth])
    listed: set[str] = set()
    calls = 0
    pending: list[tuple[str, tuple[str, ...]]] = [("", ())]
    while pending:
        directory, chain = pending.pop()
        calls += 1
        for name in tree.get(directory, ()):
            path = f"{directory}/{name}" if directory else name
            if path in files:
                listed.add(path)
            elif is_data(name):
                verdict, reached = layout.step(chain, name, start, end)
                if verdict is Verdict.TAKE:
                    listed |= {f for f in files if f.startswith(f"{path}/")}
                elif verdict is Verdict.DESCEND:
                    pending.append((path, reached))
    return listed, calls


def hive(at: datetime, padded: bool, index: int) -> str:
    hour = f"{at.hour:02d}" if padded else str(at.hour)
    return f"dt={at:%Y-%m-%d}/hour={hour}/part-{index}.parquet"


def ymd(at: datetime, padded: bool, index: int) -> str:
    month, day = (f"{at.month:02d}", f"{at.day:02d}") if padded else (str(at.month), str(at.day))
    return f"year={at.year}/month={month}/day={day}/{index}.json"


def ts(at: datetime, padded: bool, index: int) -> str:
    return f"ts={at.isoformat().replace(':', '%3A')}/{index}.csv"


LAYOUTS: dict[str, tuple[str, Callable[[datetime, bool, int], str], timedelta]] = {
    "hive": ("dt={date}/hour={hour}", hive, timedelta(hours=1)),
    "ymd": ("year={year}/month={month}/day={day}", ymd, timedelta(days=1)),
    "ts": ("ts={ts}", ts, timedelta(0)),
}
times = st.datetimes(min_value=datetime(2026, 1, 25), max_value=datetime(2026, 2, 5)).map(
    lambda at: at.replace(microsecond=0, tzinfo=UTC)
)


@settings(max_examples=150, deadline=None)
@given(
    kind=st.sampled_from(sorted(LAYOUTS)),
    landed=st.lists(st.tuples(times, st.booleans(), st.sampled_from(["", "eu/", "_tmp/", "x/"])), max_size=40),
    offset_minutes=st.integers(min_value=-3 * 24 * 60, max_value=3 * 24 * 60),
    window=st.sampled_from([timedelta(minutes=10), timedelta(hours=1), timedelta(hours=7), timedelta(days=1)]),
)
def test_the_walk_lists_every_file_of_the_window_and_no_other_span(
    kind: str,
    landed: list[tuple[datetime, bool, str]],
    offset_minutes: int,
    window: timedelta,
) -> None:
    template, path_of, span = LAYOUTS[kind]
    pattern = compile_pattern(template)
    layout = layout_of(template)
    assert layout is not None
    start = T0 + timedelta(minutes=offset_minutes)
    end = start + window
    paths = {f"{under}{path_of(at, padded, i)}" for i, (at, padded, under) in enumerate(landed)}

    listed, _ = walk(layout, paths, start, end)

    in_window = {p for p in paths if is_data(p) and (at := pattern.event_time(p)) is not None and start <= at < end}
    assert in_window <= listed
    assert not {p for p in listed if p.startswith("_tmp/")}  # hidden: neither data nor a marker of data
    for path in listed:  # nothing listed from a span (an hour, a day, a point) that misses the window
        at = pattern.event_time(path)
        assert at is not None
        if kind == "ts":
            assert start <= at < end
        else:
            first = at.replace(minute=0, second=0) if kind == "hive" else at.replace(hour=0, minute=0, second=0)
            assert first < end
            assert first + span > start


def test_a_year_of_hourly_partitions_lists_a_handful_of_directories_for_one_window() -> None:
    layout = layout_of("dt={date}/hour={hour}")
    assert layout is not None
    hours = [datetime(2025, 3, 1, tzinfo=UTC) + timedelta(hours=h) for h in range(365 * 24)]
    paths = {hive(at, padded=True, index=i) for i, at in enumerate(hours)}
    start = datetime(2025, 9, 1, 8, 10, tzinfo=UTC)

    listed, calls = walk(layout, paths, start, start + timedelta(minutes=10))

    assert listed == {
        hive(datetime(2025, 9, 1, 8, tzinfo=UTC), padded=True, index=hours.index(start.replace(minute=0)))
    }
    assert calls == 2  # the stream's directory, then dt=2025-09-01; hour=08 is taken whole


@pytest.mark.parametrize(
    ("chain", "name", "verdict"),
    [
        ((), "dt=2026-03-04", Verdict.DESCEND),
        ((), "dt=2026-03-05", Verdict.SKIP),
        (("dt=2026-03-04",), "hour=08", Verdict.TAKE),
        (("dt=2026-03-04",), "hour=8", Verdict.TAKE),
        (("dt=2026-03-04",), "hour=09", Verdict.SKIP),
        (("dt=2026-03-04",), "hour=99", Verdict.SKIP),  # no valid time: its files are unassigned either way
        ((), "dt=2026-13-04", Verdict.SKIP),
        ((), "region=eu", Verdict.DESCEND),  # the template may start below it
        (("dt=2026-03-04",), "late", Verdict.DESCEND),
    ],
)
def test_a_step_decides_by_the_span_a_directory_names(chain: tuple[str, ...], name: str, verdict: Verdict) -> None:
    layout = layout_of("dt={date}/hour={hour}")
    assert layout is not None
    start = datetime(2026, 3, 4, 8, 20, tzinfo=UTC)
    assert layout.step(chain, name, start, start + timedelta(minutes=10))[0] is verdict


def test_fields_out_of_order_name_no_span_until_the_anchor_comes() -> None:
    layout = layout_of("{day}/{month}/{year}")
    assert layout is not None
    start = datetime(2026, 3, 4, tzinfo=UTC)
    assert layout.step((), "17", start, start + timedelta(days=1))[0] is Verdict.DESCEND
    assert layout.step(("17", "3"), "2026", start, start + timedelta(days=1))[0] is Verdict.SKIP
    assert layout.step(("4", "3"), "2026", start, start + timedelta(days=1))[0] is Verdict.TAKE


def test_a_regex_names_no_directories() -> None:
    assert layout_of(r"(?P<date>\d{4}-\d{2}-\d{2})") is None
