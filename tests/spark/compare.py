"""Comparing a batched result with a single pass: exact for integers, strings and dates, 1e-9
relative for floats and decimals; in the same order only where the query orders its rows.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Row


def close(actual: object, expected: object) -> bool:
    if isinstance(expected, float | Decimal):
        return type(actual) is type(expected) and (
            actual == expected or math.isclose(float(actual), float(expected), rel_tol=1e-9, abs_tol=0.0)
        )
    return type(actual) is type(expected) and actual == expected


def sort_key(row: Row) -> tuple[tuple[bool, str], ...]:
    """Order rows by their exact columns, so float noise cannot reorder unordered results."""
    return tuple((v is None, str(v)) for v in row if not isinstance(v, float | Decimal))


def assert_same(actual: list[Row], expected: list[Row], ordered: bool) -> None:
    assert len(actual) == len(expected)
    if not ordered:
        actual, expected = sorted(actual, key=sort_key), sorted(expected, key=sort_key)
    for got, want in zip(actual, expected):
        assert got.asDict().keys() == want.asDict().keys()
        assert all(close(a, b) for a, b in zip(got, want)), f"{got} != {want}"
