"""What the operators of a window share: the run's window, its work directory, and the Spark job
specs built from a declaration and a batch's frozen files."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, cast

import pendulum
import pytest

from airflow_iqp.declaration import declare
from airflow_iqp.operators.window import merge_spec, partial_spec, run_window, spark_uri, window_dir
from airflow_iqp.streams.spec import FileStream

if TYPE_CHECKING:
    from pathlib import Path

    from airflow.sdk import Context

    from airflow_iqp.declaration import Declaration

START, END = datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 1, 0, 2, tzinfo=UTC)


def test_the_window_is_the_runs_data_interval() -> None:
    context = cast("Context", {"data_interval_start": START, "data_interval_end": END, "run_id": "r"})
    assert run_window(context) == (START, END)


def test_the_window_comes_back_as_plain_utc_datetimes() -> None:
    berlin = pendulum.timezone("Europe/Berlin")
    context = cast(
        "Context",
        {
            "data_interval_start": pendulum.instance(START).in_timezone(berlin),
            "data_interval_end": pendulum.instance(END + timedelta(microseconds=5)).in_timezone(berlin),
            "run_id": "r",
        },
    )
    start, end = run_window(context)
    assert (type(start), type(end)) == (datetime, datetime)
    assert (start, end) == (START, END + timedelta(microseconds=5))
    assert start.tzinfo is UTC
    assert end - start == timedelta(minutes=2, microseconds=5)


def test_a_run_without_a_data_interval_is_refused_with_what_to_do() -> None:
    context = cast("Context", {"data_interval_start": None, "data_interval_end": None, "run_id": "manual__x"})
    with pytest.raises(ValueError, match="run manual__x has no data interval.*trigger IQP DAGs with a logical date"):
        run_window(context)


def test_a_windows_work_directory_is_named_by_dag_and_utc_start(tmp_path: Path) -> None:
    assert window_dir(tmp_path, "iqp_q6", START) == tmp_path / "iqp_q6" / "20260101T000000"


@pytest.mark.parametrize(
    ("uri", "spark"),
    [
        ("/data/dim/part", "/data/dim/part"),
        ("file:///data/dim/part", "/data/dim/part"),
        ("s3://bucket/dim/part/", "s3a://bucket/dim/part/"),
        ("gs://bucket/dim/part", "gs://bucket/dim/part"),
    ],
)
def test_spark_names_local_paths_as_paths_and_s3_as_s3a(uri: str, spark: str) -> None:
    assert spark_uri(uri) == spark


@pytest.fixture
def q14(tmp_path: Path) -> Declaration:
    return declare(
        dag_id="iqp_q14",
        query="q14",
        window=timedelta(minutes=2),
        deadline=timedelta(minutes=1),
        streams={"lineitem": FileStream(str(tmp_path / "lineitem"), options={"mergeSchema": "false"})},
        static={"part": f"file://{tmp_path}/static/part"},
        output="/results/{dag_id}/{window_start}",
    )


def test_a_partial_reads_the_frozen_files_as_local_paths(q14: Declaration, tmp_path: Path) -> None:
    files = [f"file://{tmp_path}/lineitem/b.parquet", f"{tmp_path}/lineitem/a.parquet"]
    output = tmp_path / "work" / "batch-0001"
    spec = partial_spec(q14, {"lineitem": files}, output, {"lineitem": f"file://{tmp_path}/lineitem/c.parquet"})
    stream = spec.streams["lineitem"]
    assert stream.paths == [tmp_path / "lineitem" / "b.parquet", tmp_path / "lineitem" / "a.parquet"]
    assert stream.format == "parquet"
    assert stream.options == {"mergeSchema": "false"}
    assert stream.schema_file is None  # a batch with files reads their schema
    assert spec.static["part"].path == f"{tmp_path}/static/part"
    assert spec.static["part"].table is None
    assert (spec.name, spec.query, spec.output) == ("q14", str(q14.query.path), str(output))


def test_an_empty_batch_is_typed_by_a_sample_file_or_the_declared_schema(q14: Declaration, tmp_path: Path) -> None:
    output = tmp_path / "work" / "batch-0000"
    sample = f"file://{tmp_path}/lineitem/later.parquet"
    assert partial_spec(q14, {}, output, {"lineitem": sample}).streams["lineitem"].schema_file == (
        f"{tmp_path}/lineitem/later.parquet"
    )
    empty = partial_spec(q14, {"lineitem": []}, output, {}).streams["lineitem"]
    assert (empty.files, empty.schema_file) == ([], None)


def test_a_catalog_table_is_passed_by_name(tmp_path: Path) -> None:
    declaration = declare(
        dag_id="iqp_q14",
        query="q14",
        window=timedelta(minutes=2),
        deadline=timedelta(minutes=1),
        streams={"lineitem": FileStream(str(tmp_path / "lineitem"))},
        static={"part": "tpch.part"},
        output="/results/{dag_id}/{window_start}",
    )
    spec = partial_spec(declaration, {}, tmp_path / "batch-0000", {})
    assert (spec.static["part"].path, spec.static["part"].table) == (None, "tpch.part")


def test_a_merge_reads_the_committed_partials(q14: Declaration, tmp_path: Path) -> None:
    partials = [str(tmp_path / "batch-0000"), str(tmp_path / "batch-0001")]
    spec = merge_spec(q14, partials, tmp_path / "result")
    assert (spec.name, spec.streams, spec.partials, spec.output) == (
        "q14",
        ["lineitem"],
        partials,
        str(tmp_path / "result"),
    )
