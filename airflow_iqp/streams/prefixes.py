"""Which directories below a stream can hold a window's files, read from its path template.

A template such as `"dt={date}/hour={hour}"` names one directory level per `/`-separated part.
A directory whose name matches its level's part names a span of time (here a day, then an hour
inside it), and every file below it that the template matches there has its time in that span.
A walk of the stream goes down level by level and skips a directory whose span misses the
window; below a directory that matches the last level it takes everything. This is what keeps a
look's cost to the window instead of the history.

Exact, not a heuristic, for the paths the template matches from the directory down (the Hive
layouts it is written for); the rest is walked as the template would search it: a directory
that does not match its level may start the template again, so it is walked too (with the
leading levels still to match). The one assumption: a directory the template names with a time
holds files of that time only, not a deeper path naming another time (`dt=<old>/x/dt=<new>/...`).
A regex pattern gives no levels (it may match anywhere): such streams are listed whole.

Pure: no Airflow, no filesystem; `streams/listing.py` does the walking.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import Enum
from string import Formatter
from typing import TYPE_CHECKING
from urllib.parse import unquote

from airflow_iqp.streams.pattern import FIELD_REGEX, time_named

if TYPE_CHECKING:
    from collections.abc import Sequence

# The fields that name a point in time on their own, and the steps of the others, finest last.
_POINTS = frozenset({"epoch", "datetime", "ts"})
_ANCHORED = {"date": ("date", "hour", "minute", "second"), "year": ("year", "month", "day", "hour", "minute", "second")}
_STEP = {"hour": timedelta(hours=1), "minute": timedelta(minutes=1), "second": timedelta(seconds=1)}


class Verdict(Enum):
    """What a walk does with a directory."""

    SKIP = "skip"  # its span misses the window: nothing below it is the window's
    DESCEND = "descend"  # list it and decide for each directory inside
    TAKE = "take"  # every level matched and its span meets the window: list everything below


@dataclass(frozen=True)
class Layout:
    """The directory levels of a template, outermost first: `levels[i]` matches a directory name."""

    levels: tuple[re.Pattern[str], ...]

    def step(self, chain: Sequence[str], name: str, start: datetime, end: datetime) -> tuple[Verdict, tuple[str, ...]]:
        """The verdict on the directory `name` inside one reached through `chain` (the names that
        matched the leading levels so far), and the chain to go on with below it.

        The window is `[start, end)`. A name that does not match the next level may begin the
        template again, as the pattern's search would; if it matches no level at all, the walk
        goes down with an empty chain.
        """
        if chain and not self._matches(len(chain), name):
            chain = ()
        if not self._matches(len(chain), name):
            return Verdict.DESCEND, ()
        reached = (*chain, name)
        try:
            span = self._span(reached)
        except (ValueError, ArithmeticError, OverflowError):
            return Verdict.SKIP, reached  # no valid time: nothing below gets one through these names
        if span is not None and not _meets(span, start, end):
            return Verdict.SKIP, reached
        return (Verdict.TAKE if len(reached) == len(self.levels) else Verdict.DESCEND), reached

    def _matches(self, level: int, name: str) -> bool:
        regex = self.levels[level]
        # Inside the template a level is followed by '/', so it must take the whole name; the
        # last level is only followed by whatever the path has next, so it may take a prefix.
        return bool(regex.match(name) if level == len(self.levels) - 1 else regex.fullmatch(name))

    def _span(self, chain: Sequence[str]) -> tuple[datetime, datetime] | None:
        """The times the chain's directories name, `(first, end)` (`end` exclusive, or equal to
        `first` for a point), or None when they name no time yet; raises ValueError for an
        invalid one.
        """
        values: dict[str, str] = {}
        for level, name in zip(self.levels, chain, strict=False):
            if match := level.match(name):
                values.update({key: unquote(value) for key, value in match.groupdict().items() if value is not None})
        fields = set(values)
        if fields & _POINTS:
            finest = "point"
        else:
            order = next((_ANCHORED[anchor] for anchor in _ANCHORED if anchor in fields), None)
            if order is None or fields != set(order[: len(fields)]):
                return None  # no point in time named yet, or a coarser field comes deeper
            finest = order[len(fields) - 1]
        first = time_named(values)
        return None if first is None else (first, _after(first, finest))


def layout_of(pattern: str) -> Layout | None:
    """The directory levels of a template pattern; None for a regex (it may match anywhere in a
    path, so its directories name no span).
    """
    if "(?P<" in pattern:
        return None
    levels = []
    for part in pattern.strip("/").split("/"):
        regex = []
        for literal, name, _, _ in Formatter().parse(part):
            regex.append(re.escape(literal))
            if name is not None:
                regex.append(f"(?P<{name}>{FIELD_REGEX[name]})")
        levels.append(re.compile("".join(regex)))
    return Layout(tuple(levels))


def _after(first: datetime, finest: str) -> datetime:
    """The end (exclusive) of the span that starts at `first` and is one `finest` long."""
    if finest == "point":
        return first
    if finest == "year":
        return first.replace(year=first.year + 1)
    if finest == "month":
        return first.replace(year=first.year + first.month // 12, month=first.month % 12 + 1)
    return first + _STEP.get(finest, timedelta(days=1))  # date or day: one day


def _meets(span: tuple[datetime, datetime], start: datetime, end: datetime) -> bool:
    first, after = span
    if first == after:
        return start <= first < end
    return first < end and after > start
