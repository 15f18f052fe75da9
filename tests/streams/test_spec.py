"""FileStream: every field is checked at construction; errors name the field and what to fix."""

from __future__ import annotations

import copy
import json
import pickle
from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_iqp.exceptions import InvalidDeclaration
from airflow_iqp.streams.spec import FileStream, StreamFormat, WindowBy


def test_defaults_are_parquet_by_arrival() -> None:
    stream = FileStream("s3://bucket/sales/", conn_id="aws_default")
    assert (stream.format, stream.window_by, stream.lateness) == (StreamFormat.PARQUET, WindowBy.ARRIVAL, timedelta(0))
    assert stream.schema is None
    assert stream.close_marker is None


@pytest.mark.parametrize("path", ["/data/sales", "/data/sales/", "file:///data/sales", "s3://b/x/", "gs://b/x"])
def test_accepts_absolute_paths_and_uris(path: str) -> None:
    assert FileStream(path).path == path


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"path": "data/sales"}, "path 'data/sales' is relative"),
        ({"path": "file://data/sales"}, "is relative"),
        ({"path": "file:sales"}, "is relative"),
        ({"path": ""}, "path must be a directory"),
        ({"path": "/data/*.parquet"}, "looks like a glob"),
        ({"path": "/d", "format": "avro"}, "format must be one of parquet, csv, json, got 'avro'"),
        ({"path": "/d", "format": "csv"}, "format='csv' needs schema="),
        ({"path": "/d", "format": "json"}, "format='json' needs schema="),
        ({"path": "/d", "format": "csv", "schema": "  "}, "schema must be a Spark DDL string"),
        ({"path": "/d", "options": {"header": True}}, "write 'true', not True"),
        ({"path": "/d", "options": ["header"]}, "options must map"),
        ({"path": "/d", "window_by": "event"}, "window_by must be one of arrival, path, got 'event'"),
        ({"path": "/d", "window_by": "path"}, "window_by='path' needs pattern="),
        ({"path": "/d", "pattern": "dt={date}"}, "pattern= is only read with window_by='path'"),
        ({"path": "/d", "window_by": "path", "pattern": "hour={hour}"}, "names no usable time"),
        ({"path": "/d", "window_by": "path", "pattern": "part-{n}"}, "unknown field {n}"),
        ({"path": "/d", "window_by": "path", "pattern": "static"}, "it has no field"),
        ({"path": "/d", "window_by": "path", "pattern": "(?P<date>[0-9"}, "is not a valid regex"),
        ({"path": "/d", "lateness": timedelta(seconds=-1)}, "lateness must be a timedelta >= 0"),
        ({"path": "/d", "lateness": 60}, "lateness must be a timedelta"),
        ({"path": "/d", "close_marker": "DONE"}, "would be read as data"),
        ({"path": "/d", "close_marker": "dt=1/_SUCCESS"}, "must be a file name, not a path"),
        ({"path": "/d", "close_marker": ""}, "close_marker must be a file name"),
        ({"path": "/d", "conn_id": ""}, "conn_id must be an Airflow connection id"),
        ({"path": "/d", "history": timedelta(0)}, "history must be a timedelta > 0"),
        ({"path": "/d", "history": 3600}, "history must be a timedelta > 0"),
    ],
)
def test_refuses_bad_fields_naming_them(fields: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidDeclaration, match="FileStream") as raised:
        FileStream(**fields)  # type: ignore[arg-type]
    assert message in str(raised.value)


def test_horizon_is_the_history_and_at_least_a_window_and_its_lateness() -> None:
    by_path = FileStream("/d", window_by="path", pattern="dt={date}", history=timedelta(days=7))
    assert by_path.horizon(timedelta(hours=1)) == timedelta(days=7)
    late = FileStream("/d", lateness=timedelta(hours=2), history=timedelta(hours=1))
    assert late.horizon(timedelta(hours=1)) == timedelta(hours=3)
    assert FileStream("/d").horizon(timedelta(hours=1)) is None, "no history: files may land for any window"


def test_csv_with_schema_and_options() -> None:
    options = {"header": "true"}
    stream = FileStream("/d", format="csv", schema="id BIGINT, ts TIMESTAMP", options=options)
    options["header"] = "false"
    assert stream.options == {"header": "true"}, "the stream keeps its own copy"


def test_event_pattern_only_for_path_windows() -> None:
    by_path = FileStream("/d", window_by="path", pattern="dt={date}/hour={hour}")
    assert by_path.event_pattern.fields == {"date", "hour"}
    with pytest.raises(InvalidDeclaration, match="windowed by arrival"):
        _ = FileStream("/d").event_pattern


def test_survives_deepcopy_pickle_and_hashing() -> None:
    stream = FileStream("/d", format="csv", schema="a INT", options={"header": "true"})
    assert copy.deepcopy(stream) == stream
    assert pickle.loads(pickle.dumps(stream)) == stream
    assert len({stream, copy.deepcopy(stream)}) == 1


text = st.text(alphabet="abcdefghij_", min_size=1, max_size=8)
streams = st.builds(
    FileStream,
    path=st.sampled_from(["/data/sales", "s3://bucket/sales/", "file:///x"]),
    format=st.just("csv"),
    schema=st.just("id BIGINT, ts TIMESTAMP"),
    options=st.dictionaries(text, text, max_size=3),
    window_by=st.just("path"),
    pattern=st.sampled_from(["dt={date}/hour={hour}", "{year}/{month}/{day}", r"^(?P<epoch>\d+)"]),
    lateness=st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=3)),
    close_marker=st.sampled_from([None, "_SUCCESS", ".done"]),
    conn_id=st.sampled_from([None, "aws_default"]),
) | st.builds(
    # JSON carries lateness as float seconds: exact to the microsecond up to about 140 years.
    FileStream,
    path=st.just("/d"),
    lateness=st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=100 * 365)),
    history=st.none() | st.timedeltas(min_value=timedelta(microseconds=1), max_value=timedelta(days=100 * 365)),
)


@given(streams)
def test_dict_round_trip_through_json(stream: FileStream) -> None:
    assert FileStream.from_dict(json.loads(json.dumps(stream.to_dict()))) == stream


def test_from_dict_checks_again() -> None:
    with pytest.raises(InvalidDeclaration, match="unknown keys \\['window'\\]"):
        FileStream.from_dict({"path": "/d", "window": 3})
    with pytest.raises(InvalidDeclaration, match="'path' required"):
        FileStream.from_dict({})
    with pytest.raises(InvalidDeclaration, match="lateness_seconds must be >= 0"):
        FileStream.from_dict({"path": "/d", "lateness_seconds": -5})
    with pytest.raises(InvalidDeclaration, match="history_seconds must be > 0"):
        FileStream.from_dict({"path": "/d", "history_seconds": 0})
    with pytest.raises(InvalidDeclaration, match="format must be one of"):
        FileStream.from_dict({**FileStream("/d").to_dict(), "format": "orc"})
