"""Checks that cutting a query's stream rows into batches cannot change its answer.

A partial aggregate per batch is exact only when every row that reaches the outermost aggregate
comes from exactly one batch. So the stream must feed the aggregate's FROM chain, and no inner
query may aggregate, deduplicate, limit or window over stream rows: those see one batch at a
time and would differ from a single pass. EXISTS / IN / joins over streams are evaluated inside
one batch, which is exact because an order and its line items arrive in the same batch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp

from airflow_iqp.exceptions import UnsupportedQuery

if TYPE_CHECKING:
    from collections.abc import Iterator

_MERGEABLE = "cannot be merged exactly across batches"


class StreamScope:
    """Answers 'does this part of the query read a stream?' with CTE references followed."""

    def __init__(self, tree: exp.Query, streams: frozenset[str]) -> None:
        self.streams = streams
        self._ctes = {cte.alias_or_name.lower(): cte.this for cte in tree.find_all(exp.CTE)}

    def streams_read(self, node: exp.Expr) -> set[str]:
        """Stream tables read anywhere under node, through CTEs too."""
        found: set[str] = set()
        for table in node.find_all(exp.Table):
            name = table.name.lower()
            if name in self._ctes and not table.db:
                found |= self.streams_read(self._ctes[name])
            elif name in self.streams:
                found.add(name)
        return found

    def feeds_rows(self, source: exp.Expr) -> bool:
        """True when every row of this FROM source comes from a stream row (so splits by batch)."""
        if isinstance(source, exp.Table):
            name = source.name.lower()
            if name in self._ctes and not source.db:
                return self.feeds_rows(self._ctes[name])
            return name in self.streams
        if isinstance(source, exp.Subquery):
            return self.feeds_rows(source.this)
        if isinstance(source, exp.Union):
            return self.feeds_rows(source.left) and self.feeds_rows(source.right)
        if isinstance(source, exp.Select):
            return self.select_feeds_rows(source)
        return False

    def select_feeds_rows(self, select: exp.Select) -> bool:
        """A FROM chain splits by batch if a stream is in it and no outer join keeps static rows."""
        from_ = select.args.get("from_")
        sources = [from_.this] if from_ else []
        for join in select.args.get("joins") or []:
            side = (join.args.get("side") or "").upper()
            before, this = any(self.feeds_rows(s) for s in sources), self.feeds_rows(join.this)
            if (
                (side == "LEFT" and not before)
                or (side == "RIGHT" and not this)
                or (side == "FULL" and not (before and this))
            ):
                raise UnsupportedQuery(
                    f"{side} OUTER JOIN that keeps rows of static tables repeats them in every batch and {_MERGEABLE}"
                )
            sources.append(join.this)
        return any(self.feeds_rows(s) for s in sources)


def check_splittable(outer: exp.Select, scope: StreamScope) -> None:
    """Raise UnsupportedQuery for the first construct that would see only one batch's rows."""
    for window in outer.find_all(exp.Window):
        owner = window.find_ancestor(exp.Select)
        if owner is outer or (owner is not None and scope.streams_read(owner)):
            raise UnsupportedQuery(f"window function {window.sql('spark')} {_MERGEABLE}")
    if outer.args.get("qualify"):
        raise UnsupportedQuery(f"QUALIFY {_MERGEABLE}")
    for query in _inner_queries(outer):
        read = scope.streams_read(query)
        if read:
            _check_inner(query, sorted(read))
    if not scope.select_feeds_rows(outer):
        raise UnsupportedQuery(
            "the aggregated rows come from static tables only (streams are read only inside "
            f"subqueries), so the aggregate {_MERGEABLE}"
        )


def _inner_queries(outer: exp.Select) -> Iterator[exp.Query]:
    """Every SELECT or set operation below the outermost SELECT."""
    for node in outer.find_all(exp.Select, exp.SetOperation):
        if node is not outer:
            yield node


def _check_inner(query: exp.Query, read: list[str]) -> None:
    """Refuse what an inner query over stream rows can only compute per batch."""
    where = f"over stream table(s) {', '.join(read)} inside {_context(query)}"
    if isinstance(query, exp.SetOperation):
        if isinstance(query, exp.Union) and not query.args.get("distinct"):
            return
        kind = query.key.upper() + (" DISTINCT" if isinstance(query, exp.Union) else "")
        raise UnsupportedQuery(f"{kind} {where} {_MERGEABLE}")
    for agg in query.find_all(exp.AggFunc):
        if agg.find_ancestor(exp.Select) is query:
            raise UnsupportedQuery(f"aggregate {agg.sql('spark')} {where} {_MERGEABLE}")
    for arg, name in (("group", "GROUP BY"), ("distinct", "SELECT DISTINCT"), ("limit", "LIMIT")):
        if query.args.get(arg):
            raise UnsupportedQuery(f"{name} {where} {_MERGEABLE}")


def _context(query: exp.Expr) -> str:
    """Say where an inner query sits, for error messages."""
    node = query.parent
    while node is not None and not isinstance(node, exp.Select):
        if isinstance(node, exp.Exists):
            return "an EXISTS subquery"
        if isinstance(node, exp.In):
            return "an IN subquery"
        if isinstance(node, exp.CTE):
            return f"the WITH query {node.alias_or_name}"
        if isinstance(node, (exp.From, exp.Join)):
            return "a derived table in FROM"
        node = node.parent
    return "a scalar subquery"
