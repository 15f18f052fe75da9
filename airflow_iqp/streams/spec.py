"""`FileStream`: one input stream of a query, a directory files land in, as a DAG file declares it.

Every field is checked when the object is built, so a DAG file with a bad declaration fails to
parse with a message that names the field and says what to fix, instead of failing at run time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum
from typing import Any, TypeVar
from urllib.parse import urlsplit

from airflow_iqp.exceptions import InvalidDeclaration
from airflow_iqp.streams.files import is_data
from airflow_iqp.streams.pattern import EventTimePattern, compile_pattern
from airflow_iqp.validation import number


class StreamFormat(StrEnum):
    """How a stream's files are read."""

    PARQUET = "parquet"
    CSV = "csv"
    JSON = "json"


class WindowBy(StrEnum):
    """What puts a file in a window: when it landed, or the event time its path names."""

    ARRIVAL = "arrival"  # the file's modification time
    PATH = "path"  # the time `pattern` reads from the path below the stream's directory


_LOCAL_SCHEMES = ("", "file", "local")
_E = TypeVar("_E", bound=StrEnum)


@dataclass(frozen=True)
class FileStream:
    """A directory of data files (local, `file://`, `s3://` or any fsspec scheme a provider brings).

    `schema` is a Spark DDL string (`"id BIGINT, ts TIMESTAMP"`), required for CSV and JSON so
    every batch reads the same types. `lateness` is how long after a window's end its files may
    still come; `close_marker` (a hidden name such as `"_SUCCESS"`) closes a window's input
    early: with `window_by="path"` when it is in the window's partition, with arrival when it
    was modified inside the window. `conn_id` is the Airflow connection of the storage.

    `history` is how far back a file may still land: no file lands for a window that ended
    longer ago than that (and than one window plus its lateness). `late_files` looks for late
    files that far back only, and `iqp db prune` may drop the ledger's rows of older windows.
    For an arrival stream it is also how long a directory may stay quiet and still receive
    files: the waiting triggers stop listing a directory with nothing new for longer than the
    horizon, so a look costs what lands now, not the stream's age (streams/arrivals.py). None:
    files may land for any window, so late files are looked for in all of them.

    `ordered` (arrival streams with a `history`) declares that the stream's directories are named
    in the order they start receiving files, at every level (`dt=2026-03-04/hour=08`, zero-padded
    sequence numbers), and that a directory receives no file once a later-named sibling has held
    files for longer than the history. Tasks and the triggers' first looks then list only the
    directories from the newest one the ledger saw holding a file before then, not the stream's
    whole past (streams/ordered.py). A file landing against this declaration (in a directory
    named before one that has held files for longer than the history) is not seen.
    """

    path: str
    format: str = StreamFormat.PARQUET
    schema: str | None = None
    options: Mapping[str, str] = field(default_factory=dict, hash=False)
    window_by: str = WindowBy.ARRIVAL
    pattern: str | None = None
    lateness: timedelta = timedelta(0)
    close_marker: str | None = None
    conn_id: str | None = None
    history: timedelta | None = None
    ordered: bool = False

    def __post_init__(self) -> None:
        _check_path(self.path)
        object.__setattr__(self, "format", _choice(self.format, StreamFormat, "format"))
        object.__setattr__(self, "window_by", _choice(self.window_by, WindowBy, "window_by"))
        self._check_schema()
        object.__setattr__(self, "options", _checked_options(self.options))
        self._check_pattern()
        if not isinstance(self.lateness, timedelta) or self.lateness < timedelta(0):
            raise InvalidDeclaration(
                f"FileStream lateness must be a timedelta >= 0 (e.g. timedelta(minutes=5)), got {self.lateness!r}"
            )
        self._check_close_marker()
        self._check_history()
        self._check_ordered()
        _optional_text(self.conn_id, "conn_id", "an Airflow connection id such as 'aws_default'")

    def _check_schema(self) -> None:
        _optional_text(self.schema, "schema", "a Spark DDL string such as 'id BIGINT, ts TIMESTAMP'")
        if self.schema is None and self.format != StreamFormat.PARQUET:
            raise InvalidDeclaration(
                f"FileStream {self.path!r}: format='{self.format}' needs schema=, a Spark DDL string such as "
                "'id BIGINT, amount DECIMAL(12,2), ts TIMESTAMP', so that every batch reads the same types"
            )

    def _check_pattern(self) -> None:
        _optional_text(self.pattern, "pattern", "a template such as 'dt={date}/hour={hour}'")
        if self.window_by == WindowBy.PATH:
            if self.pattern is None:
                raise InvalidDeclaration(
                    f"FileStream {self.path!r}: window_by='path' needs pattern=, a template such as "
                    "'dt={date}/hour={hour}' or a regex with named groups such as '(?P<date>\\d{4}-\\d{2}-\\d{2})'"
                )
            compile_pattern(self.pattern)
        elif self.pattern is not None:
            raise InvalidDeclaration(
                f"FileStream {self.path!r}: pattern= is only read with window_by='path'; set that or drop pattern="
            )

    def _check_close_marker(self) -> None:
        _optional_text(self.close_marker, "close_marker", "a file name such as '_SUCCESS'")
        if self.close_marker is None:
            return
        if "/" in self.close_marker:
            raise InvalidDeclaration(
                f"FileStream close_marker must be a file name, not a path, got {self.close_marker!r}"
            )
        if is_data(self.close_marker):
            raise InvalidDeclaration(
                f"FileStream close_marker {self.close_marker!r} would be read as data: a marker's name must "
                "start with '_' or '.' (e.g. '_SUCCESS')"
            )

    def _check_history(self) -> None:
        if self.history is None:
            return
        if not isinstance(self.history, timedelta) or self.history <= timedelta(0):
            raise InvalidDeclaration(
                f"FileStream history must be a timedelta > 0 (e.g. timedelta(days=1)) or None, got {self.history!r}"
            )

    def _check_ordered(self) -> None:
        if not isinstance(self.ordered, bool):
            raise InvalidDeclaration(f"FileStream ordered must be True or False, got {self.ordered!r}")
        if not self.ordered:
            return
        if self.window_by != WindowBy.ARRIVAL:
            raise InvalidDeclaration(
                f"FileStream {self.path!r}: ordered= is only read with window_by='arrival' (a path stream is "
                "listed by its pattern); drop ordered="
            )
        if self.history is None:
            raise InvalidDeclaration(
                f"FileStream {self.path!r}: ordered=True needs history=, how long a directory keeps receiving "
                "files once a later-named one holds some (e.g. history=timedelta(hours=2))"
            )

    def horizon(self, window: timedelta) -> timedelta | None:
        """How long after a window's end a file of it may still land: `history`, and at least the
        window plus the lateness; None when no `history` is declared (any time).
        """
        return None if self.history is None else max(self.history, window + self.lateness)

    @property
    def event_pattern(self) -> EventTimePattern:
        """The compiled path pattern; only for `window_by="path"`."""
        if self.pattern is None:
            raise InvalidDeclaration(f"FileStream {self.path!r} has no pattern: it is windowed by arrival")
        return compile_pattern(self.pattern)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON values, for XCom and trigger kwargs."""
        return {
            "path": self.path,
            "format": str(self.format),
            "schema": self.schema,
            "options": dict(self.options),
            "window_by": str(self.window_by),
            "pattern": self.pattern,
            "lateness_seconds": self.lateness.total_seconds(),
            "close_marker": self.close_marker,
            "conn_id": self.conn_id,
            "history_seconds": None if self.history is None else self.history.total_seconds(),
            "ordered": self.ordered,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FileStream:
        """The stream `to_dict` gave, checked again."""
        unknown = sorted(set(data) - _DICT_KEYS)
        if unknown or "path" not in data:
            raise InvalidDeclaration(
                f"not a FileStream dict: unknown keys {unknown}, keys are {sorted(_DICT_KEYS)} ('path' required)"
            )
        values = dict(data)
        if "lateness_seconds" in values:
            try:
                seconds = number(values.pop("lateness_seconds"), "FileStream lateness_seconds", minimum=0)
            except ValueError as error:
                raise InvalidDeclaration(str(error)) from None
            values["lateness"] = timedelta(seconds=seconds)
        if (history := values.pop("history_seconds", None)) is not None:
            try:
                values["history"] = timedelta(seconds=number(history, "FileStream history_seconds", above=0))
            except ValueError as error:
                raise InvalidDeclaration(str(error)) from None
        return cls(**values)


_DICT_KEYS = frozenset(
    {
        "path",
        "format",
        "schema",
        "options",
        "window_by",
        "pattern",
        "lateness_seconds",
        "close_marker",
        "conn_id",
        "history_seconds",
        "ordered",
    }
)


def _check_path(path: object) -> None:
    if not isinstance(path, str) or not path.strip():
        raise InvalidDeclaration(
            f"FileStream path must be a directory: an absolute path, file:// or a URI such as "
            f"'s3://bucket/sales/', got {path!r}"
        )
    if "*" in path or "?" in path:
        raise InvalidDeclaration(
            f"FileStream path {path!r} looks like a glob; give the directory: every data file below it is "
            "read (names starting with '_' or '.' are skipped)"
        )
    parts = urlsplit(path)
    if parts.scheme in _LOCAL_SCHEMES and (parts.netloc or not parts.path.startswith("/")):
        raise InvalidDeclaration(
            f"FileStream path {path!r} is relative; give an absolute path (workers do not share the DAG "
            "file's working directory), e.g. str(Path(__file__).parent / 'data')"
        )


def _choice(value: object, kind: type[_E], name: str) -> _E:
    if isinstance(value, str) and value in set(kind):
        return kind(value)
    raise InvalidDeclaration(f"FileStream {name} must be one of {', '.join(kind)}, got {value!r}")


def _optional_text(value: object, name: str, example: str) -> None:
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise InvalidDeclaration(f"FileStream {name} must be {example} or None, got {value!r}")


def _checked_options(options: object) -> dict[str, str]:
    """A copy, so the caller's dict cannot change the stream (a plain dict: Airflow deep-copies
    and pickles declarations, which a mappingproxy refuses).
    """
    if not isinstance(options, Mapping) or not all(
        isinstance(key, str) and isinstance(value, str) for key, value in options.items()
    ):
        raise InvalidDeclaration(
            f"FileStream options must map Spark reader option names to strings (write 'true', not True), "
            f"got {options!r}"
        )
    return dict(options)
