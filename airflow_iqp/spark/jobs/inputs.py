"""A batch's inputs: check and count each stream's files, read them, and read the static tables.

Nothing is written before every input file has been found readable, so a corrupt file fails
the batch with no output at all. Parquet files are checked and counted from their footers
(pyarrow, no Spark pass). CSV and JSON files are parsed by Spark against the declared schema in
FAILFAST mode, counting every column so that no value escapes parsing (Spark skips the columns
a query does not use, and a bare count() would parse none of them); when that pass fails, each
file is read alone to find the culprits. A Parquet file with a sound footer may still hold
pages Spark cannot decode: when the partial itself fails, the same one-by-one search tells such
a file from a failure of another kind.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from airflow_iqp.spark.jobs.common import JobError
from airflow_iqp.spark.jobs.locations import is_remote, local_path, spark_location

if TYPE_CHECKING:
    from collections.abc import Mapping

    from pyspark.sql import DataFrame, DataFrameReader, SparkSession

    from airflow_iqp.spark.jobs.spec import StaticInput, StreamInput

_CAUSE = re.compile(r"^Caused by: (?:[\w$]+\.)*([\w$]+(?:Exception|Error)\b.*)$", re.MULTILINE)
_ERROR_CHARS = 200


@dataclass(frozen=True)
class CorruptFile:
    """An input file that cannot be read, as the job's report lists it."""

    stream: str
    file: str  # as the spec gives it
    error: str  # one line


class CorruptInput(JobError):
    """Input files that cannot be read; the message names the first, `files` lists them all."""

    def __init__(self, files: list[CorruptFile]) -> None:
        first = files[0]
        more = f" (and {len(files) - 1} more unreadable file(s), listed in the report)" if len(files) > 1 else ""
        super().__init__(f"input file {first.file} of stream {first.stream!r} cannot be read: {first.error}{more}")
        self.files = files

    def report(self) -> dict[str, Any]:
        """The report the Airflow task reads to quarantine the files: {"corrupt": [...]}."""
        return {"corrupt": [asdict(f) for f in self.files]}


def one_line(text: str) -> str:
    """A readable single line of at most _ERROR_CHARS characters (Java messages span many)."""
    flat = " ".join("".join(c if c.isprintable() else "?" for c in text).split())
    return flat if len(flat) <= _ERROR_CHARS else flat[: _ERROR_CHARS - 3] + "..."


def spark_error(err: Exception) -> str:
    """The root cause of a failed Spark read, e.g. `NumberFormatException: For input string: "x"`."""
    causes = _CAUSE.findall(str(err))
    return one_line(causes[-1] if causes else str(err))


def check_exist(streams: Mapping[str, StreamInput]) -> None:
    """JobError naming the first missing input file (or schema file of a stream without files)."""
    for name, stream in streams.items():
        for file, path in zip(stream.files, stream.paths):
            if not path.is_file():
                raise JobError(f"input file {file} of stream {name!r} does not exist")
        if not stream.files and stream.schema_file is not None and not local_path(stream.schema_file).is_file():
            raise JobError(f"schema file {stream.schema_file} of stream {name!r} does not exist")


def parquet_rows(name: str, stream: StreamInput) -> tuple[int, list[CorruptFile]]:
    """Rows of a Parquet stream's files from their footers, and the files whose footer is unreadable."""
    import pyarrow as pa  # here, not at the top: every DAG parse and task process imports this module
    import pyarrow.parquet as pq

    rows, corrupt = 0, []
    for file, path in zip(stream.files, stream.paths):
        try:
            rows += pq.read_metadata(path).num_rows
        except (pa.ArrowException, OSError) as err:
            corrupt.append(CorruptFile(name, file, one_line(f"not a readable Parquet file: {err}")))
    return rows, corrupt


def _reader(spark: SparkSession, what: str, stream: StreamInput | StaticInput) -> DataFrameReader:
    """A reader for `stream`'s files (`what` names it in errors: "stream 'sales'")."""
    from pyspark.errors import ParseException

    reader = spark.read.format(stream.format).options(**stream.options)
    if stream.format != "parquet":
        reader = reader.option("mode", "FAILFAST")
    if stream.ddl is not None:
        try:
            reader = reader.schema(stream.ddl)
        except ParseException as err:
            raise JobError(f"{what}: schema {stream.ddl!r} is not a Spark DDL schema: {err.getMessage()}") from None
    return reader


def _locations(stream: StreamInput) -> list[str]:
    return [spark_location(p) for p in stream.paths]


def _count_all_columns(df: DataFrame) -> int:
    """Rows of `df`, parsing every column (a nullable column's count needs its values).

    SQL expressions rather than `pyspark.sql.functions`, whose classic or Connect flavour is
    chosen per process, not per session.
    """
    quoted = ["`" + c.replace("`", "``") + "`" for c in df.columns]
    row = df.selectExpr("count(1)", *[f"count({c})" for c in quoted]).first()
    return int(row[0]) if row is not None else 0


def spark_failures() -> tuple[type[Exception], ...]:
    """What a failed Spark job raises: Py4JJavaError on classic Spark, PySparkException otherwise."""
    from py4j.protocol import Py4JJavaError  # type: ignore[import-untyped]  # py4j ships no types
    from pyspark.errors import PySparkException

    return Py4JJavaError, PySparkException


def cancelled(err: Exception) -> bool:
    """Whether a Spark failure is the job being interrupted (its lease was lost), not bad input."""
    return "OPERATION_CANCELED" in str(err)


def session_works(spark: SparkSession) -> bool:
    """Whether the session still runs a trivial query. When it does not (a Spark Connect server
    that died or restarted, a lost session), a failed read says nothing about the file read.
    """
    try:
        spark.range(1).count()
    except Exception:  # whatever a dead session raises (gRPC, PySpark, Py4J): it does not work
        return False
    return True


def unreadable_files(spark: SparkSession, name: str, stream: StreamInput) -> list[CorruptFile]:
    """The files of `stream` that Spark cannot read alone, every column parsed. A failure the
    session cannot run a trivial query after is raised, not blamed on the file: quarantining a
    good file because the server went away would drop it from the result.
    """
    failures = spark_failures()
    reader = _reader(spark, f"stream {name!r}", stream)
    how = f"{stream.format} with the schema" if stream.ddl is not None else stream.format
    corrupt = []
    for file, path in zip(stream.files, stream.paths):
        try:
            _count_all_columns(reader.load(spark_location(path)))
        except failures as err:
            if cancelled(err) or not session_works(spark):
                raise
            corrupt.append(CorruptFile(name, file, f"not readable as {how}: {spark_error(err)}"))
    return corrupt


def spark_rows(spark: SparkSession, name: str, stream: StreamInput) -> tuple[int, list[CorruptFile]]:
    """Rows of a CSV or JSON stream's files, and the files Spark cannot parse with the schema."""
    if not stream.files:
        return 0, []
    try:
        return _count_all_columns(_reader(spark, f"stream {name!r}", stream).load(_locations(stream))), []
    except spark_failures() as err:
        if cancelled(err):
            raise
        corrupt = unreadable_files(spark, name, stream)
        if not corrupt:  # every file reads alone: the batch failed for another reason
            raise
        return 0, corrupt


def read_stream(spark: SparkSession, name: str, stream: StreamInput) -> DataFrame:
    """The batch's rows of one stream; no files gives no rows, typed by the schema or schema file."""
    reader = _reader(spark, f"stream {name!r}", stream)
    if stream.files:
        return reader.load(_locations(stream))
    if stream.ddl is not None:
        return spark.createDataFrame([], stream.ddl)
    if stream.schema_file is None:
        raise JobError(
            f"stream {name!r} has no files in this batch and no schema: declare its schema (Spark DDL) "
            "or give a schema_file, so that an empty batch still has the stream's columns"
        )
    return spark.createDataFrame([], reader.load(spark_location(local_path(stream.schema_file))).schema)


def read_static(spark: SparkSession, name: str, static: StaticInput) -> DataFrame:
    """A static table: an existing catalog table, or the files at its path."""
    from pyspark.errors import AnalysisException

    if static.path is None:  # the spec gives exactly one of path and table
        if static.table is None or not spark.catalog.tableExists(static.table):
            raise JobError(f"static table {name!r}: the Spark catalog has no table {static.table!r}")
        return spark.table(static.table)
    location = static.path
    if not is_remote(location):
        path = local_path(location)
        if not path.exists():
            raise JobError(f"static table {name!r}: {location} does not exist")
        location = spark_location(path)
    try:
        return _reader(spark, f"static table {name!r}", static).load(location)
    except AnalysisException as err:
        raise JobError(f"static table {name!r}: cannot read {static.path}: {one_line(err.getMessage())}") from None
