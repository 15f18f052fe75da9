"""The `output=` template: checked when declared, rendered per window with UTC stamps, and the
prefix every window's result shares (the result Asset's URI)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from airflow_iqp.exceptions import InvalidDeclaration
from airflow_iqp.results.template import OutputTemplate, stamp

START = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)
END = START + timedelta(minutes=10)


def render(template: str, start: datetime = START, end: datetime = END) -> str:
    return OutputTemplate(template).render(dag_id="sales_dag", query="sales", window_start=start, window_end=end)


def test_every_field_is_filled_in() -> None:
    assert render("s3://bucket/{dag_id}/{query}/{window_start}-{window_end}") == (
        "s3://bucket/sales_dag/sales/20260301T100000-20260301T101000"
    )


def test_stamps_are_utc_whatever_zone_the_window_comes_in() -> None:
    east = timezone(timedelta(hours=5, minutes=30))
    assert render("/r/{window_start}", START.astimezone(east), END.astimezone(east)) == "/r/20260301T100000"
    assert stamp(START.astimezone(east)) == "20260301T100000"


def test_stamps_sort_by_time() -> None:
    times = [START + timedelta(hours=h) for h in (0, 5, 14, 30, 24 * 40)]
    assert sorted(stamp(t) for t in times) == [stamp(t) for t in times]


def test_a_naive_window_time_is_refused() -> None:
    with pytest.raises(ValueError, match="must be timezone-aware"):
        stamp(datetime(2026, 3, 1, 10, 0))  # naive on purpose


def test_a_trailing_slash_is_dropped() -> None:
    assert render("/r/{window_start}/") == "/r/20260301T100000"


def test_escaped_braces_stay_literal() -> None:
    assert render("/r/{{x}}/{window_start}") == "/r/{x}/20260301T100000"


@pytest.mark.parametrize(
    ("template", "collection"),
    [
        ("s3://bucket/results/{dag_id}/{window_start}", "s3://bucket/results/sales_dag"),
        ("/data/{query}/{window_end}/part", "/data/sales"),
        ("/data/{dag_id}/w={window_start}", "/data/sales_dag/w="),
        ("gs://bucket/{window_start}", "gs://bucket"),
    ],
)
def test_the_collection_is_everything_before_the_first_window_field(template: str, collection: str) -> None:
    assert OutputTemplate(template).collection(dag_id="sales_dag", query="sales") == collection
    assert render(template).startswith(collection)


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("/r/{dag_id}", r"must contain \{window_start\} or \{window_end\}"),
        ("s3://bucket/latest", r"must contain \{window_start\} or \{window_end\}"),
        ("r/{window_start}", "must be an absolute path or a URI"),
        ("./r/{window_start}", "must be an absolute path or a URI"),
        ("/r/{date}/{window_start}", r"unknown field\(s\) 'date'; use \{dag_id\}, \{query\}"),
        ("/r/{0}/{window_start}", r"unknown field\(s\) '0'"),
        ("/r/{window_start.year}", r"unknown field\(s\) 'window_start.year'"),
        ("   ", "output must be a path or URI template"),
    ],
)
def test_a_bad_template_is_refused_with_what_to_write(template: str, message: str) -> None:
    with pytest.raises(InvalidDeclaration, match=message):
        OutputTemplate(template)


def test_a_template_that_is_not_text_is_refused() -> None:
    with pytest.raises(InvalidDeclaration, match="output must be a path or URI template, got None"):
        OutputTemplate(None)  # type: ignore[arg-type]  # wrong on purpose
