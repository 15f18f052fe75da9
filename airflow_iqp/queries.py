"""The benchmark's query files: a header naming stream and static inputs, then Spark SQL.

A header is a run of `-- key: value` lines at the top, with keys name, streams and static
(comma-separated table names, possibly empty). Loading checks the header against the tables the
SQL reads, so a planner never batches a table that is not a stream or misses one that is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from airflow_iqp.sql import parse_query, table_names

QUERIES_DIR = Path(__file__).resolve().parents[1] / "queries"
_HEADER_KEYS = ("name", "streams", "static")
_HEADER_LINE = re.compile(r"--\s*(\w+)\s*:(.*)")


@dataclass(frozen=True)
class QueryDefinition:
    """One query file: its SQL and which inputs arrive as streams and which are static."""

    name: str
    sql: str
    streams: tuple[str, ...]
    static_tables: tuple[str, ...]
    path: Path


def list_queries(queries_dir: Path | None = None) -> tuple[str, ...]:
    """Names of the query files, TPC-H first, in numeric order (q1, q3, ..., cq1, ...)."""
    directory = queries_dir or QUERIES_DIR
    return tuple(sorted((p.stem for p in directory.glob("*.sql")), key=_natural_key))


def load_query(name_or_path: str | Path, queries_dir: Path | None = None) -> QueryDefinition:
    """Load a query by name (looked up in queries_dir) or by path; the header must match the SQL."""
    path = _resolve(name_or_path, queries_dir or QUERIES_DIR)
    header, sql = _split_header(path)
    streams, static = _tables(header["streams"]), _tables(header["static"])
    if header["name"] != path.stem:
        raise ValueError(f"{path}: header name {header['name']!r} differs from the file name {path.stem!r}")
    _check_tables(path, sql, streams, static)
    return QueryDefinition(name=header["name"], sql=sql, streams=streams, static_tables=static, path=path)


def _natural_key(name: str) -> tuple[bool, str, int]:
    """q<n> before anything else, then by prefix and number, so q10 follows q9."""
    match = re.fullmatch(r"([a-z]+)(\d+)", name)
    return (True, name, 0) if match is None else (match[1] != "q", match[1], int(match[2]))


def _resolve(name_or_path: str | Path, queries_dir: Path) -> Path:
    """A bare name is a file in queries_dir; anything with a suffix or a slash is a path."""
    candidate = Path(name_or_path)
    if candidate.suffix or len(candidate.parts) > 1:
        if not candidate.is_file():
            raise ValueError(f"query file {candidate} does not exist")
        return candidate
    path = queries_dir / f"{name_or_path}.sql"
    if not path.is_file():
        known = ", ".join(list_queries(queries_dir)) or "none"
        raise ValueError(f"unknown query {str(name_or_path)!r} in {queries_dir}; known queries: {known}")
    return path


def _split_header(path: Path) -> tuple[dict[str, str], str]:
    """Read the leading `-- key: value` lines; every key must appear exactly once."""
    lines = path.read_text().splitlines()
    header: dict[str, str] = {}
    body_start = len(lines)
    for index, line in enumerate(lines):
        match = _HEADER_LINE.fullmatch(line.strip())
        if match is None:
            body_start = index
            break
        key = match[1].lower()
        if key not in _HEADER_KEYS or key in header:
            raise ValueError(f"{path}: line {index + 1}: unexpected or repeated header key {key!r}")
        header[key] = match[2].strip()
    missing = [k for k in _HEADER_KEYS if k not in header]
    if missing:
        raise ValueError(f"{path}: malformed header, missing {', '.join(missing)} (expected `-- key: value` lines)")
    sql = "\n".join(lines[body_start:]).strip()
    if not sql:
        raise ValueError(f"{path}: no SQL after the header")
    return header, sql


def _tables(value: str) -> tuple[str, ...]:
    return tuple(t.strip().lower() for t in value.split(",") if t.strip())


def _check_tables(path: Path, sql: str, streams: tuple[str, ...], static: tuple[str, ...]) -> None:
    """The header's tables must be exactly the tables the SQL reads, each either stream or static."""
    both = set(streams) & set(static)
    if both:
        raise ValueError(f"{path}: tables listed as both stream and static: {', '.join(sorted(both))}")
    try:
        read = table_names(parse_query(sql))
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from err
    declared = set(streams) | set(static)
    problems = []
    if declared - read:
        problems.append(f"header names tables the SQL does not read: {', '.join(sorted(declared - read))}")
    if read - declared:
        problems.append(f"SQL reads tables the header does not name: {', '.join(sorted(read - declared))}")
    if problems:
        raise ValueError(f"{path}: " + "; ".join(problems))
