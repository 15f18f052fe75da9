"""A pydantic validation error in words a user can act on: the field, and what is wrong with it.

The job specs and the simulator's workload files name their fields differently (`a.b` and
`workload[0].b`), so each passes its own way of naming a location.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

    from pydantic_core import ErrorDetails


def common(error: ErrorDetails, where: Callable[[tuple[int | str, ...]], str]) -> str | None:
    """The error told as every file of the project tells it, or None for a kind the caller words."""
    kind, loc = error["type"], error["loc"]
    if kind == "missing":
        return f"{where(loc)} is missing"
    if kind == "extra_forbidden":
        return f"{where(loc[:-1])} has an unknown field {loc[-1]!r}"
    if kind == "value_error":
        return f"{where(loc)}: {error['msg'].removeprefix('Value error, ')}"
    return None
