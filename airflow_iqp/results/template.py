"""The `output=` template: where a window's result is published, e.g.
`s3://bucket/results/{dag_id}/{window_start}`.

Fields: `{dag_id}`, `{query}`, `{window_start}` and `{window_end}`, times in UTC as
`YYYYMMDDTHHMMSS`, so names sort by time and contain no characters stores dislike.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import urlsplit

from airflow_iqp.exceptions import InvalidDeclaration

FIELDS = ("dag_id", "query", "window_start", "window_end")
TIME_FORMAT = "%Y%m%dT%H%M%S"


def stamp(at: datetime) -> str:
    """A UTC time as the template writes it."""
    if at.tzinfo is None:
        raise ValueError(f"a window time must be timezone-aware, got {at!r}")
    return at.astimezone(UTC).strftime(TIME_FORMAT)


@dataclass(frozen=True)
class OutputTemplate:
    """A checked `output=` template: absolute, and naming its window so windows never collide."""

    template: str

    def __post_init__(self) -> None:
        if not isinstance(self.template, str) or not self.template.strip():
            raise InvalidDeclaration(f"output must be a path or URI template, got {self.template!r}")
        fields = [f for _, f, _, _ in string.Formatter().parse(self.template) if f is not None]
        unknown = sorted({f for f in fields if f not in FIELDS})
        if unknown:
            raise InvalidDeclaration(
                f"output {self.template!r} names unknown field(s) {', '.join(map(repr, unknown))}; "
                f"use {', '.join('{' + f + '}' for f in FIELDS)}"
            )
        if "window_start" not in fields and "window_end" not in fields:
            raise InvalidDeclaration(
                f"output {self.template!r} must contain {{window_start}} or {{window_end}}, or every window "
                "would overwrite the last one's result"
            )
        if not urlsplit(self.template).scheme and not self.template.startswith("/"):
            raise InvalidDeclaration(
                f"output {self.template!r} must be an absolute path or a URI (workers do not share the DAG "
                "file's working directory)"
            )

    def render(self, *, dag_id: str, query: str, window_start: datetime, window_end: datetime) -> str:
        """The result location of one window."""
        return self.template.format(
            dag_id=dag_id, query=query, window_start=stamp(window_start), window_end=stamp(window_end)
        ).rstrip("/")

    def collection(self, *, dag_id: str, query: str) -> str:
        """The part before the first window field: the location of every window's result, the
        URI of the DAG's result Asset.
        """
        head = self.template.split("{window_", 1)[0].rstrip("/")
        return head.format(dag_id=dag_id, query=query)
