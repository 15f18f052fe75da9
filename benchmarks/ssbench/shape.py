"""A query's Structured Streaming form, from its batch SQL.

- ORDER BY and LIMIT leave the streaming plan (LIMIT is refused in Update mode, a sort only runs on
  a Complete-mode aggregate) and are applied when the sink is read at the end.
- One stream (with or without static tables): Complete mode into the memory sink, as in the paper.
- Comma joins stay inner joins (sqlglot would write CROSS JOIN, which a stream-stream join refuses).
- Two streams (orders joined with lineitem): Complete mode is refused, so Update mode, with a
  watermark on each stream and the event-time equality added to every equality between the two
  streams. The generator stamps a lineitem with its order's event time, so the equality loses no
  match, and it puts the watermark column among the join keys, so join state is evicted.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

import sqlglot
from sqlglot import exp

from airflow_iqp.exceptions import UnsupportedQuery

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping, Sequence

DIALECT = "spark"


class OutputMode(StrEnum):
    """The streaming output modes the benchmark uses."""

    COMPLETE = "complete"
    UPDATE = "update"


@dataclass(frozen=True)
class StreamingForm:
    """The streaming query, its output mode, and how to read its final result from the sink."""

    sql: str
    mode: OutputMode
    watermarked: tuple[str, ...]  # streams that get a watermark on their event-time column
    key_positions: tuple[int, ...]  # output columns that identify a row (Update mode upserts by them)
    order_by: str  # "ORDER BY ..." of the batch query, or ""
    limit: str  # "LIMIT n" of the batch query, or ""

    def read_sql(self, table: str) -> str:
        """The query that reads the final result from `table` as the batch query would return it."""
        return " ".join(part for part in (f"SELECT * FROM {table}", self.order_by, self.limit) if part)


def streaming_form(
    sql: str,
    streams: Sequence[str],
    event_time: Mapping[str, str],
    columns: Mapping[str, Collection[str]],
) -> StreamingForm:
    """The streaming form of `sql` reading `streams`; `columns` names each stream's columns."""
    tree = sqlglot.parse_one(sql, read=DIALECT)
    if not isinstance(tree, exp.Select):
        raise UnsupportedQuery(f"{tree.key.upper()} at the top level has no streaming form here")
    order, limit = tree.args.get("order"), tree.args.get("limit")
    tree.set("order", None)
    tree.set("limit", None)
    keys = tuple(i for i, e in enumerate(tree.expressions) if e.find(exp.AggFunc) is None)
    _inner_joins(tree)
    mode, watermarked = OutputMode.COMPLETE, tuple[str, ...]()
    if len(streams) > 1:
        _add_event_time_equalities(tree, streams, event_time, columns)
        mode, watermarked = OutputMode.UPDATE, tuple(streams)
    return StreamingForm(
        tree.sql(dialect=DIALECT), mode, watermarked, keys, _reader_clause(order), _reader_clause(limit)
    )


def _inner_joins(tree: exp.Expr) -> None:
    """Comma joins as plain inner joins. sqlglot writes `FROM a, b` as `a CROSS JOIN b`, and Spark's
    stream-stream join refuses the Cross join type even when a WHERE equality makes it an equi-join.
    """
    for join in tree.find_all(exp.Join):
        if join.args.get("kind") == "CROSS" and not join.args.get("on") and not join.args.get("using"):
            join.set("kind", None)


def _reader_clause(clause: exp.Expr | None) -> str:
    """ORDER BY / LIMIT for the result table: column references lose their table qualifiers."""
    if clause is None:
        return ""
    clause = clause.copy()
    for column in clause.find_all(exp.Column):
        column.set("table", None)
    return clause.sql(dialect=DIALECT).strip()


def _stream_of(node: exp.Expr, columns: Mapping[str, Collection[str]]) -> str | None:
    if not isinstance(node, exp.Column):
        return None
    return next((s for s, names in columns.items() if node.name.lower() in {n.lower() for n in names}), None)


def _add_event_time_equalities(
    tree: exp.Select,
    streams: Sequence[str],
    event_time: Mapping[str, str],
    columns: Mapping[str, Collection[str]],
) -> None:
    """AND `a.event_time = b.event_time` onto every equality between a column of stream a and one of b."""
    missing = sorted(set(streams) - set(event_time))
    if missing:
        raise UnsupportedQuery(f"no event-time column known for stream(s) {missing}")
    joined = set()
    for eq in list(tree.find_all(exp.EQ)):
        left, right = _stream_of(eq.this, columns), _stream_of(eq.expression, columns)
        if left is None or right is None or left == right:
            continue
        equality = exp.EQ(this=exp.column(event_time[left]), expression=exp.column(event_time[right]))
        eq.replace(exp.paren(exp.and_(eq.copy(), equality)))
        joined |= {left, right}
    if joined != set(streams):
        raise UnsupportedQuery(
            f"streams {sorted(set(streams) - joined)} are joined by no equality with another stream, "
            "so a stream-stream join could never evict its state"
        )


def is_ordered(sql: str) -> bool:
    """Whether the batch query fixes the order of its rows (then results compare row by row)."""
    return sqlglot.parse_one(sql, read=DIALECT).args.get("order") is not None
