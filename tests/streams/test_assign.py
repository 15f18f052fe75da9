"""Window assignment and one window's input: by arrival or by path, aligned across streams."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_iqp.streams.assign import file_time, select_window, window_start, window_start_for
from airflow_iqp.streams.files import DataFile, StreamListing
from airflow_iqp.streams.spec import FileStream
from tests.oracle import hive_hour, units_in, window_of
from tests.streams import ORIGIN, T0, data_file

MINUTE = timedelta(minutes=1)
TEN = timedelta(minutes=10)
US = timedelta(microseconds=1)
ARRIVAL = FileStream("/data/sales")
HIVE = FileStream("/data/sales", window_by="path", pattern="dt={date}/hour={hour}")


def listing(*files: DataFile, markers: tuple[DataFile, ...] = ()) -> StreamListing:
    return StreamListing(stream=files[0].stream if files else "sales", files=files, markers=markers)


def select(streams, listings, start=T0, window=TEN, now=T0):
    return select_window(streams, listings, start=start, window=window, origin=ORIGIN, now=now)


def test_window_start_is_half_open_and_exact() -> None:
    assert window_start(T0, TEN, ORIGIN) == T0
    assert window_start(T0 + TEN - US, TEN, ORIGIN) == T0
    assert window_start(T0 + TEN, TEN, ORIGIN) == T0 + TEN
    assert window_start(T0 - US, TEN, ORIGIN) == T0 - TEN
    odd_origin = ORIGIN + timedelta(minutes=3)
    assert window_start(T0, TEN, odd_origin) == T0 - timedelta(minutes=7)
    plus_two = timezone(timedelta(hours=2))
    assert window_start(datetime(2026, 1, 1, 2, 5, tzinfo=plus_two), TEN, ORIGIN) == T0


def test_window_start_refuses_naive_times_and_empty_windows() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        window_start(datetime(2026, 1, 1), TEN, ORIGIN)
    with pytest.raises(ValueError, match="window must be positive"):
        window_start(T0, timedelta(0), ORIGIN)


def test_arrival_uses_modification_time_path_uses_event_time() -> None:
    file = data_file("dt=2026-01-01/hour=03/part-0.parquet", timedelta(hours=5, minutes=7))
    assert file_time(file, ARRIVAL) == file.modified
    assert window_start_for(file, ARRIVAL, TEN, ORIGIN) == T0 + timedelta(hours=5)
    assert window_start_for(file, HIVE, TEN, ORIGIN) == T0 + timedelta(hours=3)
    assert window_start_for(data_file("part-0.parquet", T0), HIVE, TEN, ORIGIN) is None


def test_one_stream_by_arrival() -> None:
    files = [
        data_file("b.parquet", MINUTE),
        data_file("a.parquet", MINUTE),  # same arrival: path breaks the tie
        data_file("first.parquet", timedelta(0)),  # a window includes its start
        data_file("last.parquet", TEN - US),
        data_file("next.parquet", TEN),  # ... and not its end
        data_file("old.parquet", -US),
    ]
    selection = select({"sales": ARRIVAL}, {"sales": listing(*files)}, now=T0 + TEN)
    assert [unit.relative for unit in selection.units] == ["first.parquet", "a.parquet", "b.parquet", "last.parquet"]
    assert [unit.relative for unit in selection.later] == ["next.parquet"]
    assert [unit.relative for unit in selection.earlier] == ["old.parquet"]
    assert all(len(unit.files) == 1 and unit.window_start == T0 for unit in selection.units)
    assert (selection.start, selection.end, selection.final, selection.final_at) == (T0, T0 + TEN, True, T0 + TEN)
    assert selection.unmatched == selection.unassigned == ()


def test_by_path_late_arrivals_stay_in_their_partition_and_strays_are_reported() -> None:
    hour = timedelta(hours=1)
    files = [
        data_file("dt=2026-01-01/hour=0/part-b.parquet", timedelta(hours=5)),
        data_file("dt=2026-01-01/hour=0/part-a.parquet", timedelta(minutes=30)),
        data_file("dt=2026-01-01/hour=1/part-c.parquet", timedelta(minutes=50)),
        data_file("stray.parquet", timedelta(minutes=20)),
    ]
    selection = select({"sales": HIVE}, {"sales": listing(*files)}, window=hour, now=T0 + timedelta(hours=6))
    assert [unit.relative for unit in selection.units] == [
        "dt=2026-01-01/hour=0/part-a.parquet",
        "dt=2026-01-01/hour=0/part-b.parquet",
    ]
    assert [unit.relative for unit in selection.later] == ["dt=2026-01-01/hour=1/part-c.parquet"]
    assert [file.relative for file in selection.unassigned] == ["stray.parquet"]


@pytest.mark.parametrize(
    ("lateness", "now", "final"),
    [
        (timedelta(0), T0 + TEN - US, False),
        (timedelta(0), T0 + TEN, True),
        (timedelta(minutes=5), T0 + TEN, False),
        (timedelta(minutes=5), T0 + TEN + timedelta(minutes=5), True),
    ],
)
def test_final_once_lateness_has_passed(lateness: timedelta, now: datetime, final: bool) -> None:
    stream = FileStream("/data/sales", lateness=lateness)
    selection = select({"sales": stream}, {"sales": listing()}, now=now)
    assert selection.final is final
    assert selection.final_at == T0 + TEN + lateness
    assert selection.units == ()


def test_close_marker_in_the_partition_closes_a_path_window() -> None:
    hour = timedelta(hours=1)
    stream = FileStream("/d", window_by="path", pattern="dt={date}/hour={hour}", lateness=hour, close_marker="_SUCCESS")
    files = listing(data_file("dt=2026-01-01/hour=0/p.parquet", MINUTE))
    other_hour = data_file("dt=2026-01-01/hour=1/_SUCCESS", MINUTE)
    mine = data_file("dt=2026-01-01/hour=0/_SUCCESS", MINUTE)
    other_name = data_file("dt=2026-01-01/hour=0/_DONE", MINUTE)
    for markers, final in [((), False), ((other_hour,), False), ((other_name,), False), ((other_hour, mine), True)]:
        listings = {"sales": StreamListing("sales", files.files, markers)}
        assert select({"sales": stream}, listings, window=hour, now=T0 + MINUTE).final is final


def test_close_marker_modified_inside_closes_an_arrival_window() -> None:
    stream = FileStream("/d", lateness=TEN, close_marker="_SUCCESS")
    for modified, final in [(TEN - US, True), (timedelta(0), True), (TEN, False), (-US, False)]:
        listings = {"sales": listing(markers=(data_file("_SUCCESS", modified),))}
        assert select({"sales": stream}, listings, now=T0 + TEN).final is final


def test_streams_are_aligned_by_relative_path() -> None:
    streams = {"orders": ARRIVAL, "lineitem": FileStream("/data/lineitem")}
    orders = [data_file("p1.parquet", MINUTE, "orders"), data_file("p2.parquet", 2 * MINUTE, "orders")]
    lineitem = [
        data_file("p1.parquet", 3 * MINUTE, "lineitem"),
        data_file("p2.parquet", TEN + MINUTE, "lineitem"),  # its unit belongs to the next window
        data_file("p3.parquet", MINUTE, "lineitem"),  # no order file yet
    ]
    listings = {"orders": listing(*orders), "lineitem": listing(*lineitem)}
    selection = select(streams, listings)
    (unit,) = selection.units
    assert unit.relative == "p1.parquet"
    assert [file.stream for file in unit.files] == ["lineitem", "orders"]
    assert unit.arrived == T0 + 3 * MINUTE
    (later,) = selection.later
    assert (later.relative, later.window_start) == ("p2.parquet", T0 + TEN)
    assert [(file.stream, file.relative) for file in selection.unmatched] == [("lineitem", "p3.parquet")]
    assert selection.final is False


def test_a_partner_of_an_unassignable_file_waits_unmatched() -> None:
    streams = {"orders": HIVE, "lineitem": ARRIVAL}
    listings = {
        "orders": listing(data_file("part-0.parquet", MINUTE, "orders")),
        "lineitem": listing(data_file("part-0.parquet", MINUTE, "lineitem")),
    }
    selection = select(streams, listings)
    assert [file.stream for file in selection.unassigned] == ["orders"]
    assert [file.stream for file in selection.unmatched] == ["lineitem"]
    assert selection.units == ()


def test_every_stream_must_be_final() -> None:
    streams = {
        "orders": FileStream("/o", lateness=TEN, close_marker="_SUCCESS"),
        "lineitem": FileStream("/l", lateness=2 * TEN),
    }
    marker = data_file("_SUCCESS", MINUTE, "orders")
    listings = {"orders": listing(markers=(marker,)), "lineitem": StreamListing("lineitem", ())}
    assert select(streams, listings, now=T0 + 2 * TEN).final is False
    assert select(streams, listings, now=T0 + 3 * TEN).final is True
    assert select(streams, listings, now=T0 + 3 * TEN).final_at == T0 + 3 * TEN


def test_refuses_mismatched_listings_and_unaligned_starts() -> None:
    with pytest.raises(ValueError, match="one listing per stream"):
        select({"sales": ARRIVAL}, {"other": listing()})
    with pytest.raises(ValueError, match="no window start"):
        select({"sales": ARRIVAL}, {"sales": listing()}, start=T0 + MINUTE)
    with pytest.raises(ValueError, match="now must be timezone-aware"):
        select({"sales": ARRIVAL}, {"sales": listing()}, now=datetime(2026, 1, 1))


# Properties over random listings: a few streams, a small pool of relative paths (so that some
# align and some do not), modification times on and around window boundaries.

WINDOWS = st.sampled_from([TEN, timedelta(hours=1), timedelta(minutes=90)])
RELATIVES = [f"dt=2026-01-01/hour={hour}/part-{n}.parquet" for hour in range(4) for n in range(3)] + [
    "stray-0.parquet",
    "stray-1.parquet",
]
STREAM_RULES = st.sampled_from(
    [
        ARRIVAL,
        HIVE,
        FileStream("/d", lateness=TEN),
        FileStream("/d", window_by="path", pattern=r"^dt=(?P<date>[\d-]+)/hour=(?P<hour>\d+)/"),
    ]
)


@st.composite
def query_input(draw: st.DrawFn) -> tuple[dict[str, FileStream], dict[str, StreamListing], timedelta]:
    window = draw(WINDOWS)
    names = draw(st.lists(st.sampled_from(["orders", "lineitem", "parts"]), min_size=1, max_size=3, unique=True))
    streams: dict[str, FileStream] = {}
    listings: dict[str, StreamListing] = {}
    for name in names:
        streams[name] = draw(STREAM_RULES)
        relatives = draw(st.lists(st.sampled_from(RELATIVES), unique=True, max_size=10))
        files = []
        for relative in relatives:
            boundary = window * draw(st.integers(-2, 8))
            offset = draw(st.sampled_from([-US, timedelta(0), US]) | st.timedeltas(timedelta(0), window))
            files.append(data_file(relative, boundary + offset, name))
        listings[name] = listing(*sorted(files, key=lambda f: (f.modified, f.relative)))
    return streams, listings, window


def times_as_made(
    streams: dict[str, FileStream], listings: dict[str, StreamListing]
) -> dict[str, dict[str, datetime | None]]:
    """Each file's time as the test made it: the modification time it gave the file, or the hour
    it wrote into the path (every path rule here reads `dt=.../hour=...`)."""
    return {
        name: {
            f.relative: f.modified if stream.window_by == "arrival" else hive_hour(f.relative)
            for f in listings[name].files
        }
        for name, stream in streams.items()
    }


def all_files(listings: dict[str, StreamListing]) -> Counter[DataFile]:
    return Counter(file for one in listings.values() for file in one.files)


@settings(max_examples=200)
@given(query_input(), st.integers(-3, 9))
def test_every_file_is_in_exactly_one_place(data, k: int) -> None:
    streams, listings, window = data
    start = window_of(T0, window, ORIGIN) + k * window
    selection = select(streams, listings, start=start, window=window)
    placed: Counter[DataFile] = Counter(selection.unmatched) + Counter(selection.unassigned)
    for unit in (*selection.units, *selection.earlier, *selection.later):
        placed.update(unit.files)
    assert placed == all_files(listings)


@settings(max_examples=200)
@given(query_input(), st.integers(-3, 9))
def test_units_are_aligned_and_belong_to_their_latest_member(data, k: int) -> None:
    streams, listings, window = data
    start = window_of(T0, window, ORIGIN) + k * window
    selection = select(streams, listings, start=start, window=window)
    expected = units_in(times_as_made(streams, listings), start, start + window)
    assert sorted(unit.relative for unit in selection.units) == expected, "the oracle's units of the window"
    for unit in selection.units:
        assert [file.stream for file in unit.files] == sorted(streams)
        assert {file.relative for file in unit.files} == {unit.relative}
        assert unit.window_start == start
        assert unit.arrived == max(file.modified for file in unit.files)
    assert all(unit.window_start < start for unit in selection.earlier)
    assert all(unit.window_start > start for unit in selection.later)
    order = [(unit.arrived, unit.relative) for unit in selection.units]
    assert order == sorted(order)
    for file in selection.unmatched:
        present = [name for name in streams if any(f.relative == file.relative for f in listings[name].files)]
        assert len(present) < len(streams) or any(u.relative == file.relative for u in selection.unassigned)


@settings(max_examples=100)
@given(query_input())
def test_each_unit_is_in_the_units_of_exactly_one_window(data) -> None:
    streams, listings, window = data
    first = window_of(T0, window, ORIGIN) - 4 * window  # before every generated time
    last = T0 + max(10 * window, timedelta(hours=5))  # after every generated time and event time
    starts = [first + k * window for k in range((last - first) // window + 1)]
    seen: Counter[str] = Counter()
    for start in starts:
        seen.update(unit.relative for unit in select(streams, listings, start=start, window=window).units)
    complete = select(streams, listings, start=starts[0], window=window)
    expected = {unit.relative for unit in (*complete.units, *complete.earlier, *complete.later)}
    assert set(seen) == expected
    assert all(count == 1 for count in seen.values())


@given(query_input(), st.timedeltas(timedelta(0), timedelta(hours=3)), st.timedeltas(timedelta(0), timedelta(hours=3)))
def test_finality_never_goes_back(data, first: timedelta, more: timedelta) -> None:
    streams, listings, window = data
    before = select(streams, listings, window=window, now=T0 + first)
    after = select(streams, listings, window=window, now=T0 + first + more)
    assert not before.final or after.final
    assert select(streams, listings, window=window, now=before.final_at).final
