from __future__ import annotations

import pytest
import sqlglot
from sqlglot import exp

from airflow_iqp.exceptions import UnsupportedQuery
from airflow_iqp.queries import load_query
from benchmarks.ssbench.shape import OutputMode, is_ordered, streaming_form

EVENT_TIME = {"orders": "o_event_time", "lineitem": "l_event_time"}
COLUMNS = {
    "orders": ["o_orderkey", "o_custkey", "o_orderdate", "o_shippriority", "o_orderpriority", "o_event_time"],
    "lineitem": ["l_orderkey", "l_partkey", "l_extendedprice", "l_discount", "l_shipdate", "l_event_time"],
}


def form_of(name):
    query = load_query(name)
    return streaming_form(query.sql, query.streams, EVENT_TIME, COLUMNS)


def equalities(sql):
    tree = sqlglot.parse_one(sql, read="spark")
    return {frozenset(c.name for c in eq.find_all(exp.Column)) for eq in tree.find_all(exp.EQ)}


def test_one_stream_is_complete_mode_without_watermark():
    form = form_of("q6")
    assert form.mode is OutputMode.COMPLETE
    assert form.watermarked == ()
    assert form.key_positions == ()
    assert form.read_sql("t") == "SELECT * FROM t"


def test_group_keys_identify_rows():
    form = form_of("cq4")
    assert form.key_positions == (0,)
    assert form.mode is OutputMode.COMPLETE


def test_stream_stream_join_gets_update_mode_watermarks_and_the_event_time_equality():
    form = form_of("q3")
    assert form.mode is OutputMode.UPDATE
    assert set(form.watermarked) == {"orders", "lineitem"}
    assert frozenset({"l_event_time", "o_event_time"}) in equalities(form.sql)
    assert form.key_positions == (0, 2, 3)


def test_order_by_and_limit_move_to_the_reader():
    form = form_of("q3")
    tree = sqlglot.parse_one(form.sql, read="spark")
    assert tree.args.get("order") is None
    assert tree.args.get("limit") is None
    assert form.read_sql("ss_result") == "SELECT * FROM ss_result ORDER BY revenue DESC, o_orderdate LIMIT 10"


def test_reader_drops_table_qualifiers():
    sql = "select l.l_partkey, count(*) as n from lineitem l group by l.l_partkey order by l.l_partkey"
    form = streaming_form(sql, ["lineitem"], EVENT_TIME, COLUMNS)
    assert form.read_sql("r") == "SELECT * FROM r ORDER BY l_partkey"


def test_the_equality_goes_inside_an_exists_subquery():
    form = form_of("q4")
    subquery = sqlglot.parse_one(form.sql, read="spark").find(exp.Exists)
    assert subquery is not None
    assert frozenset({"l_event_time", "o_event_time"}) in equalities(subquery.sql(dialect="spark"))


def test_two_streams_without_an_equality_between_them_are_refused():
    sql = "select count(*) from orders, lineitem where o_orderdate < l_shipdate"
    with pytest.raises(UnsupportedQuery, match="joined by no equality"):
        streaming_form(sql, ["orders", "lineitem"], EVENT_TIME, COLUMNS)


def test_is_ordered():
    assert is_ordered(load_query("q3").sql)
    assert not is_ordered(load_query("q6").sql)


def test_comma_joins_stay_inner_joins():
    # Spark's stream-stream join refuses the Cross join type that sqlglot would write for a comma.
    assert "CROSS" not in form_of("q3").sql.upper()
    assert "CROSS" not in form_of("q14").sql.upper()
