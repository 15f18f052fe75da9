"""Point a query's table references at other names, so a batch can shadow a table for one call.

Rewriting the SQL beats registering views under the tables' own names: nothing the session
already holds (static tables, other queries' views) is replaced, even for a moment.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import sqlglot
from sqlglot import exp

if TYPE_CHECKING:
    from collections.abc import Mapping

DIALECT = "spark"


def _unqualified_tables(tree: exp.Expr) -> list[exp.Table]:
    """Tables named without database or catalog: the only ones a temporary view can stand for."""
    return [t for t in tree.find_all(exp.Table) if not t.args.get("db") and not t.args.get("catalog")]


def _cte_names(tree: exp.Expr) -> set[str]:
    return {cte.alias.lower() for cte in tree.find_all(exp.CTE)}


def rename_tables(sql: str, mapping: Mapping[str, str]) -> str:
    """`sql` reading table `mapping[name]` wherever it read `name` (names are case-insensitive).

    A renamed table keeps its old name as alias, so `lineitem.l_orderkey` still resolves.
    """
    tree = sqlglot.parse_one(sql, read=DIALECT)
    lower = {k.lower(): v for k, v in mapping.items()}
    clash = _cte_names(tree) & lower.keys()
    if clash:
        raise ValueError(f"the query defines a CTE named like the table(s) it must replace: {sorted(clash)}")
    for table in _unqualified_tables(tree):
        new = lower.get(table.name.lower())
        if new is None:
            continue
        if not table.alias:
            table.set("alias", exp.TableAlias(this=exp.to_identifier(table.name)))
        table.set("this", exp.to_identifier(new))
    return tree.sql(dialect=DIALECT)


def referenced_tables(sql: str) -> set[str]:
    """Lower-cased names of the unqualified tables `sql` reads, not counting its own CTEs."""
    tree = sqlglot.parse_one(sql, read=DIALECT)
    return {t.name.lower() for t in _unqualified_tables(tree)} - _cte_names(tree)
