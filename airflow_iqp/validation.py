"""The one check for numbers that come from users, files and configuration.

Bools are refused (Python counts them as ints), as are NaN and infinities, so a value that
passes can be used in arithmetic and compared without surprises.
"""

from __future__ import annotations

import math


def number(
    value: object,
    name: str,
    *,
    minimum: float | None = None,
    above: float | None = None,
    whole: bool = False,
) -> float:
    """`value` as a float, or ValueError naming `name` and the rule it breaks.

    `minimum` is inclusive and `above` exclusive; `whole` asks for an integral value.
    """
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if whole and not float(value).is_integer():
        raise ValueError(f"{name} must be a whole number, got {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum:g}, got {value!r}")
    if above is not None and value <= above:
        raise ValueError(f"{name} must be > {above:g}, got {value!r}")
    return float(value)


def whole_number(value: object, name: str, *, minimum: int | None = None) -> int:
    """`value` as an int (2.0 is accepted, 2.5 is not), or ValueError naming `name`."""
    return int(number(value, name, minimum=minimum, whole=True))
