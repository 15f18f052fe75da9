"""Static inputs of a query: tables that do not arrive over time, read whole by every batch.

A DAG file names each one by a path (a Parquet directory or file: absolute, `file://`, or a URI
Spark can read) or by a table in the Spark catalog (`products`, `sales_db.products`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from airflow_iqp.exceptions import InvalidDeclaration

_TABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*){0,2}")


@dataclass(frozen=True)
class StaticInput:
    """Exactly one of `path` (read as Parquet) or `table` (a Spark catalog table)."""

    path: str | None = None
    table: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON values, as the Spark job spec takes them."""
        return {"path": self.path, "table": self.table}


def static_input(name: str, value: object) -> StaticInput:
    """What `static={name: value}` declares; anything else is an InvalidDeclaration saying what to give."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidDeclaration(f"static[{name!r}] must be a path or a catalog table name, got {value!r}")
    value = value.strip()
    if urlsplit(value).scheme or value.startswith("/"):
        return StaticInput(path=value)
    if _TABLE.fullmatch(value):
        return StaticInput(table=value)
    raise InvalidDeclaration(
        f"static[{name!r}] = {value!r} is neither an absolute path or URI (a Parquet directory, e.g. "
        f"'/data/dim/{name}' or 's3://bucket/dim/{name}/') nor a Spark catalog table name (e.g. 'sales_db.{name}'); "
        "workers do not share the DAG file's working directory, so relative paths are refused"
    )
