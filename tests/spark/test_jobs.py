"""The spark-submit jobs: checked inputs, atomic and idempotent outputs, clear errors.

One test runs the real `spark-submit`, twice (15-50 s each, by load); the rest call `main(argv)` in
process on the shared session, mostly with the hand-written decompositions of conftest.py.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow.parquet as pq
import pytest

from airflow_iqp.spark import run_merge, run_partial
from airflow_iqp.spark.jobs import common, merge_job, partial_job
from airflow_iqp.spark.jobs.output import MARKER
from airflow_iqp.tpch.generate import STATIC_TABLES
from airflow_iqp.tpch.manifest import MANIFEST_NAME, part_name

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from airflow_iqp.spark.runner import Decomposition
    from tests.spark.conftest import FakeDecomposition

Files = Callable[[str, Sequence[int]], list[str]]


@pytest.fixture(autouse=True)
def fake_queries(monkeypatch: pytest.MonkeyPatch, decompositions: dict[str, FakeDecomposition]) -> None:
    """In process, the hand-written decompositions load by name; other names are real queries."""

    def load(query: str) -> tuple[str, Decomposition, list[str]]:
        if query not in decompositions:
            return common.load_decomposition(query)
        d = decompositions[query]
        return query, d, list(d.static_tables)

    monkeypatch.setattr(partial_job, "load_decomposition", load)
    monkeypatch.setattr(merge_job, "load_decomposition", load)


def run_partial_job(
    tmp: Path, tpch_dir: Path, query: str, batch: dict[str, list[str]], output: Path, static: Path | None = None
) -> int:
    batch_file = tmp / f"batch-{output.name}.json"
    batch_file.write_text(json.dumps(batch))
    return partial_job.main(
        [
            "--query",
            query,
            "--batch",
            str(batch_file),
            "--static",
            str(static or tpch_dir / "static"),
            "--manifest",
            str(tpch_dir / MANIFEST_NAME),
            "--output",
            str(output),
        ]
    )


def spark_submit(script: Path, args: list[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    cmd = [str(Path(sys.executable).parent / "spark-submit"), "--master", "local[2]", str(script), *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)


def test_spark_submit_partial_then_merge(
    request: pytest.FixtureRequest, tmp_path: Path, tpch_dir: Path, stream_files: Files
) -> None:
    """First in this file, and the shared session is fetched only afterwards: one JVM at a time."""
    batch = tmp_path / "batch.json"
    batch.write_text(json.dumps({"lineitem": stream_files("lineitem", range(14))}))
    partial, result = tmp_path / "out" / "batch-0", tmp_path / "out" / "result"
    done = spark_submit(
        Path(partial_job.__file__),
        [
            "--query",
            "q14",
            "--batch",
            str(batch),
            "--static",
            str(tpch_dir / "static"),
            "--manifest",
            str(tpch_dir / MANIFEST_NAME),
            "--output",
            str(partial),
        ],
    )
    assert done.returncode == 0, done.stderr[-3000:]
    done = spark_submit(Path(merge_job.__file__), ["--query", "q14", "--output", str(result), str(partial)])
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads((result / MARKER).read_text())["input_rows"] == {"lineitem": 60175}

    spark = request.getfixturevalue("spark")
    for table in STATIC_TABLES:
        spark.read.parquet(str(tpch_dir / "static" / table)).createOrReplaceTempView(table)
    _, d, _ = common.load_decomposition("q14")
    lineitem = spark.read.parquet(*stream_files("lineitem", range(14)))
    [expected] = run_merge(spark, d, [run_partial(spark, d, {"lineitem": lineitem})]).collect()
    [got] = pq.read_table(result).to_pylist()
    assert math.isclose(got["promo_revenue"], expected["promo_revenue"], rel_tol=1e-12)


def test_partial_then_merge_commits_the_one_pass_result(
    spark: SparkSession, tmp_path: Path, tpch_dir: Path, stream_files: Files
) -> None:
    outs = [tmp_path / "out" / f"batch-{i}" for i in range(2)]
    for out, indexes in zip(outs, ([0, 1, 2], [3])):
        batch = {s: stream_files(s, indexes) for s in ("orders", "lineitem")}
        assert run_partial_job(tmp_path, tpch_dir, "nations", batch, out) == 0
    marker = json.loads((outs[0] / MARKER).read_text())
    assert marker["kind"] == "partial"
    assert marker["query"] == "nations"
    assert marker["inputs"]["orders"] == stream_files("orders", [0, 1, 2])
    assert marker["input_rows"]["lineitem"] == sum(
        pq.read_metadata(f).num_rows for f in stream_files("lineitem", [0, 1, 2])
    )
    assert marker["rows"] == 25

    result = tmp_path / "out" / "result"
    assert merge_job.main(["--query", "nations", "--output", str(result), *map(str, outs)]) == 0
    merged = spark.read.parquet(str(result)).collect()
    assert len(list(result.glob("*.parquet"))) == 1
    all_rows = spark.read.parquet(*stream_files("lineitem", range(4)))
    assert sum(r["cnt"] for r in merged) == all_rows.count()
    assert [r["n_name"] for r in merged] == sorted(r["n_name"] for r in merged)
    assert json.loads((result / MARKER).read_text())["partials"] == [str(p) for p in outs]


def test_a_retried_batch_replaces_its_own_output(
    spark: SparkSession, tmp_path: Path, tpch_dir: Path, stream_files: Files
) -> None:
    out = tmp_path / "out" / "batch-0"
    batch = {"lineitem": stream_files("lineitem", [4, 5])}
    assert run_partial_job(tmp_path, tpch_dir, "flags", batch, out) == 0
    first = sorted(spark.read.parquet(str(out)).collect())
    assert run_partial_job(tmp_path, tpch_dir, "flags", batch, out) == 0
    assert sorted(spark.read.parquet(str(out)).collect()) == first
    assert [p.name for p in out.parent.iterdir()] == ["batch-0"]  # no temp or old copy left behind
    assert json.loads((out / MARKER).read_text())["rows"] == len(first)


def test_a_failed_write_leaves_the_committed_output_alone(
    tmp_path: Path, tpch_dir: Path, stream_files: Files, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_iqp.spark.jobs import output

    out = tmp_path / "out" / "batch-0"
    batch = {"orders": stream_files("orders", [1])}
    assert run_partial_job(tmp_path, tpch_dir, "total", batch, out) == 0
    committed = (out / MARKER).read_text()

    def crash(new: Path, target: Path) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(output, "replace_dir", crash)
    with pytest.raises(OSError, match="disk gone"):
        run_partial_job(tmp_path, tpch_dir, "total", batch, out)
    assert (out / MARKER).read_text() == committed
    assert [p.name for p in out.parent.iterdir()] == ["batch-0"]


def expect_error(capsys: pytest.CaptureFixture[str], code: int, message: str) -> None:
    assert code == 2
    assert message in capsys.readouterr().err


def test_missing_input_file_is_an_error(
    tmp_path: Path, tpch_dir: Path, stream_files: Files, capsys: pytest.CaptureFixture[str]
) -> None:
    gone = str(tmp_path / "landing" / "orders" / part_name(3))
    code = run_partial_job(tmp_path, tpch_dir, "total", {"orders": [gone]}, tmp_path / "out")
    expect_error(capsys, code, f"input file {gone} of stream 'orders' does not exist")
    assert not (tmp_path / "out").exists()


def test_row_count_disagreeing_with_the_manifest_is_an_error(
    tmp_path: Path, tpch_dir: Path, stream_files: Files, capsys: pytest.CaptureFixture[str]
) -> None:
    truncated = tmp_path / "landing" / "orders" / part_name(1)
    truncated.parent.mkdir(parents=True)
    pq.write_table(pq.read_table(stream_files("orders", [1])[0]).slice(0, 10), truncated)
    code = run_partial_job(tmp_path, tpch_dir, "total", {"orders": [str(truncated)]}, tmp_path / "out")
    expect_error(capsys, code, f"input file {truncated} has 10 rows but the manifest records")
    stranger = truncated.with_name("part-77777.parquet")
    shutil.copyfile(truncated, stranger)
    code = run_partial_job(tmp_path, tpch_dir, "total", {"orders": [str(stranger)]}, tmp_path / "out")
    expect_error(capsys, code, "file 'part-77777.parquet' of stream 'orders' is not in the manifest")


def test_missing_static_table_is_an_error(
    tmp_path: Path, tpch_dir: Path, stream_files: Files, capsys: pytest.CaptureFixture[str]
) -> None:
    static = tmp_path / "static"
    shutil.copytree(tpch_dir / "static" / "customer", static / "customer")
    batch = {s: stream_files(s, [0]) for s in ("orders", "lineitem")}
    code = run_partial_job(tmp_path, tpch_dir, "nations", batch, tmp_path / "out", static=static)
    expect_error(capsys, code, f"static table 'nation' not found: {static / 'nation'} does not exist")


def test_batch_must_give_exactly_the_querys_streams(
    tmp_path: Path, tpch_dir: Path, stream_files: Files, capsys: pytest.CaptureFixture[str]
) -> None:
    batch = {s: stream_files(s, [0]) for s in ("orders", "lineitem")}
    code = run_partial_job(tmp_path, tpch_dir, "total", batch, tmp_path / "out")
    expect_error(capsys, code, "query total reads streams ['orders'], the batch gives ['lineitem', 'orders']")


def test_merge_refuses_uncommitted_or_overlapping_partials(
    tmp_path: Path, tpch_dir: Path, stream_files: Files, capsys: pytest.CaptureFixture[str]
) -> None:
    outs = [tmp_path / "out" / f"batch-{i}" for i in range(3)]
    for out, indexes in zip(outs, ([0, 1], [2], [1, 3])):
        assert run_partial_job(tmp_path, tpch_dir, "total", {"orders": stream_files("orders", indexes)}, out) == 0
    result = tmp_path / "out" / "result"

    code = merge_job.main(["--query", "total", "--output", str(result), str(outs[0]), str(outs[2])])
    expect_error(capsys, code, f"input file {stream_files('orders', [1])[0]} is in two partials")

    (outs[1] / MARKER).unlink()  # as if the job died before committing
    code = merge_job.main(["--query", "total", "--output", str(result), str(outs[0]), str(outs[1])])
    expect_error(capsys, code, f"output {outs[1]} has no {MARKER} marker")

    code = merge_job.main(["--query", "flags", "--output", str(result), str(outs[0])])
    expect_error(capsys, code, "is not a partial output of query flags")
    assert not result.exists()
