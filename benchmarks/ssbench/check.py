"""Is a run's final result the single-pass batch result? Rows travel as JSON, so values are made
canonical first: numbers as floats (compared with a tolerance, since sums of doubles depend on the
order of addition and a merged decimal may keep other digits), everything else as text.
"""

from __future__ import annotations

import math
from datetime import date, datetime
from decimal import Decimal
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

Value = float | str | None
Row = tuple[Value, ...]
REL_TOL = 1e-9
ABS_TOL = 1e-6


def canonical(value: object) -> Value:
    """A JSON-safe value that compares equal across Spark's int, double and decimal results."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float, Decimal)):
        return float(value)
    if isinstance(value, (date, datetime)):
        return value.isoformat()
    return str(value)


def canonical_rows(rows: Iterable[Sequence[object]]) -> list[Row]:
    return [tuple(canonical(v) for v in row) for row in rows]


def _close(a: Value, b: Value) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=ABS_TOL)
    return a == b


def _sort_key(row: Row) -> tuple[tuple[int, float, str], ...]:
    """Orders rows of mixed values; floats by value, so rows whose numbers differ by rounding sort alike."""
    return tuple((0, 0.0, "") if v is None else (1, v, "") if isinstance(v, float) else (2, 0.0, v) for v in row)


def mismatch(actual: Sequence[Row], expected: Sequence[Row], ordered: bool) -> str | None:
    """Why `actual` is not `expected` (None if it is); an unordered result compares as a multiset."""
    if len(actual) != len(expected):
        return f"{len(actual)} rows, expected {len(expected)}"
    if not ordered:
        actual, expected = sorted(actual, key=_sort_key), sorted(expected, key=_sort_key)
    for index, (a, e) in enumerate(zip(actual, expected, strict=True)):
        if len(a) != len(e) or not all(_close(x, y) for x, y in zip(a, e, strict=True)):
            return f"row {index}: {a} != expected {e}"
    return None
