"""The job spec: one JSON file per job, the contract between the Airflow operators and the jobs.

A file rather than arguments because a batch may list thousands of paths, and one argument may
not exceed 128 KiB on Linux. The models are strict (a string is a JSON string, no unknown
field), and a bad spec is a `JobError` naming the field to fix, e.g. `streams.sales.format`.

    {"name": "sales_by_category", "query": "/dags/sales_by_category.sql",
     "streams": {"sales": {"format": "csv", "schema": "id BIGINT, amount DECIMAL(12,2)",
                           "options": {"header": "true"}, "files": ["/landing/a.csv"]}},
     "static": {"products": {"path": "/dim/products"}, "regions": {"table": "db.regions"}},
     "output": "/data/iqp/q/20260101T000000/batch-0003"}

Stream files are local: absolute paths or `file:` URIs (see `locations`). A static input is a
path Spark can read, or a catalog table. Python code builds specs with the JSON names too
(`StreamInput(schema=...)`) and writes them with `to_json()`, which keeps those names.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal, Self, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from airflow_iqp.field_errors import common
from airflow_iqp.spark.jobs.common import JobError
from airflow_iqp.spark.jobs.locations import is_remote, local_path

if TYPE_CHECKING:
    from collections.abc import Callable

    from pydantic_core import ErrorDetails

Format = Literal["parquet", "csv", "json"]
Name = Annotated[str, Field(min_length=1)]


def _no_mode(options: dict[str, str]) -> dict[str, str]:
    """CSV and JSON are read in FAILFAST mode, so a corrupt file fails its batch instead of losing rows."""
    if any(key.lower() == "mode" for key in options):
        raise ValueError("the jobs read in FAILFAST mode (a corrupt file fails its batch); remove the 'mode' option")
    return options


Options = Annotated[dict[str, str], AfterValidator(_no_mode)]  # Spark reader options, e.g. {"header": "true"}


class _Model(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    def to_json(self) -> str:
        """The spec as the jobs read it (JSON field names, e.g. `schema`)."""
        return self.model_dump_json(by_alias=True, indent=2)


def _local_and_distinct(what: str) -> Callable[[list[str]], list[str]]:
    """A check that every location is local and none is listed twice (`what` names one in the error)."""

    def check(locations: list[str]) -> list[str]:
        paths = [local_path(location) for location in locations]
        if len(set(paths)) != len(paths):
            raise ValueError(f"{what} is listed twice")
        return locations

    return check


class StreamInput(_Model):
    """One stream's files in this batch, and how to read them."""

    format: Format = "parquet"
    ddl: str | None = Field(default=None, alias="schema", min_length=1)
    options: Options = Field(default_factory=dict)
    files: Annotated[list[str], AfterValidator(_local_and_distinct("a file"))]
    schema_file: str | None = None

    @field_validator("schema_file")
    @classmethod
    def _local(cls, schema_file: str | None) -> str | None:
        if schema_file is not None:
            local_path(schema_file)
        return schema_file

    @model_validator(mode="after")
    def _typed(self) -> Self:
        if self.format != "parquet" and self.ddl is None:
            raise ValueError(
                f"a {self.format} stream needs a 'schema' (Spark DDL), so every batch reads the same types"
            )
        return self

    @property
    def paths(self) -> list[Path]:
        """The files as local paths, in the spec's order."""
        return [local_path(f) for f in self.files]


class StaticInput(_Model):
    """A static table the query joins: files at `path`, or an existing Spark catalog `table`."""

    path: str | None = Field(default=None, min_length=1)
    format: Format = "parquet"
    options: Options = Field(default_factory=dict)
    ddl: str | None = Field(default=None, alias="schema", min_length=1)
    table: str | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        if (self.path is None) == (self.table is None):
            raise ValueError("give exactly one of 'path' (files Spark reads) or 'table' (a Spark catalog table)")
        if self.table is not None and (self.options or self.ddl is not None):
            raise ValueError("'options' and 'schema' describe files at 'path', not a catalog 'table'")
        if self.path is not None and not is_remote(self.path):
            local_path(self.path)  # a plain path must be absolute
        return self


def _disjoint_names(streams: dict[str, StreamInput], static: dict[str, StaticInput]) -> None:
    lower = [n.lower() for n in [*streams, *static]]
    repeated = sorted({n for n in lower if lower.count(n) > 1})
    if repeated:
        raise ValueError(f"table names must differ (case-insensitively) across streams and static: {repeated}")


class PartialSpec(_Model):
    """One batch: the query, each stream's files, the static inputs, and where to commit."""

    name: Name
    query: Name
    streams: Annotated[dict[str, StreamInput], Field(min_length=1)]
    static: dict[str, StaticInput] = Field(default_factory=dict)
    output: Name

    @model_validator(mode="after")
    def _names(self) -> Self:
        _disjoint_names(self.streams, self.static)
        return self

    @field_validator("query", "output")
    @classmethod
    def _is_local(cls, location: str) -> str:
        local_path(location)
        return location


class MergeSpec(_Model):
    """A window's merge: the query, its stream names (for the decomposition) and its committed partials."""

    name: Name
    query: Name
    streams: Annotated[list[Name], Field(min_length=1)]
    partials: Annotated[list[Name], Field(min_length=1), AfterValidator(_local_and_distinct("a partial output"))]
    output: Name

    @field_validator("query", "output")
    @classmethod
    def _is_local(cls, location: str) -> str:
        local_path(location)
        return location


Spec = TypeVar("Spec", PartialSpec, MergeSpec)


def _where(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc) or "the spec"


def _describe(error: ErrorDetails) -> str:
    """One pydantic error as `<field> <what is wrong>`."""
    return common(error, _where) or f"{_where(error['loc'])}: {error['msg']}, got {error['input']!r}"


def read_spec(kind: type[Spec], path: Path) -> Spec:
    """The spec in the JSON file `path`; JobError naming the file and each bad field."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        raise JobError(f"spec file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as err:
        raise JobError(f"spec file {path} cannot be read: {err}") from None
    try:
        return kind.model_validate_json(text)
    except ValidationError as err:
        errors = err.errors()
        if errors[0]["type"] == "json_invalid":
            raise JobError(f"spec file {path} is not valid JSON: {errors[0]['ctx']['error']}") from None
        raise JobError(f"spec file {path}: " + "; ".join(_describe(e) for e in errors)) from None
