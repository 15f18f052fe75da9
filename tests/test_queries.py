"""Query files: packaged examples by name, user files by path (relative to a base folder), the
optional header checked against the SQL, lookup errors, decomposability."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from airflow_iqp.queries import EXAMPLE_QUERIES, list_queries, load_query
from airflow_iqp.sql import decompose

if TYPE_CHECKING:
    from pathlib import Path

EXPECTED = ("q1", "q3", "q4", "q6", "q9", "q10", "q12", "q14", "q19", "cq1", "cq2", "cq3", "cq4")
STATIC = {"customer", "nation", "region", "part", "partsupp", "supplier"}


def test_every_expected_query_file_is_listed_in_order() -> None:
    assert list_queries() == EXPECTED


@pytest.mark.parametrize("name", EXPECTED)
def test_each_query_loads_with_streams_from_orders_lineitem_and_decomposes(name: str) -> None:
    query = load_query(name)
    assert query.name == name
    assert query.path == EXAMPLE_QUERIES / f"{name}.sql"
    assert set(query.streams) <= {"orders", "lineitem"}
    assert set(query.static_tables) <= STATIC
    decomposition = decompose(query.sql, query.streams)
    assert decomposition.streams == query.streams


def test_tpch_parameters_are_the_validation_ones() -> None:
    assert "interval '90' day" in load_query("q1").sql
    assert "'BUILDING'" in load_query("q3").sql
    assert "limit 10" in load_query("q3").sql
    assert "limit 20" in load_query("q10").sql
    assert "l_quantity < 24" in load_query("q6").sql
    assert "0.06" in load_query("q6").sql
    assert "%green%" in load_query("q9").sql
    assert all(b in load_query("q19").sql for b in ("Brand#12", "Brand#23", "Brand#34"))


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / f"{name}.sql"
    path.write_text(text)
    return path


def test_load_by_explicit_path_and_relative_to_a_base_folder(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "mine",
        "-- name: mine\n-- streams: orders\n-- static: customer\n"
        "select count(*) from orders join customer on o_custkey = c_custkey\n",
    )
    by_path = load_query(path)
    assert by_path.streams == ("orders",)
    assert by_path.static_tables == ("customer",)
    assert by_path.tables == {"orders", "customer"}
    assert load_query("mine.sql", base_dir=tmp_path) == by_path
    assert list_queries(tmp_path) == ("mine",)


def test_a_file_without_a_header_is_plain_sql_whose_streams_are_declared_elsewhere(tmp_path: Path) -> None:
    query = load_query(_write(tmp_path, "plain", "SELECT category, count(*) AS n FROM sales GROUP BY category\n"))
    assert query.header is None
    assert query.tables == {"sales"}
    with pytest.raises(ValueError, match="no `-- streams:` header"):
        _ = query.streams


def test_a_relative_path_that_does_not_exist_names_where_it_was_looked_for(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=f"query file {tmp_path}/nope.sql does not exist"):
        load_query("nope.sql", base_dir=tmp_path)


def test_unknown_query_lists_the_known_ones() -> None:
    with pytest.raises(ValueError, match="unknown query 'q2'.*q1, q3"):
        load_query("q2")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("-- name: bad\n-- streams: orders\nselect count(*) from orders\n", "header without static"),
        ("-- name: bad\n-- streams: orders\n-- streams: orders\n-- static:\nselect 1\n", "repeated"),
        ("-- name: other\n-- streams: orders\n-- static:\nselect count(*) from orders\n", "differs from the file"),
        ("-- name: bad\n-- streams: orders\n-- static:\n", "no SQL in the file"),
        (
            "-- name: bad\n-- streams: orders, lineitem\n-- static:\nselect count(*) from orders\n",
            "does not read: lineitem",
        ),
        (
            "-- name: bad\n-- streams: orders\n-- static:\nselect count(*) from orders, nation\n",
            "does not name: nation",
        ),
        (
            "-- name: bad\n-- streams: orders\n-- static: orders\nselect count(*) from orders\n",
            "both stream and static",
        ),
        (
            "-- name: bad\n-- streams: orders\n-- static:\nselect count(*) from orders where (\n",
            r"bad.sql: cannot parse SQL \(line 1, column",
        ),
    ],
)
def test_malformed_files_are_rejected_with_the_reason(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        load_query(_write(tmp_path, "bad", text))
