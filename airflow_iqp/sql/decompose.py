"""Split an aggregate query into a per-batch partial query and a final merge query.

The partial runs on one batch and groups by the query's keys, with one column per distinct
partial aggregate. The merge groups the union of all partials by the same keys and combines them:
SUM -> SUM, COUNT -> COALESCE(SUM, 0), MIN -> MIN, MAX -> MAX, AVG -> SUM(sums) / SUM(counts).
HAVING, ORDER BY and LIMIT run only in the merge.

Spark types a merged decimal SUM up to 10 digits wider than a single-pass SUM (both stop at 38).
Values are equal, but decimal arithmetic on a SUM narrower than 38 digits (e.g. AVG or a ratio
over DECIMAL(15, 2) columns) may then keep fewer fractional digits than the single pass. TPC-H's
AVG over DECIMAL(15, 2) and Q14's ratio of 38-digit SUMs come out with identical types and values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlglot import exp

from airflow_iqp.exceptions import UnsupportedQuery
from airflow_iqp.sql.aggregates import aggregate_unit, check_mergeable, merge_expression, partial_parts
from airflow_iqp.sql.parsing import DIALECT, parse_query
from airflow_iqp.sql.streams import StreamScope, check_splittable

if TYPE_CHECKING:
    from collections.abc import Iterable

PARTIALS_VIEW = "iqp_partials"


@dataclass(frozen=True)
class Decomposition:
    """SQL for one batch's partial aggregate and for the merge of all partials."""

    partial_sql: str
    merge_sql: str
    partials_view: str
    streams: tuple[str, ...]
    output_columns: tuple[str, ...]


def decompose(sql: str, streams: Iterable[str]) -> Decomposition:
    """Decompose the outermost aggregate of sql; raise UnsupportedQuery if it is not exact."""
    declared = tuple(dict.fromkeys(s.lower() for s in streams))
    tree = parse_query(sql)
    if not isinstance(tree, exp.Select):
        raise UnsupportedQuery(f"{tree.key.upper()} at the top level cannot be merged exactly across batches")
    scope = StreamScope(tree, frozenset(declared))
    read = scope.streams_read(tree)
    if not read:
        raise UnsupportedQuery(f"the query reads none of the declared streams ({', '.join(declared)})")
    if tree.args.get("distinct"):
        raise UnsupportedQuery("SELECT DISTINCT at the top level cannot be merged exactly across batches")
    check_splittable(tree, scope)
    keys = _group_keys(tree)
    units = _aggregate_units(tree)
    if not units and not keys:
        raise UnsupportedQuery("the query has no aggregate and no GROUP BY, so there is nothing to merge")
    columns, of_unit = _partial_columns(units)
    partial = _partial_query(tree, keys, columns)
    merge, names = _merge_query(tree, keys, of_unit)
    return Decomposition(
        partial_sql=partial.sql(dialect=DIALECT),
        merge_sql=merge.sql(dialect=DIALECT),
        partials_view=PARTIALS_VIEW,
        streams=tuple(s for s in declared if s in read),
        output_columns=names,
    )


def _group_keys(tree: exp.Select) -> list[exp.Expr]:
    """GROUP BY items with ordinals and select-list aliases replaced by the expressions they name."""
    group = tree.args.get("group")
    if group is None:
        return []
    extras = [k for k in ("grouping_sets", "cube", "rollup", "totals") if group.args.get(k)]
    if extras or any(isinstance(e, (exp.Rollup, exp.Cube, exp.GroupingSets)) for e in group.expressions):
        raise UnsupportedQuery("GROUP BY ROLLUP / CUBE / GROUPING SETS cannot be merged exactly across batches")
    items = tree.expressions
    keys = []
    for item in group.expressions:
        if isinstance(item, exp.Literal) and item.is_int:
            item = items[int(item.this) - 1].unalias()
        elif isinstance(item, exp.Column) and not item.table:
            item = next(
                (
                    s.this
                    for s in items
                    if isinstance(s, exp.Alias)
                    and s.alias.lower() == item.name.lower()
                    and not (isinstance(s.this, exp.Column) and s.this.name.lower() == item.name.lower())
                ),
                item,
            )
        keys.append(item.copy())
    return keys


def _clauses(tree: exp.Select) -> list[exp.Expr]:
    """The parts of the outermost SELECT that are evaluated after grouping."""
    return [*tree.expressions, *(tree.args[k] for k in ("having", "order") if tree.args.get(k))]


def _aggregate_units(tree: exp.Select) -> list[exp.Expr]:
    """Aggregates of the outermost SELECT (not of its subqueries), each checked to be mergeable."""
    units = []
    for clause in _clauses(tree):
        for agg in clause.find_all(exp.AggFunc):
            if agg.find_ancestor(exp.Select) is tree and agg.find_ancestor(exp.AggFunc) is None:
                check_mergeable(agg)
                units.append(aggregate_unit(agg))
        for sub in clause.find_all(exp.Subquery, exp.Exists):
            if sub.find_ancestor(exp.AggFunc, exp.Select) is tree:
                raise UnsupportedQuery(
                    f"subquery {sub.sql(DIALECT)} outside an aggregate in the outermost query "
                    "cannot be evaluated by the merge"
                )
    return units


def _partial_columns(units: list[exp.Expr]) -> tuple[list[exp.Expr], dict[str, list[str]]]:
    """Partial aggregate columns (identical ones shared) and, per aggregate's SQL, its column names."""
    columns: dict[str, exp.Expr] = {}
    of_unit: dict[str, list[str]] = {}
    for unit in units:
        names = []
        for part in partial_parts(unit):
            text = part.sql(DIALECT)
            if text not in columns:
                columns[text] = exp.alias_(part, f"_a{len(columns)}")
            names.append(columns[text].alias)
        of_unit[unit.sql(DIALECT)] = names
    return list(columns.values()), of_unit


def _partial_query(tree: exp.Select, keys: list[exp.Expr], columns: list[exp.Expr]) -> exp.Select:
    """Same FROM / WHERE as the query, grouped by its keys, without HAVING, ORDER BY or LIMIT."""
    partial = tree.copy()
    keyed = [exp.alias_(k.copy(), f"_k{i}") for i, k in enumerate(keys)]
    partial.set("expressions", keyed + [c.copy() for c in columns])
    partial.set("group", exp.Group(expressions=[k.copy() for k in keys]) if keys else None)
    for clause in ("having", "order", "limit", "offset"):
        partial.set(clause, None)
    return partial


def _merge_query(
    tree: exp.Select, keys: list[exp.Expr], of_unit: dict[str, list[str]]
) -> tuple[exp.Select, tuple[str, ...]]:
    """Re-group the partials by key and put the query's own expressions on the merged values."""

    def rewrite(node: exp.Expr) -> exp.Expr:
        if isinstance(node, (exp.AggFunc, exp.Filter)) and node.sql(DIALECT) in of_unit:
            return merge_expression(node, of_unit[node.sql(DIALECT)])
        index = _key_index(node, keys)
        return node if index is None else exp.column(f"_k{index}")

    names = tuple(_output_name(item, i) for i, item in enumerate(tree.expressions))
    items = [exp.alias_(item.unalias().copy().transform(rewrite), name) for item, name in zip(tree.expressions, names)]
    merge = exp.select(*items).from_(PARTIALS_VIEW)
    if keys:
        merge = merge.group_by(*(f"_k{i}" for i in range(len(keys))))
    for clause in ("having", "order"):
        if tree.args.get(clause):
            merge.set(clause, tree.args[clause].copy().transform(rewrite))
    for clause in ("limit", "offset"):
        if tree.args.get(clause):
            merge.set(clause, tree.args[clause].copy())
    partial_names = {c for cols in of_unit.values() for c in cols} | {f"_k{i}" for i in range(len(keys))}
    for i, item in enumerate(items):  # an item may use the aliases before it, not its own name
        _check_resolved(item.this, partial_names | {a.alias for a in tree.expressions[:i] if isinstance(a, exp.Alias)})
    for clause in ("having", "order"):
        if merge.args.get(clause):
            _check_resolved(merge.args[clause], partial_names | set(names))
    return merge, names


def _key_index(node: exp.Expr, keys: list[exp.Expr]) -> int | None:
    """Which GROUP BY key node is, matching columns by name when one side has no qualifier."""
    for i, key in enumerate(keys):
        if isinstance(key, exp.Literal):
            continue
        if node == key:
            return i
        if isinstance(node, exp.Column) and isinstance(key, exp.Column) and node.name.lower() == key.name.lower():
            if not node.table or not key.table or node.table.lower() == key.table.lower():
                return i
    return None


def _output_name(item: exp.Expr, position: int) -> str:
    """Alias or column name; an unnamed expression becomes _c<position>, as Hive names it."""
    if isinstance(item, (exp.Alias, exp.Column)):
        return item.alias_or_name
    return f"_c{position}"


def _check_resolved(clause: exp.Expr, allowed: set[str]) -> None:
    """Every column left in the merge must be a partial column or an output alias."""
    for column in clause.find_all(exp.Column):
        if not column.table and column.name in allowed:
            continue
        raise UnsupportedQuery(
            f"column {column.sql(DIALECT)} is neither a GROUP BY key nor inside a mergeable aggregate"
        )
