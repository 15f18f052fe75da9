"""The job spec: JSON in and out, strict, and every problem named by its field (no Spark here)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from airflow_iqp.spark.jobs.common import JobError
from airflow_iqp.spark.jobs.locations import local_path, spark_location
from airflow_iqp.spark.jobs.spec import MergeSpec, PartialSpec, StaticInput, StreamInput, read_spec


def partial_document(**changes: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "name": "by_channel",
        "query": "/dags/by_channel.sql",
        "streams": {"sales": {"format": "csv", "schema": "id BIGINT", "files": ["/landing/a.csv"]}},
        "static": {"products": {"path": "/dim/products"}},
        "output": "/data/iqp/batch-0000",
    }
    return {**document, **changes}


def write(tmp_path: Path, document: object) -> Path:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(document))
    return path


def test_a_spec_built_in_python_reads_back_equal(tmp_path: Path) -> None:
    spec = PartialSpec(
        name="by_channel",
        query="/dags/by_channel.sql",
        streams={
            "sales": StreamInput(
                format="csv", schema="id BIGINT, amount DECIMAL(12,2)", options={"header": "true"}, files=["/l/a.csv"]
            ),
            "returns": StreamInput(files=[], schema_file="file:///l/returns/x.parquet"),
        },
        static={"products": StaticInput(path="s3a://bucket/dim/"), "regions": StaticInput(table="db.regions")},
        output="/data/iqp/batch-0000",
    )
    text = spec.to_json()
    assert json.loads(text)["streams"]["sales"]["schema"] == "id BIGINT, amount DECIMAL(12,2)"
    path = tmp_path / "spec.json"
    path.write_text(text)
    assert read_spec(PartialSpec, path) == spec
    assert spec.streams["returns"].format == "parquet"
    assert spec.streams["sales"].ddl == "id BIGINT, amount DECIMAL(12,2)"


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"streams": {"sales": {"format": "orc", "files": []}}}, "streams.sales.format: Input should be 'parquet'"),
        ({"streams": {"sales": {"format": "csv", "files": []}}}, "streams.sales: a csv stream needs a 'schema'"),
        (
            {"streams": {"sales": {"files": ["landing/a.parquet"]}}},
            r"streams.sales.files: 'landing/a.parquet' is not abs",
        ),
        (
            {"streams": {"sales": {"files": ["s3://b/a.parquet"]}}},
            "streams.sales.files: 's3://b/a.parquet' is not local",
        ),
        ({"streams": {"sales": {"files": ["/a", "file:///a"]}}}, "streams.sales.files: a file is listed twice"),
        ({"streams": {"sales": {"files": [], "colour": "red"}}}, "streams.sales has an unknown field 'colour'"),
        ({"streams": {"sales": {"files": [], "options": {"header": 1}}}}, "streams.sales.options.header: Input should"),
        (
            {"streams": {"sales": {"format": "json", "schema": "id INT", "files": [], "options": {"MODE": "x"}}}},
            "streams.sales.options: the jobs read in FAILFAST mode",
        ),
        ({"streams": {}}, "streams: Dictionary should have at least 1 item"),
        ({"static": {"p": {}}}, "static.p: give exactly one of 'path'"),
        ({"static": {"p": {"path": "/d", "table": "db.p"}}}, "static.p: give exactly one of 'path'"),
        ({"static": {"p": {"table": "db.p", "options": {"a": "b"}}}}, "static.p: 'options' and 'schema' describe"),
        ({"static": {"p": {"path": "dim/p"}}}, "static.p: 'dim/p' is not absolute"),
        ({"static": {"SALES": {"path": "/d"}}}, r"table names must differ \(case-insensitively\).*\['sales'\]"),
        ({"output": "s3://bucket/out"}, "output: 's3://bucket/out' is not local"),
        ({"query": "file://host/q.sql"}, "query: 'file://host/q.sql' is not a local file URI"),
        ({"name": ""}, "name: String should have at least 1 character"),
        ({"output": None}, "output: Input should be a valid string"),
    ],
)
def test_a_bad_field_is_named(tmp_path: Path, changes: dict[str, Any], match: str) -> None:
    document = partial_document(**changes)
    with pytest.raises(JobError, match=match):
        read_spec(PartialSpec, write(tmp_path, document))


def test_a_missing_field_and_every_problem_at_once(tmp_path: Path) -> None:
    document = partial_document()
    del document["output"]
    document["streams"]["sales"]["format"] = "xml"
    with pytest.raises(JobError) as caught:
        read_spec(PartialSpec, write(tmp_path, document))
    assert "output is missing" in str(caught.value)
    assert "streams.sales.format" in str(caught.value)
    assert "\n" not in str(caught.value)


def test_merge_spec(tmp_path: Path) -> None:
    document = {"name": "q", "query": "/q.sql", "streams": ["sales"], "partials": ["/w/b0", "/w/b1"], "output": "/w/r"}
    assert read_spec(MergeSpec, write(tmp_path, document)).partials == ["/w/b0", "/w/b1"]
    with pytest.raises(JobError, match="partials: List should have at least 1 item"):
        read_spec(MergeSpec, write(tmp_path, {**document, "partials": []}))
    with pytest.raises(JobError, match="partials: a partial output is listed twice"):
        read_spec(MergeSpec, write(tmp_path, {**document, "partials": ["/w/b0", "file:///w/b0"]}))
    with pytest.raises(JobError, match="has an unknown field 'static'"):
        read_spec(MergeSpec, write(tmp_path, partial_document()))


def test_unreadable_spec_files(tmp_path: Path) -> None:
    with pytest.raises(JobError, match=f"spec file {tmp_path / 'gone.json'} does not exist"):
        read_spec(PartialSpec, tmp_path / "gone.json")
    (tmp_path / "bad.json").write_text("{'name': 1}")
    with pytest.raises(JobError, match="is not valid JSON"):
        read_spec(PartialSpec, tmp_path / "bad.json")


def test_local_locations() -> None:
    assert local_path("file:///data/a%20b.csv") == Path("/data/a b.csv")
    assert local_path("file:/data/x") == Path("/data/x")
    assert local_path("file://localhost/data/x") == Path("/data/x")
    assert spark_location(Path("/data/a[1] {b}*?.csv")) == r"file:///data/a\[1\] \{b\}\*\?.csv"
    with pytest.raises(ValueError, match="not local"):
        local_path("hdfs://nn/data")
