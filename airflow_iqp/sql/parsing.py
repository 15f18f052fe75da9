"""Parsing Spark SQL into one sqlglot tree, and listing the tables a query reads."""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

DIALECT = "spark"


def parse_query(sql: str) -> exp.Query:
    """Parse exactly one Spark SQL query; a syntax error names its line and column."""
    try:
        statements = [s for s in sqlglot.parse(sql, dialect=DIALECT) if s is not None]
    except ParseError as err:
        where = ", ".join(f"line {e.get('line')}, column {e.get('col')}: {e.get('description')}" for e in err.errors)
        raise ValueError(f"cannot parse SQL ({where})") from err
    if len(statements) != 1 or not isinstance(statements[0], exp.Query):
        raise ValueError(f"expected exactly one query, got {len(statements)} statement(s)")
    return statements[0]


def cte_names(tree: exp.Expr) -> set[str]:
    """Names bound by WITH anywhere in the tree: a table reference to one is not a real table."""
    return {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}


def table_names(tree: exp.Expr) -> set[str]:
    """Lower-cased names of the real tables a query reads (CTE references excluded)."""
    ctes = cte_names(tree)
    return {t.name.lower() for t in tree.find_all(exp.Table) if t.name.lower() not in ctes}
