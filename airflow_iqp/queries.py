"""Query files: plain Spark SQL, found by path or, for the packaged TPC-H examples, by name.

A user's query is any `.sql` file; which tables are streams and which are static is declared in
the DAG file (`streams=`, `static=`). A file may start with a header of `-- key: value` lines
(keys name, streams and static, comma-separated table names), as the packaged examples do; a
header is then checked against the tables the SQL reads, so the examples also work outside
Airflow (`iqp fit-cost-model q6`, the simulator).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from airflow_iqp.example_files import example_dir
from airflow_iqp.sql import parse_query, table_names

EXAMPLE_QUERIES = example_dir("queries")
_HEADER_KEYS = ("name", "streams", "static")
_HEADER_LINE = re.compile(r"--\s*(\w+)\s*:(.*)")


@dataclass(frozen=True)
class QueryHeader:
    """What a query file's header says: its stream tables and its static tables."""

    streams: tuple[str, ...]
    static_tables: tuple[str, ...]


@dataclass(frozen=True)
class QueryDefinition:
    """One query file: its name (the file's stem), its SQL, the tables the SQL reads, its header."""

    name: str
    sql: str
    tables: frozenset[str]
    path: Path
    header: QueryHeader | None

    @property
    def streams(self) -> tuple[str, ...]:
        """The header's stream tables; a file without a header has its streams declared in the DAG."""
        if self.header is None:
            raise ValueError(f"{self.path} has no `-- streams:` header: declare its streams where it is used")
        return self.header.streams

    @property
    def static_tables(self) -> tuple[str, ...]:
        """The header's static tables (see `streams`)."""
        if self.header is None:
            raise ValueError(f"{self.path} has no `-- static:` header: declare its static tables where it is used")
        return self.header.static_tables


def list_queries(queries_dir: Path | None = None) -> tuple[str, ...]:
    """Names of the query files, TPC-H first, in numeric order (q1, q3, ..., cq1, ...)."""
    directory = queries_dir or EXAMPLE_QUERIES
    return tuple(sorted((p.stem for p in directory.glob("*.sql")), key=_natural_key))


def load_query(name_or_path: str | Path, base_dir: Path | None = None) -> QueryDefinition:
    """Load a query by path (relative to `base_dir`, e.g. the DAG file's folder) or, for a bare
    name such as `q6`, one of the packaged examples.
    """
    path = resolve_query(name_or_path, base_dir)
    header, sql = _split_header(path)
    try:
        tables = frozenset(table_names(parse_query(sql)))
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from err
    if header is not None:
        _check_header(path, tables, header)
    return QueryDefinition(name=path.stem, sql=sql, tables=tables, path=path, header=header)


def resolve_query(name_or_path: str | Path, base_dir: Path | None = None) -> Path:
    """A bare name is a packaged example; anything with a suffix or a slash is a file path."""
    candidate = Path(name_or_path)
    if candidate.suffix or len(candidate.parts) > 1:
        if not candidate.is_absolute():
            candidate = (base_dir or Path.cwd()) / candidate
        if not candidate.is_file():
            raise ValueError(f"query file {candidate} does not exist")
        return candidate.resolve()
    path = EXAMPLE_QUERIES / f"{name_or_path}.sql"
    if not path.is_file():
        known = ", ".join(list_queries()) or "none"
        raise ValueError(
            f"unknown query {str(name_or_path)!r}: give the path of a .sql file (relative to the DAG file's "
            f"folder, or absolute), or one of the packaged examples: {known}"
        )
    return path


def _natural_key(name: str) -> tuple[bool, str, int]:
    """q<n> before anything else, then by prefix and number, so q10 follows q9."""
    match = re.fullmatch(r"([a-z]+)(\d+)", name)
    return (True, name, 0) if match is None else (match[1] != "q", match[1], int(match[2]))


def _split_header(path: Path) -> tuple[QueryHeader | None, str]:
    """The leading `-- key: value` lines, if any (each key at most once, all three present)."""
    lines = path.read_text().splitlines()
    found: dict[str, str] = {}
    body_start = len(lines)
    for index, line in enumerate(lines):
        match = _HEADER_LINE.fullmatch(line.strip())
        if match is None or match[1].lower() not in _HEADER_KEYS:
            body_start = index
            break
        key = match[1].lower()
        if key in found:
            raise ValueError(f"{path}: line {index + 1}: header key {key!r} repeated")
        found[key] = match[2].strip()
    sql = "\n".join(lines[body_start:]).strip()
    if not sql:
        raise ValueError(f"{path}: no SQL in the file")
    if not found:
        return None, sql
    missing = [k for k in _HEADER_KEYS if k not in found]
    if missing:
        raise ValueError(f"{path}: header without {', '.join(missing)} (expected `-- key: value` lines)")
    if found["name"] != path.stem:
        raise ValueError(f"{path}: header name {found['name']!r} differs from the file name {path.stem!r}")
    return QueryHeader(_tables(found["streams"]), _tables(found["static"])), sql


def _tables(value: str) -> tuple[str, ...]:
    return tuple(t.strip().lower() for t in value.split(",") if t.strip())


def _check_header(path: Path, read: frozenset[str], header: QueryHeader) -> None:
    """The header's tables must be exactly the tables the SQL reads, each either stream or static."""
    streams, static = set(header.streams), set(header.static_tables)
    both = streams & static
    if both:
        raise ValueError(f"{path}: tables listed as both stream and static: {', '.join(sorted(both))}")
    declared = streams | static
    problems = []
    if declared - read:
        problems.append(f"header names tables the SQL does not read: {', '.join(sorted(declared - read))}")
    if read - declared:
        problems.append(f"SQL reads tables the header does not name: {', '.join(sorted(read - declared))}")
    if problems:
        raise ValueError(f"{path}: " + "; ".join(problems))
