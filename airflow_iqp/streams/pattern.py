"""Event time from a file's path: a `{field}` template or a regex with named groups.

A stream declared with `window_by="path"` puts each file in the window of the time its path
names (Hive partitions such as `dt=2026-01-01/hour=10`), so a pattern must name a point in
time: one of `epoch`, `datetime`/`ts`, `date` or `year`, optionally followed by finer fields
without gaps (`date` then `hour`, `minute`, `second`; `year` then `month`, ... `second`).
Missing finer fields default to the start of the coarser one. Times without an offset are UTC.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from functools import lru_cache
from string import Formatter
from urllib.parse import unquote

from airflow_iqp.exceptions import InvalidDeclaration

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_DIGITS = r"\d{1,2}(?!\d)"
# What a template's `{field}` matches. A field at the end of a template takes the rest of the
# path component, so `ts={ts}` reads a whole Hive value (Hive escapes ':' as '%3A').
FIELD_REGEX: dict[str, str] = {
    "year": r"\d{4}(?!\d)",
    "month": _DIGITS,
    "day": _DIGITS,
    "hour": _DIGITS,
    "minute": _DIGITS,
    "second": _DIGITS,
    "date": r"\d{4}-\d{2}-\d{2}(?!\d)",
    "datetime": r"[^/]+",
    "ts": r"[^/]+",
    "epoch": r"\d+(?:\.\d+)?(?!\d)",
}
_POINTS = ("epoch", "datetime", "ts")  # each names a point in time on its own
_AFTER_DATE = ("hour", "minute", "second")
_AFTER_YEAR = ("month", "day", *_AFTER_DATE)
_USABLE = "a pattern needs one of year, date, datetime, ts or epoch"


@dataclass(frozen=True)
class EventTimePattern:
    """A compiled pattern: `event_time(relative)` is the time a relative path names, or None."""

    source: str
    regex: re.Pattern[str]
    fields: frozenset[str]

    def event_time(self, relative: str) -> datetime | None:
        """The UTC time named by `relative` (a path below the stream's directory), or None when
        the pattern does not match or the matched values are no valid time.
        """
        match = self.regex.search(relative)
        if match is None:
            return None
        values = {name: unquote(value) for name, value in match.groupdict().items() if value is not None}
        try:
            return time_named(values)
        except (ValueError, ArithmeticError):
            return None


def time_named(values: dict[str, str]) -> datetime | None:
    """The UTC time that field values (already unquoted) name, None when they name no point in
    time; raises ValueError (or ArithmeticError) for values that are no valid time.
    """
    if "epoch" in values:
        # Decimal, not float: a float rounds the microseconds of a time like today's.
        return _EPOCH + timedelta(microseconds=int(Decimal(values["epoch"]).scaleb(6).to_integral_value()))
    if "datetime" in values or "ts" in values:
        parsed = datetime.fromisoformat(values.get("datetime") or values["ts"])
        return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
    if "date" in values:
        day = datetime.strptime(values["date"], "%Y-%m-%d")
        year, month, dom = day.year, day.month, day.day
    elif "year" in values:
        year, month, dom = int(values["year"]), int(values.get("month", 1)), int(values.get("day", 1))
    else:
        return None  # an optional group of a user regex did not take part
    hour, minute, second = (int(values.get(name, 0)) for name in _AFTER_DATE)
    return datetime(year, month, dom, hour, minute, second, tzinfo=UTC)


@lru_cache(maxsize=256)
def compile_pattern(pattern: str) -> EventTimePattern:
    """Compile a template (`"dt={date}/hour={hour}"`) or a regex with named groups
    (`"(?P<date>...)"`), or raise InvalidDeclaration saying what to fix.

    A template matches from the start of any path component; a regex is searched anywhere in
    the relative path (anchor it with `^` to match from the stream's directory).
    """
    if not pattern.strip():
        raise InvalidDeclaration(f"FileStream pattern is empty: {_USABLE}, e.g. 'dt={{date}}/hour={{hour}}'")
    if "(?P<" in pattern:
        try:
            regex = re.compile(pattern)
        except re.error as error:
            raise InvalidDeclaration(f"FileStream pattern {pattern!r} is not a valid regex: {error}") from None
    else:
        regex = re.compile(_template_regex(pattern))
    fields = frozenset(regex.groupindex)
    _check_fields(pattern, fields)
    return EventTimePattern(pattern, regex, fields)


def _template_regex(template: str) -> str:
    parts = ["(?:^|/)"]
    named: set[str] = set()
    try:
        parsed = list(Formatter().parse(template))
    except ValueError as error:
        raise InvalidDeclaration(
            f"FileStream pattern {template!r} is not a valid template ({error}); write fields as "
            "{field} and literal braces as {{ and }}"
        ) from None
    for literal, name, spec, conversion in parsed:
        parts.append(re.escape(literal))
        if name is None:
            continue
        if spec or conversion:
            raise InvalidDeclaration(
                f"FileStream pattern {template!r}: write the field as {{{name}}}, without a format or conversion"
            )
        if name not in FIELD_REGEX:
            raise InvalidDeclaration(
                f"FileStream pattern {template!r}: unknown field {{{name}}}; fields are {', '.join(FIELD_REGEX)}"
            )
        if name in named:
            raise InvalidDeclaration(f"FileStream pattern {template!r} names {{{name}}} twice")
        named.add(name)
        parts.append(f"(?P<{name}>{FIELD_REGEX[name]})")
    return "".join(parts)


def _check_fields(pattern: str, fields: frozenset[str]) -> None:
    unknown = sorted(fields - FIELD_REGEX.keys())
    if unknown:
        raise InvalidDeclaration(
            f"FileStream pattern {pattern!r}: unknown named groups {unknown}; fields are "
            f"{', '.join(FIELD_REGEX)} (use (?:...) for groups that are no field)"
        )
    points = fields & set(_POINTS)
    if points:
        if len(fields) > 1:
            raise InvalidDeclaration(
                f"FileStream pattern {pattern!r}: {sorted(points)[0]} names a time on its own; "
                f"drop the other fields {sorted(fields - {sorted(points)[0]})}"
            )
        return
    finer: tuple[str, ...]
    if "date" in fields:
        anchor, finer = "date", _AFTER_DATE
    elif "year" in fields:
        anchor, finer = "year", _AFTER_YEAR
    else:
        given = f"it has {sorted(fields)}" if fields else "it has no field"
        raise InvalidDeclaration(f"FileStream pattern {pattern!r} names no usable time: {_USABLE} ({given})")
    rest = fields - {anchor}
    expected = finer[: len(rest)]
    if rest != set(expected):
        raise InvalidDeclaration(
            f"FileStream pattern {pattern!r}: after {anchor} the finer fields must follow without "
            f"gaps ({', '.join(finer)}); got {sorted(rest)}"
        )
