"""The spark-submit jobs on files no iqp command wrote: a made-up schema, random file names, in
Parquet, CSV and JSON. Batched partials plus the merge equal one Spark SQL pass; inputs are
checked (a missing file is named, a corrupt one is named, reported and exits 3); outputs are
atomic and idempotent.

They call `main(argv)` in process on the shared session; the real `spark-submit` of the same jobs
runs in tests/integration/test_paths.py (through Airflow) and tests/spark/test_cluster.py.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import pytest

from airflow_iqp.spark.jobs import merge_job, output, partial_job
from airflow_iqp.spark.jobs.common import BAD_INPUT, CORRUPT_INPUT
from airflow_iqp.spark.jobs.output import MARKER
from airflow_iqp.spark.jobs.spec import MergeSpec, PartialSpec, StaticInput, StreamInput
from tests.spark.compare import assert_same, sort_key

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from pyspark.sql import DataFrame, Row, SparkSession

SALES_DDL = "sale_id BIGINT, product_id INT, qty INT, amount DECIMAL(12,2), sold_at TIMESTAMP, channel STRING"
SALES_TYPES: dict[str, pa.DataType] = {
    "sale_id": pa.int64(),
    "product_id": pa.int32(),
    "qty": pa.int32(),
    "amount": pa.decimal128(12, 2),
    "sold_at": pa.timestamp("us"),
    "channel": pa.string(),
}
SALES_SCHEMA = pa.schema(SALES_TYPES)
PRODUCT_TYPES: dict[str, pa.DataType] = {"product_id": pa.int32(), "category": pa.string()}
PRODUCTS_SCHEMA = pa.schema(PRODUCT_TYPES)
CATEGORIES = ("garden", "kitchen", "toys", "books", "tools")
FILES, ROWS_PER_FILE, PRODUCTS = 6, 80, 15
Format = Literal["parquet", "csv", "json"]
FORMATS: tuple[Format, ...] = ("parquet", "csv", "json")
BATCHES = ([0, 1], [2], [3, 4, 5])
QUERIES = {
    # the old header lines are comments to the job
    "by_channel": "-- name: by_channel\n-- streams: sales\n-- static:\n"
    "SELECT channel, count(*) AS sales, sum(qty) AS items, sum(amount) AS revenue, min(sold_at) AS first_sale, "
    "avg(qty) AS mean_qty FROM sales GROUP BY channel ORDER BY channel",
    "by_category": "SELECT p.category, count(*) AS sales, sum(s.amount) AS revenue, max(s.qty) AS most "
    "FROM sales s JOIN products p ON s.product_id = p.product_id "
    "WHERE s.sold_at >= TIMESTAMP '2026-01-01 06:00:00' AND p.category <> '{none}' GROUP BY p.category",
    "total": "SELECT count(*) AS n, sum(amount) AS revenue FROM sales",
}


@dataclass(frozen=True)
class Landing:
    """Files of one made-up stream in every format, a static table, and the rows as written."""

    root: Path
    files: dict[str, list[Path]]  # format -> the same rows in FILES files
    products: Path  # a directory of Parquet files
    rows: list[dict[str, Any]]  # every row, in file order

    def query(self, name: str) -> Path:
        return self.root / "queries" / f"{name}.sql"


def make_rows(rng: np.random.Generator) -> list[dict[str, Any]]:
    start = datetime(2026, 1, 1)
    channels = ["web", "store", "phone", None]
    return [
        {
            "sale_id": i,
            "product_id": int(rng.integers(1, PRODUCTS + 1)),
            "qty": int(rng.integers(1, 10)),
            "amount": Decimal(int(rng.integers(100, 100_000))).scaleb(-2),
            "sold_at": start + timedelta(seconds=int(rng.integers(0, 12 * 3600))),
            "channel": channels[int(rng.choice(4, p=[0.45, 0.3, 0.2, 0.05]))],
        }
        for i in range(FILES * ROWS_PER_FILE)
    ]


def write_file(rows: list[dict[str, Any]], fmt: Format, path: Path) -> None:
    if fmt == "parquet":
        pq.write_table(pa.Table.from_pylist(rows, SALES_SCHEMA), path)
    elif fmt == "csv":
        pa_csv.write_csv(pa.Table.from_pylist(rows, SALES_SCHEMA), path)
    else:
        lines = [json.dumps({**r, "amount": str(r["amount"]), "sold_at": r["sold_at"].isoformat()}) for r in rows]
        path.write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def landing(tmp_path_factory: pytest.TempPathFactory) -> Landing:
    return write_landing(tmp_path_factory.mktemp("landing"))


def write_landing(root: Path) -> Landing:
    """The stream in every format, the products and the query files under `root`."""
    rng = np.random.default_rng(10)
    rows = make_rows(rng)
    files: dict[str, list[Path]] = {}
    for fmt in FORMATS:
        (root / fmt).mkdir()
        files[fmt] = [root / fmt / f"{uuid.uuid4().hex}.{fmt}" for _ in range(FILES)]
        for i, path in enumerate(files[fmt]):
            write_file(rows[i * ROWS_PER_FILE : (i + 1) * ROWS_PER_FILE], fmt, path)
    products = root / "dim" / "products"
    products.mkdir(parents=True)
    table = [{"product_id": i, "category": CATEGORIES[i % len(CATEGORIES)]} for i in range(1, PRODUCTS + 1)]
    pq.write_table(pa.Table.from_pylist(table, PRODUCTS_SCHEMA), products / f"{uuid.uuid4().hex}.parquet")
    (root / "queries").mkdir()
    for name, sql in QUERIES.items():
        (root / "queries" / f"{name}.sql").write_text(sql)
    return Landing(root, files, products, rows)


def stream_input(fmt: Format, files: Sequence[Path], **extra: Any) -> StreamInput:
    """How a user declares each format: Parquet with the files' own schema, CSV and JSON with a DDL."""
    if fmt == "parquet":
        return StreamInput(files=[str(f) for f in files], **extra)
    options = {"header": "true"} if fmt == "csv" else {}
    return StreamInput(format=fmt, schema=SALES_DDL, options=options, files=[str(f) for f in files], **extra)


def partial_spec(
    landing: Landing,
    query: str,
    output: Path,
    sales: StreamInput,
    static: dict[str, StaticInput] | None = None,
) -> PartialSpec:
    if static is None and query == "by_category":
        static = {"products": StaticInput(path=str(landing.products))}
    return PartialSpec(
        name=query, query=str(landing.query(query)), streams={"sales": sales}, static=static or {}, output=str(output)
    )


def run_partial(spec: PartialSpec, stale_report: bool = False) -> tuple[int, dict[str, Any] | None]:
    """Exit code of partial_job.main on `spec` (as JSON), and its report if it wrote one."""
    out = Path(spec.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    spec_file, report = out.with_name(out.name + ".spec.json"), out.with_name(out.name + ".report.json")
    spec_file.write_text(spec.to_json())
    if stale_report:
        report.write_text('{"corrupt": [{"stream": "sales", "file": "/stale", "error": "old"}]}')
    code = partial_job.main(["--spec", str(spec_file), "--report", str(report)])
    return code, json.loads(report.read_text()) if report.exists() else None


def run_merge(landing: Landing, query: str, partials: Sequence[Path], result: Path) -> int:
    spec = MergeSpec(
        name=query,
        query=str(landing.query(query)),
        streams=["sales"],
        partials=[str(p) for p in partials],
        output=str(result),
    )
    spec_file = result.with_name(result.name + ".spec.json")
    spec_file.parent.mkdir(parents=True, exist_ok=True)
    spec_file.write_text(spec.to_json())
    return merge_job.main(["--spec", str(spec_file)])


def read_sales(spark: SparkSession, fmt: Format, files: Sequence[Path]) -> DataFrame:
    """The stream as the single pass reads it (independently of the job's reader)."""
    if fmt == "parquet":
        return spark.read.parquet(*map(str, files))
    reader = spark.read.schema(SALES_DDL)
    return reader.csv(list(map(str, files)), header=True) if fmt == "csv" else reader.json(list(map(str, files)))


def one_pass(spark: SparkSession, landing: Landing, query: str, sales: DataFrame) -> tuple[list[str], list[Row]]:
    """Columns and rows of the query in one Spark SQL pass over `sales` (and the static products)."""
    sales.createOrReplaceTempView("sales")
    spark.read.parquet(str(landing.products)).createOrReplaceTempView("products")
    try:
        result = spark.sql(QUERIES[query])
        return result.columns, result.collect()
    finally:
        spark.catalog.dropTempView("sales")
        spark.catalog.dropTempView("products")


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("query", ["by_channel", "by_category"])
def test_batched_jobs_equal_one_pass(
    spark: SparkSession, tmp_path: Path, landing: Landing, fmt: Format, query: str
) -> None:
    files = landing.files[fmt]
    outs = [tmp_path / f"batch-{i}" for i in range(len(BATCHES))]
    for out, batch in zip(outs, BATCHES):
        spec = partial_spec(landing, query, out, stream_input(fmt, [files[i] for i in batch]))
        assert run_partial(spec) == (0, None)
    marker = json.loads((outs[0] / MARKER).read_text())
    assert (marker["kind"], marker["query"]) == ("partial", query)
    assert marker["inputs"] == {"sales": [str(files[0]), str(files[1])]}
    assert marker["input_rows"] == {"sales": 2 * ROWS_PER_FILE}

    result = tmp_path / "result"
    assert run_merge(landing, query, outs, result) == 0
    assert json.loads((result / MARKER).read_text())["input_rows"] == {"sales": len(landing.rows)}
    assert len(list(result.glob("*.parquet"))) == 1
    merged = spark.read.parquet(str(result)).collect()
    _, expected = one_pass(spark, landing, query, read_sales(spark, fmt, files))
    assert_same(merged, expected, ordered=query == "by_channel")
    if query == "by_channel":  # and against the rows as written, so no reader lost or nulled any
        assert sum(r["sales"] for r in merged) == len(landing.rows)
        assert sum(r["revenue"] for r in merged) == sum(r["amount"] for r in landing.rows)


@pytest.fixture
def catalog_table(spark: SparkSession, tmp_path: Path, landing: Landing) -> Iterator[str]:
    """The products as a table in a database of the session's catalog, as a team's shared dimension."""
    spark.sql(f"CREATE DATABASE iqp_jobs_test LOCATION '{tmp_path / 'warehouse'}'")
    spark.sql(f"CREATE TABLE iqp_jobs_test.products USING parquet LOCATION '{landing.products}'")
    yield "iqp_jobs_test.products"
    spark.sql("DROP DATABASE iqp_jobs_test CASCADE")


def test_static_table_from_the_catalog(
    spark: SparkSession, tmp_path: Path, landing: Landing, catalog_table: str
) -> None:
    files = landing.files["parquet"]
    static = {"products": StaticInput(table=catalog_table)}
    outs = [tmp_path / "batch-0", tmp_path / "batch-1"]
    for out, batch in zip(outs, (files[:4], files[4:])):
        spec = partial_spec(landing, "by_category", out, stream_input("parquet", batch), static)
        assert run_partial(spec) == (0, None)
    assert run_merge(landing, "by_category", outs, tmp_path / "result") == 0
    _, expected = one_pass(spark, landing, "by_category", read_sales(spark, "parquet", files))
    assert_same(spark.read.parquet(str(tmp_path / "result")).collect(), expected, ordered=False)


def test_missing_catalog_table_is_named(tmp_path: Path, landing: Landing, capsys: pytest.CaptureFixture[str]) -> None:
    static = {"products": StaticInput(table="iqp_nowhere.products")}
    spec = partial_spec(
        landing, "by_category", tmp_path / "out", stream_input("parquet", landing.files["parquet"][:1]), static
    )
    assert run_partial(spec) == (BAD_INPUT, None)
    assert "static table 'products': the Spark catalog has no table 'iqp_nowhere.products'" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_an_empty_batch_merges_like_no_batch(
    spark: SparkSession, tmp_path: Path, landing: Landing, fmt: Format
) -> None:
    """An empty file list reads as no rows with the declared schema (CSV), or with a schema file's (Parquet)."""
    files = landing.files[fmt]
    extra = {"schema_file": str(files[0])} if fmt == "parquet" else {}
    outs = [tmp_path / f"batch-{i}" for i in range(3)]
    for out, batch in zip(outs, (files[:3], [], files[3:])):
        assert run_partial(partial_spec(landing, "by_category", out, stream_input(fmt, batch, **extra))) == (0, None)
    assert json.loads((outs[1] / MARKER).read_text())["input_rows"] == {"sales": 0}
    assert run_merge(landing, "by_category", outs, tmp_path / "result") == 0
    _, expected = one_pass(spark, landing, "by_category", read_sales(spark, fmt, files))
    assert_same(spark.read.parquet(str(tmp_path / "result")).collect(), expected, ordered=False)


@pytest.mark.parametrize(("query", "expected"), [("total", [(0, None)]), ("by_channel", [])])
def test_an_empty_window_gives_the_answer_over_no_rows(
    spark: SparkSession, tmp_path: Path, landing: Landing, query: str, expected: list[tuple[Any, ...]]
) -> None:
    sales = stream_input("csv", [])
    assert run_partial(partial_spec(landing, query, tmp_path / "batch-0", sales)) == (0, None)
    assert run_merge(landing, query, [tmp_path / "batch-0"], tmp_path / "result") == 0
    merged = spark.read.parquet(str(tmp_path / "result"))
    assert [tuple(r) for r in merged.collect()] == expected
    columns, rows = one_pass(spark, landing, query, spark.createDataFrame([], SALES_DDL))
    assert (merged.columns, merged.collect()) == (columns, rows)
    assert json.loads((tmp_path / "result" / MARKER).read_text())["input_rows"] == {"sales": 0}


def test_an_empty_parquet_batch_needs_a_schema(
    tmp_path: Path, landing: Landing, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = partial_spec(landing, "total", tmp_path / "out", stream_input("parquet", []))
    assert run_partial(spec) == (BAD_INPUT, None)
    assert "stream 'sales' has no files in this batch and no schema: declare its schema" in capsys.readouterr().err


def test_corrupt_parquet_files_are_named_and_reported(
    tmp_path: Path, landing: Landing, capsys: pytest.CaptureFixture[str]
) -> None:
    good = landing.files["parquet"]
    noise, truncated = tmp_path / f"{uuid.uuid4().hex}.parquet", tmp_path / f"{uuid.uuid4().hex}.parquet"
    noise.write_bytes(np.random.default_rng(3).bytes(4000))
    truncated.write_bytes(good[2].read_bytes()[: good[2].stat().st_size // 2])
    files = [good[0], noise, good[1], truncated]
    out = tmp_path / "out" / "batch-0"
    code, report = run_partial(partial_spec(landing, "total", out, stream_input("parquet", files)), stale_report=True)
    assert code == CORRUPT_INPUT
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(
        f"partial_job: error: input file {noise} of stream 'sales' cannot be read: not a readable Parquet"
    )
    assert "(and 1 more unreadable file(s), listed in the report)" in err
    assert report is not None
    assert [(c["stream"], c["file"]) for c in report["corrupt"]] == [("sales", str(noise)), ("sales", str(truncated))]
    assert all("Parquet" in c["error"] and "\n" not in c["error"] for c in report["corrupt"])
    assert not out.exists()
    assert not [p for p in out.parent.iterdir() if p.is_dir()]  # no half-written output either

    quarantined = [f for f in files if str(f) not in {c["file"] for c in report["corrupt"]}]
    assert run_partial(partial_spec(landing, "total", out, stream_input("parquet", quarantined))) == (0, None)
    assert json.loads((out / MARKER).read_text())["input_rows"] == {"sales": 2 * ROWS_PER_FILE}


def test_a_parquet_file_with_a_sound_footer_and_broken_pages_is_found(
    tmp_path: Path, landing: Landing, capsys: pytest.CaptureFixture[str]
) -> None:
    good = landing.files["parquet"]
    broken = tmp_path / f"{uuid.uuid4().hex}.parquet"
    data = bytearray(good[3].read_bytes())
    amount = pq.read_metadata(good[3]).row_group(0).column(3)  # a column the query reads
    data[amount.data_page_offset : amount.data_page_offset + 32] = b"\xff" * 32
    broken.write_bytes(bytes(data))
    out = tmp_path / "batch-0"
    code, report = run_partial(partial_spec(landing, "total", out, stream_input("parquet", [good[0], broken, good[1]])))
    assert code == CORRUPT_INPUT
    assert f"input file {broken} of stream 'sales' cannot be read: not readable as parquet" in capsys.readouterr().err
    assert report is not None
    assert [(c["stream"], c["file"]) for c in report["corrupt"]] == [("sales", str(broken))]
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.is_dir()]  # the failed write left nothing behind


@pytest.mark.parametrize(
    ("fmt", "bad_row", "cause"),
    [
        ("csv", "7,3,2,oops,2026-01-01 01:00:00,web\n", "NumberFormatException"),
        ("json", '{"sale_id": 7, "qty": 2, "amount": "12.50", "sold_at": "2026-01-01T01:0', "JsonEOFException"),
    ],
)
def test_a_corrupt_text_file_is_found_among_good_ones(
    tmp_path: Path, landing: Landing, capsys: pytest.CaptureFixture[str], fmt: Format, bad_row: str, cause: str
) -> None:
    good = landing.files[fmt]
    bad = tmp_path / f"{uuid.uuid4().hex}.{fmt}"
    bad.write_text(good[1].read_text() + bad_row)
    out = tmp_path / "batch-0"
    code, report = run_partial(partial_spec(landing, "total", out, stream_input(fmt, [good[0], bad, good[2]])))
    assert code == CORRUPT_INPUT
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"input file {bad} of stream 'sales' cannot be read: not readable as {fmt} with the schema" in err
    assert cause in err
    assert report is not None
    assert [(c["stream"], c["file"]) for c in report["corrupt"]] == [("sales", str(bad))]
    assert not out.exists()


def test_a_missing_file_is_named_and_no_report_is_left(
    tmp_path: Path, landing: Landing, capsys: pytest.CaptureFixture[str]
) -> None:
    gone = tmp_path / "landing" / f"{uuid.uuid4().hex}.parquet"
    files = [landing.files["parquet"][0], gone]
    code, report = run_partial(partial_spec(landing, "total", tmp_path / "out", stream_input("parquet", files)), True)
    assert (code, report) == (BAD_INPUT, None)
    assert f"input file {gone} of stream 'sales' does not exist" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("extra_stream", "query total reads streams ['sales'], the spec gives ['returns', 'sales']"),
        (
            "no_static",
            "query by_category reads table(s) ['products'], which the spec gives as neither stream nor static",
        ),
        ("distinct", "query file {query}: SELECT DISTINCT at the top level cannot be merged exactly"),
        ("bad_schema", "stream 'sales': schema 'sale_id BIGINT,, x' is not a Spark DDL schema: [PARSE_SYNTAX_ERROR]"),
    ],
)
def test_a_spec_that_does_not_fit_the_query(
    tmp_path: Path, landing: Landing, capsys: pytest.CaptureFixture[str], change: str, message: str
) -> None:
    parquet = stream_input("parquet", landing.files["parquet"][:1])
    query, static = ("by_category", dict[str, StaticInput]()) if change == "no_static" else ("total", None)
    spec = partial_spec(landing, query, tmp_path / "out", parquet, static)
    if change == "extra_stream":
        spec = spec.model_copy(update={"streams": {"sales": parquet, "returns": parquet}})
    elif change == "distinct":
        (tmp_path / "distinct.sql").write_text("SELECT DISTINCT channel FROM sales")
        spec = spec.model_copy(update={"query": str(tmp_path / "distinct.sql")})
    elif change == "bad_schema":
        bad = StreamInput(format="csv", schema="sale_id BIGINT,, x", files=[str(landing.files["csv"][0])])
        spec = spec.model_copy(update={"streams": {"sales": bad}})
    assert run_partial(spec) == (BAD_INPUT, None)
    assert message.format(query=tmp_path / "distinct.sql") in capsys.readouterr().err


def test_a_retried_batch_replaces_its_own_output(spark: SparkSession, tmp_path: Path, landing: Landing) -> None:
    out = tmp_path / "out" / "batch-0"
    spec = partial_spec(landing, "by_channel", out, stream_input("json", landing.files["json"][4:]))
    assert run_partial(spec) == (0, None)
    first = sorted(spark.read.parquet(str(out)).collect(), key=sort_key)
    assert run_partial(spec) == (0, None)
    assert sorted(spark.read.parquet(str(out)).collect(), key=sort_key) == first
    assert sorted(p.name for p in out.parent.iterdir()) == ["batch-0", "batch-0.spec.json"]  # no temp or old copy
    assert json.loads((out / MARKER).read_text())["rows"] == len(first)


def test_a_failed_write_leaves_the_committed_output_alone(
    tmp_path: Path, landing: Landing, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out" / "batch-0"
    spec = partial_spec(landing, "total", out, stream_input("parquet", landing.files["parquet"][:1]))
    assert run_partial(spec) == (0, None)
    committed = (out / MARKER).read_text()

    def crash(new: Path, target: Path) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(output, "replace_dir", crash)
    with pytest.raises(OSError, match="disk gone"):
        run_partial(spec)
    assert (out / MARKER).read_text() == committed
    assert sorted(p.name for p in out.parent.iterdir() if p.is_dir()) == ["batch-0"]


def test_merge_refuses_uncommitted_overlapping_or_foreign_partials(
    tmp_path: Path, landing: Landing, capsys: pytest.CaptureFixture[str]
) -> None:
    files = landing.files["parquet"]
    outs = [tmp_path / "out" / f"batch-{i}" for i in range(3)]
    batches = ([str(files[0]), str(files[1])], [str(files[2])], [f"file://{files[1]}", str(files[3])])
    for out, batch in zip(outs, batches):
        assert run_partial(partial_spec(landing, "total", out, StreamInput(files=batch))) == (0, None)
    result = tmp_path / "out" / "result"

    assert run_merge(landing, "total", [outs[0], outs[2]], result) == BAD_INPUT
    assert f"input file file://{files[1]} is in two partials, {outs[0]} and {outs[2]}" in capsys.readouterr().err

    (outs[1] / MARKER).unlink()  # as if the job died before committing
    assert run_merge(landing, "total", [outs[0], outs[1]], result) == BAD_INPUT
    assert f"output {outs[1]} has no {MARKER} marker" in capsys.readouterr().err

    assert run_merge(landing, "by_channel", [outs[0]], result) == BAD_INPUT
    assert f"{outs[0]} is not a partial output of query by_channel" in capsys.readouterr().err
    assert not result.exists()
