"""How each mergeable aggregate splits into per-batch partial columns and one merge expression."""

from __future__ import annotations

from sqlglot import exp

from airflow_iqp.exceptions import UnsupportedQuery

_MERGEABLE = "cannot be merged exactly across batches"
_SUPPORTED = (exp.Sum, exp.Count, exp.Min, exp.Max, exp.Avg)


def aggregate_unit(agg: exp.AggFunc) -> exp.Expr:
    """The node that stands for one aggregate: the function, or its FILTER (WHERE ...) wrapper."""
    return agg.parent if isinstance(agg.parent, exp.Filter) else agg


def check_mergeable(agg: exp.AggFunc) -> None:
    """Refuse aggregates whose per-batch results cannot be combined into the single-pass value."""
    name = agg.sql_name() if isinstance(agg, _SUPPORTED) else agg.sql("spark")
    if isinstance(agg.this, exp.Distinct):
        raise UnsupportedQuery(f"{agg.sql_name()}(DISTINCT ...) {_MERGEABLE}")
    if not isinstance(agg, _SUPPORTED):
        raise UnsupportedQuery(f"aggregate {name} {_MERGEABLE}")
    nested = next(iter(agg.this.find_all(exp.AggFunc)), None) if agg.this else None
    if nested is not None:
        raise UnsupportedQuery(f"nested aggregate {agg.sql('spark')} {_MERGEABLE}")


def partial_parts(unit: exp.Expr) -> list[exp.Expr]:
    """Partial aggregates to compute per batch; AVG travels as its SUM and COUNT."""
    agg = unit.this if isinstance(unit, exp.Filter) else unit
    if isinstance(agg, exp.Avg):
        pieces: list[exp.Expr] = [
            exp.Sum(this=agg.this.copy()),
            exp.Count(this=agg.this.copy()),
        ]
    else:
        pieces = [agg.copy()]
    if isinstance(unit, exp.Filter):
        return [exp.Filter(this=p, expression=unit.expression.copy()) for p in pieces]
    return pieces


def merge_expression(unit: exp.Expr, columns: list[str]) -> exp.Expr:
    """Combine the partial columns of one aggregate (rules in the docstring of decompose)."""
    agg = unit.this if isinstance(unit, exp.Filter) else unit
    cols = [exp.column(c) for c in columns]
    if isinstance(agg, exp.Count):
        return exp.Coalesce(this=exp.Sum(this=cols[0]), expressions=[exp.Literal.number(0)])
    if isinstance(agg, (exp.Min, exp.Max)):
        return type(agg)(this=cols[0])
    total = exp.Sum(this=cols[0])
    if isinstance(agg, exp.Avg):
        count = exp.Nullif(this=exp.Sum(this=cols[1]), expression=exp.Literal.number(0))
        return exp.Paren(this=exp.Div(this=total, expression=count))
    return total
