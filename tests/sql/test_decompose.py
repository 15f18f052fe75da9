"""decompose(): SQL shape checks with sqlglot, and partial + merge == single pass on real Spark."""

from __future__ import annotations

import datetime as dt
import math
import random
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_iqp.exceptions import UnsupportedQuery
from airflow_iqp.sql import PARTIALS_VIEW, decompose, parse_query

if TYPE_CHECKING:
    from collections.abc import Iterator

STREAMS = ("orders", "lineitem")


# ---------------------------------------------------------------- shape (pure sqlglot)


def test_partial_drops_having_order_limit_and_merge_keeps_them() -> None:
    d = decompose(
        "select l_shipmode, sum(l_quantity) as q from lineitem group by l_shipmode "
        "having count(*) > 2 order by q desc limit 3",
        STREAMS,
    )
    partial = parse_query(d.partial_sql)
    assert not any(partial.args.get(k) for k in ("having", "order", "limit"))
    assert "COUNT(*)" in d.partial_sql  # HAVING-only aggregate travels as a hidden column
    merge = parse_query(d.merge_sql)
    assert all(merge.args.get(k) for k in ("having", "order", "limit"))
    assert d.output_columns == ("l_shipmode", "q")
    assert d.partials_view == PARTIALS_VIEW
    assert f"FROM {PARTIALS_VIEW}" in d.merge_sql


def test_identical_aggregates_share_one_partial_column_and_avg_reuses_sum() -> None:
    d = decompose("select sum(l_quantity), sum(l_quantity) + 1, avg(l_quantity) from lineitem", STREAMS)
    assert d.partial_sql.count("SUM(l_quantity)") == 1
    assert d.partial_sql.count("COUNT(l_quantity)") == 1
    assert d.output_columns == ("_c0", "_c1", "_c2")


def test_count_merges_as_coalesced_sum_and_avg_as_ratio_of_sums() -> None:
    d = decompose("select count(*) as n, avg(l_tax) as a from lineitem", STREAMS)
    assert "COALESCE(SUM(_a0), 0) AS n" in d.merge_sql
    assert "SUM(_a1) / NULLIF(SUM(_a2), 0)" in d.merge_sql


def test_group_by_alias_and_ordinal_resolve_to_expressions() -> None:
    d = decompose(
        "select extract(year from o_orderdate) as o_year, o_orderpriority, count(*) c from orders group by o_year, 2",
        STREAMS,
    )
    assert "GROUP BY EXTRACT(YEAR FROM o_orderdate), o_orderpriority" in d.partial_sql
    assert "GROUP BY _k0, _k1" in d.merge_sql


def test_derived_table_outer_aggregate_is_the_one_decomposed() -> None:
    d = decompose(
        "select nation, o_year, sum(amount) as sum_profit from (select n_name as nation, "
        "extract(year from o_orderdate) as o_year, l_extendedprice as amount from lineitem, orders, nation "
        "where o_orderkey = l_orderkey) as profit group by nation, o_year order by nation, o_year desc",
        STREAMS,
    )
    assert d.partial_sql.startswith("SELECT nation AS _k0, o_year AS _k1, SUM(amount) AS _a0 FROM (SELECT")
    assert d.merge_sql.endswith("ORDER BY _k0, _k1 DESC")
    assert d.streams == ("orders", "lineitem")


def test_streams_lists_only_the_streams_read() -> None:
    d = decompose("select count(*) from lineitem, part where p_partkey = l_partkey", ["Orders", "LINEITEM"])
    assert d.streams == ("lineitem",)


@pytest.mark.parametrize(
    ("sql", "construct"),
    [
        ("select count(distinct l_partkey) from lineitem", "COUNT(DISTINCT ...)"),
        ("select sum(distinct l_quantity) from lineitem", "SUM(DISTINCT ...)"),
        ("select percentile_approx(l_quantity, 0.5) from lineitem", "PERCENTILE_APPROX"),
        ("select median(l_quantity) from lineitem", "MEDIAN"),
        ("select collect_list(l_quantity) from lineitem", "COLLECT_LIST"),
        ("select first(l_quantity) from lineitem", "FIRST"),
        ("select last(l_quantity) from lineitem", "LAST"),
        ("select stddev(l_quantity) from lineitem", "STDDEV"),
        ("select l_shipmode, sum(l_quantity) over (partition by l_shipmode) from lineitem", "window function"),
        ("select rank() over (order by sum(l_quantity)) from lineitem", "window function"),
        ("select l_orderkey, l_quantity from lineitem", "no aggregate"),
        ("select distinct l_shipmode, count(*) from lineitem group by l_shipmode", "SELECT DISTINCT"),
        ("select count(*) from part", "none of the declared streams"),
        (
            "select sum(l_extendedprice) from lineitem, part where p_partkey = l_partkey "
            "and l_quantity < (select 0.2 * avg(l_quantity) from lineitem where l_partkey = p_partkey)",
            "scalar subquery",
        ),
        (
            "select count(*) from orders where o_orderkey in "
            "(select l_orderkey from lineitem group by l_orderkey having sum(l_quantity) > 300)",
            "IN subquery",
        ),
        (
            "with revenue as (select l_suppkey, sum(l_extendedprice) as total from lineitem group by l_suppkey) "
            "select count(*) from revenue",
            "WITH query revenue",
        ),
        (
            "select count(*) from (select distinct l_orderkey from lineitem) as t",
            "SELECT DISTINCT over stream table(s) lineitem inside a derived table",
        ),
        (
            "select count(*) from customer where not exists (select * from orders where o_custkey = c_custkey)",
            "static tables only",
        ),
        ("select count(o_orderkey) from customer left join orders on o_custkey = c_custkey", "LEFT OUTER JOIN"),
        ("select l_shipmode, count(*) from lineitem group by rollup(l_shipmode)", "ROLLUP"),
        ("select l_shipmode, l_quantity, count(*) from lineitem group by l_shipmode", "l_quantity"),
        ("select count(*) from lineitem union all select count(*) from orders", "UNION at the top level"),
        ("select sum(max(l_quantity)) from lineitem", "nested aggregate"),
    ],
)
def test_unmergeable_constructs_are_refused_by_name(sql: str, construct: str) -> None:
    with pytest.raises(UnsupportedQuery, match=None) as info:
        decompose(sql, STREAMS)
    assert construct in str(info.value)


def test_outer_join_that_keeps_stream_rows_is_accepted() -> None:
    d = decompose("select count(c_name) from orders left join customer on o_custkey = c_custkey", STREAMS)
    assert "LEFT JOIN customer" in d.partial_sql


def test_parse_error_names_line_and_column() -> None:
    with pytest.raises(ValueError, match=r"line 2, column \d+") as info:
        decompose("select count(*)\nfrom lineitem where (", STREAMS)
    assert not isinstance(info.value, UnsupportedQuery)


# ---------------------------------------------------------------- exactness on Spark

EXACT_QUERIES = {
    "global": "select count(*) c, count(l_weight) cw, sum(l_quantity) s, sum(l_weight) sw, min(l_weight) mn, "
    "max(l_quantity) mx, avg(l_quantity) aq, avg(l_weight) aw, avg(l_linenumber) al, sum(l_linenumber) si, "
    "count(*) filter (where l_weight > 5) as heavy, avg(l_quantity) filter (where l_shipmode = 'AIR') as air "
    "from lineitem",
    "global_empty": "select count(*) c, sum(l_quantity) s, avg(l_quantity) a, min(l_weight) m from lineitem "
    "where l_quantity < 0",
    "global_all_null": "select count(l_weight) c, sum(l_weight) s, avg(l_weight) a from lineitem "
    "where l_weight is null",
    "ratio_q14": "select 100.00 * sum(case when l_shipmode like 'A%' then l_extendedprice * (1 - l_discount) "
    "else 0 end) / sum(l_extendedprice * (1 - l_discount)) as promo, sum(l_linenumber) / count(*) as per_row "
    "from lineitem",
    "group_expr_alias": "select extract(year from o_orderdate) as o_year, count(*) n, sum(o_totalprice) t, "
    "avg(o_totalprice) a from orders group by o_year order by o_year",
    "having_hidden_null_keys": "select o_orderpriority, sum(o_totalprice) as total from orders "
    "group by o_orderpriority having count(*) > 3 and max(o_totalprice) > 10 order by o_orderpriority",
    "derived_q9": "select nation, o_year, sum(amount) as profit from (select n_name as nation, "
    "extract(year from o_orderdate) as o_year, l_extendedprice * (1 - l_discount) - l_quantity * 1.5 as amount "
    "from orders, lineitem, customer, nation where o_orderkey = l_orderkey and c_custkey = o_custkey "
    "and c_nationkey = n_nationkey) as p group by nation, o_year order by nation, o_year desc",
    "exists_q4": "select o_orderpriority, count(*) as order_count from orders where exists (select * from "
    "lineitem where l_orderkey = o_orderkey and l_commitdate < l_receiptdate) group by o_orderpriority "
    "order by o_orderpriority",
    "in_subquery": "select c_nationkey, count(*) as n, avg(o_totalprice) as a from orders join customer "
    "on c_custkey = o_custkey where o_orderkey in (select l_orderkey from lineitem where l_shipmode = 'MAIL') "
    "group by c_nationkey order by c_nationkey",
    "top_q10": "select c_custkey, c_name, sum(l_extendedprice * (1 - l_discount)) as revenue "
    "from customer, orders, lineitem where c_custkey = o_custkey and l_orderkey = o_orderkey "
    "group by c_custkey, c_name order by revenue desc, c_custkey limit 5",
    "case_q12": "select l_shipmode, sum(case when o_orderpriority = '1-URGENT' or o_orderpriority = '2-HIGH' "
    "then 1 else 0 end) as high, sum(case when o_orderpriority <> '1-URGENT' then 1 else 0 end) as low "
    "from orders, lineitem where o_orderkey = l_orderkey group by l_shipmode order by l_shipmode",
    "ordinal_hidden_order_arith": "select l_shipmode, min(l_discount), max(l_weight), min(l_commitdate), "
    "sum(l_linenumber) * 2 + count(*) as x, case when sum(l_quantity) > 100 then max(l_quantity) - "
    "min(l_quantity) end as spread from lineitem group by 1 order by sum(l_quantity) desc, 1",
}

ORDERS_DDL = (
    "o_orderkey int, o_custkey int, o_orderpriority string, o_totalprice decimal(15,2), "
    "o_orderdate date, o_event_time timestamp"
)
LINEITEM_DDL = (
    "l_orderkey int, l_linenumber int, l_quantity decimal(15,2), l_extendedprice decimal(15,2), "
    "l_discount decimal(15,2), l_weight double, l_shipmode string, l_commitdate date, l_receiptdate date, "
    "l_event_time timestamp"
)


def _tables(spark: Any) -> dict[str, Any]:
    """Small orders/lineitem streams (an order's items share its key) plus static customer/nation."""
    rng = random.Random(7)
    priorities = ["1-URGENT", "2-HIGH", "3-MEDIUM", None]
    modes = ["AIR", "MAIL", "SHIP", "AIR REG"]
    start, t0 = dt.date(1993, 1, 1), dt.datetime(2024, 1, 1)
    orders, items = [], []
    for key in range(1, 121):
        orders.append(
            (
                key,
                rng.randint(1, 20),
                rng.choice(priorities),
                Decimal(rng.randint(100, 999999)) / 100,
                start + dt.timedelta(days=rng.randint(0, 1500)),
                t0 + dt.timedelta(seconds=key),
            )
        )
        for line in range(1, rng.randint(0, 5) + 1):
            commit = start + dt.timedelta(days=rng.randint(0, 1500))
            items.append(
                (
                    key,
                    line,
                    Decimal(rng.randint(100, 5000)) / 100,
                    Decimal(rng.randint(1000, 9999999)) / 100,
                    Decimal(rng.randint(0, 10)) / 100,
                    None if rng.random() < 0.2 else rng.uniform(0.5, 20.0),
                    rng.choice(modes),
                    commit,
                    commit + dt.timedelta(days=rng.randint(-20, 20)),
                    t0 + dt.timedelta(seconds=key),
                )
            )
    customers = [(c, f"Customer#{c:03d}", c % 4) for c in range(1, 21)]
    nations = [(n, f"NATION{n}") for n in range(4)]
    return {
        "orders": spark.createDataFrame(orders, ORDERS_DDL),
        "lineitem": spark.createDataFrame(items, LINEITEM_DDL),
        "customer": spark.createDataFrame(customers, "c_custkey int, c_name string, c_nationkey int"),
        "nation": spark.createDataFrame(nations, "n_nationkey int, n_name string"),
    }


@pytest.fixture(scope="module")
def tables(spark: Any) -> Iterator[dict[str, Any]]:
    """Tiny data runs fastest in one partition without broadcast jobs; settings restored after."""
    tuned = {"spark.sql.shuffle.partitions": "1", "spark.sql.autoBroadcastJoinThreshold": "-1"}
    saved = {key: spark.conf.get(key) for key in tuned}
    for key, value in tuned.items():
        spark.conf.set(key, value)
    frames = {name: df.coalesce(1).cache() for name, df in _tables(spark).items()}
    for name, df in frames.items():
        df.createOrReplaceTempView(name)
    yield frames
    for key, value in saved.items():
        spark.conf.set(key, value)


def _run_batched(spark: Any, tables: dict[str, Any], sql: str, batches: list[set[int]]) -> list[Any]:
    """Run partial_sql once per batch of order keys, union the partials, then merge_sql."""
    d = decompose(sql, STREAMS)
    partials = []
    for keys in batches:
        ids = sorted(keys)
        tables["orders"].where(tables["orders"].o_orderkey.isin(ids)).createOrReplaceTempView("orders")
        tables["lineitem"].where(tables["lineitem"].l_orderkey.isin(ids)).createOrReplaceTempView("lineitem")
        partials.append(spark.sql(d.partial_sql))
    for name in STREAMS:
        tables[name].createOrReplaceTempView(name)
    union = partials[0]
    for p in partials[1:]:
        union = union.unionByName(p)
    union.createOrReplaceTempView(d.partials_view)
    merged = spark.sql(d.merge_sql)
    assert tuple(merged.columns) == d.output_columns
    rows: list[Any] = merged.collect()
    return rows


def _close(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, bool) or isinstance(a, int) and isinstance(b, int):
        return bool(a == b)
    if isinstance(a, (int, float, Decimal)) and isinstance(b, (int, float, Decimal)):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)
    return bool(a == b)


def _assert_same(expected: list[Any], actual: list[Any], ordered: bool) -> None:
    if not ordered:
        expected, actual = sorted(expected, key=repr), sorted(actual, key=repr)
    assert len(expected) == len(actual)
    for want, got in zip(expected, actual):
        assert all(_close(w, g) for w, g in zip(want, got)), (want, got)


def _split(keys: list[int], k: int, seed: int) -> list[set[int]]:
    """Random split into k batches; with k > 2 the last batch is left empty on purpose."""
    rng = random.Random(seed)
    filled = k - 1 if k > 2 else k
    batches: list[set[int]] = [set() for _ in range(k)]
    for key in keys:
        batches[rng.randrange(filled)].add(key)
    return batches


@pytest.mark.parametrize("name", sorted(EXACT_QUERIES))
def test_partial_then_merge_equals_single_pass(spark: Any, tables: dict[str, Any], name: str) -> None:
    sql = EXACT_QUERIES[name]
    expected = spark.sql(sql).collect()
    keys = [r.o_orderkey for r in tables["orders"].select("o_orderkey").collect()]
    ordered = "order by" in sql
    for k in (1, 2, 7):
        _assert_same(expected, _run_batched(spark, tables, sql, _split(keys, k, seed=k)), ordered)


def test_exactness_covers_an_empty_batch_and_a_nonempty_result(spark: Any, tables: dict[str, Any]) -> None:
    keys = [r.o_orderkey for r in tables["orders"].select("o_orderkey").collect()]
    assert any(not b for b in _split(keys, 7, seed=7))
    assert spark.sql(EXACT_QUERIES["global"]).collect()[0].c > 100


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    cuts=st.lists(st.integers(min_value=1, max_value=119), max_size=5),
    query=st.sampled_from(["global", "ratio_q14", "derived_q9", "having_hidden_null_keys"]),
)
def test_random_contiguous_splits_are_exact(spark: Any, tables: dict[str, Any], cuts: list[int], query: str) -> None:
    bounds = [0, *sorted(cuts), 120]  # repeated cuts make empty batches
    batches = [set(range(lo + 1, hi + 1)) for lo, hi in zip(bounds, bounds[1:])]
    sql = EXACT_QUERIES[query]
    _assert_same(spark.sql(sql).collect(), _run_batched(spark, tables, sql, batches), "order by" in sql)
