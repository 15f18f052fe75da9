"""`s3://` streams through Airflow's object storage against moto's S3 server on localhost: the
connection's `endpoint_url` is all the Amazon provider needs to reach it.
"""

from __future__ import annotations

import hashlib
import io
import json
import socket
import time
import uuid
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import boto3  # type: ignore[import-untyped]  # no stubs published
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from airflow.sdk import ObjectStoragePath
from moto.server import ThreadedMotoServer

from airflow_iqp.streams.arrivals import ArrivalWatch
from airflow_iqp.streams.assign import select_window
from airflow_iqp.streams.listing import ListingError, list_files, list_since, list_window, stream_uri
from airflow_iqp.streams.ordered import anchor_of
from airflow_iqp.streams.spec import FileStream
from tests.oracle import units_in, window_of
from tests.streams import ORIGIN

if TYPE_CHECKING:
    from collections.abc import Iterator

BUCKET = "iqp-streams"
CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing", "region_name": "us-east-1"}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def connection(monkeypatch: pytest.MonkeyPatch, extra: dict[str, Any]) -> str:
    """An Airflow connection given by environment variable; a fresh id each time, since Airflow
    caches one filesystem per connection id for the whole process.
    """
    conn_id = f"iqp_s3_{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": "aws", "extra": extra}))
    return conn_id


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    url = f"http://127.0.0.1:{port}"
    boto3.client("s3", endpoint_url=url, **CREDENTIALS).create_bucket(Bucket=BUCKET)
    yield url
    server.stop()


@pytest.fixture
def s3(endpoint: str) -> Any:
    return boto3.client("s3", endpoint_url=endpoint, **CREDENTIALS)


@pytest.fixture
def conn_id(endpoint: str, monkeypatch: pytest.MonkeyPatch) -> str:
    return connection(monkeypatch, {"endpoint_url": endpoint, **CREDENTIALS})


def parquet_bytes(rows: int) -> bytes:
    sink = io.BytesIO()
    pq.write_table(pa.table({"id": list(range(rows)), "price": [2.0 * i for i in range(rows)]}), sink)
    return sink.getvalue()


@contextmanager
def listed(fs: Any) -> Iterator[list[dict[str, Any]]]:
    """The arguments of every ListObjectsV2 call `fs` (s3fs) makes inside the block."""
    calls: list[dict[str, Any]] = []
    call_s3 = fs._call_s3

    async def counted(method: str, *args: Any, **kwargs: Any) -> Any:
        if method == "list_objects_v2":
            calls.append(kwargs)
        return await call_s3(method, *args, **kwargs)

    fs._call_s3 = counted
    try:
        yield calls
    finally:
        del fs._call_s3


def test_arrival_stream_on_s3(s3: Any, conn_id: str) -> None:
    prefix = f"sales-{uuid.uuid4().hex[:6]}"
    before = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=1)
    bodies = {f"{uuid.uuid4().hex}.parquet": parquet_bytes(rows) for rows in (3, 5, 8)}
    for name, body in bodies.items():
        s3.put_object(Bucket=BUCKET, Key=f"{prefix}/{name}", Body=body)
    for hidden in ("_SUCCESS", "_temporary/0/part-0.parquet", ".tmp-x.parquet"):
        s3.put_object(Bucket=BUCKET, Key=f"{prefix}/{hidden}", Body=b"not data")
    s3.put_object(Bucket=BUCKET, Key=f"{prefix}-archive/old.parquet", Body=parquet_bytes(1))  # a sibling prefix
    after = datetime.now(UTC) + timedelta(seconds=1)

    stream = FileStream(f"s3://{BUCKET}/{prefix}/", conn_id=conn_id, close_marker="_SUCCESS")
    listing = list_files("sales", stream)

    assert {file.relative for file in listing.files} == set(bodies)
    for file in listing.files:
        body = bodies[file.relative]
        assert file.uri == f"s3://{BUCKET}/{prefix}/{file.relative}"
        assert file.size == len(body)
        assert file.etag == hashlib.md5(body).hexdigest()  # S3's ETag of a single PUT
        assert before <= file.modified <= after
    assert [marker.relative for marker in listing.markers] == ["_SUCCESS"]
    order = [(file.modified, file.relative) for file in listing.files]
    assert order == sorted(order)

    window = timedelta(hours=1)
    # The oracle's times: what S3 itself says, through boto3 rather than the package's listing.
    objects = s3.list_objects_v2(Bucket=BUCKET, Prefix=f"{prefix}/")["Contents"]
    stored = {o["Key"].removeprefix(f"{prefix}/"): o["LastModified"] for o in objects}
    start = window_of(min(stored[name] for name in bodies), window, ORIGIN)
    listings = {"sales": listing}
    selection = select_window({"sales": stream}, listings, start=start, window=window, origin=ORIGIN, now=start)
    in_window = units_in({"sales": {name: stored[name] for name in bodies}}, start, start + window)
    assert sorted(unit.relative for unit in selection.units) == in_window
    assert len(selection.units) + len(selection.later) == len(bodies)
    marker_window = window_of(stored["_SUCCESS"], window, ORIGIN)
    assert selection.final is (marker_window == start), "_SUCCESS closes the window it was modified in"

    s3.put_object(Bucket=BUCKET, Key=f"{prefix}/late.parquet", Body=parquet_bytes(2))
    assert "late.parquet" in {file.relative for file in list_files("sales", stream).files}, "no stale listing cache"


def test_hive_partitions_on_s3(s3: Any, conn_id: str) -> None:
    prefix = f"events-{uuid.uuid4().hex[:6]}"
    keys = {
        "dt=2026-01-01/hour=10/part-a.parquet": 4,
        "dt=2026-01-01/hour=10/part-b.parquet": 6,
        "dt=2026-01-01/hour=11/part-c.parquet": 1,
        "dt=2026-01-01/part-stray.parquet": 2,
    }
    for key, rows in keys.items():
        s3.put_object(Bucket=BUCKET, Key=f"{prefix}/{key}", Body=parquet_bytes(rows))
    s3.put_object(Bucket=BUCKET, Key=f"{prefix}/dt=2026-01-01/hour=10/_SUCCESS", Body=b"")
    stream = FileStream(
        f"s3://{BUCKET}/{prefix}",
        conn_id=conn_id,
        window_by="path",
        pattern="dt={date}/hour={hour}",
        lateness=timedelta(days=1),
        close_marker="_SUCCESS",
    )
    listing = list_files("events", stream)
    hour = timedelta(hours=1)
    start = datetime(2026, 1, 1, 10, tzinfo=UTC)
    selection = select_window(
        {"events": stream}, {"events": listing}, start=start, window=hour, origin=ORIGIN, now=start
    )
    assert sorted(unit.relative for unit in selection.units) == [
        "dt=2026-01-01/hour=10/part-a.parquet",
        "dt=2026-01-01/hour=10/part-b.parquet",
    ]
    assert [unit.relative for unit in selection.later] == ["dt=2026-01-01/hour=11/part-c.parquet"]
    assert [file.relative for file in selection.unassigned] == ["dt=2026-01-01/part-stray.parquet"]
    assert selection.final, "hour=10's _SUCCESS closes the window a day before its lateness passes"


def test_hive_window_listing_on_s3_lists_only_the_window_s_prefixes(s3: Any, conn_id: str) -> None:
    prefix = f"events-{uuid.uuid4().hex[:6]}"
    for day in (1, 2):
        for hour in (9, 10, 11):
            s3.put_object(Bucket=BUCKET, Key=f"{prefix}/dt=2026-01-0{day}/hour={hour}/part-0.parquet", Body=b"x")
    s3.put_object(Bucket=BUCKET, Key=f"{prefix}/dt=2026-01-01/hour=10/_SUCCESS", Body=b"")
    for placeholder in ("", "dt=2026-01-01/", "dt=2026-01-01/hour=10/"):  # what some tools write for a "directory"
        s3.put_object(Bucket=BUCKET, Key=f"{prefix}/{placeholder}", Body=b"")
    stream = FileStream(
        f"s3://{BUCKET}/{prefix}",
        conn_id=conn_id,
        window_by="path",
        pattern="dt={date}/hour={hour}",
        close_marker="_SUCCESS",
    )
    start = datetime(2026, 1, 1, 10, 20, tzinfo=UTC)
    fs = ObjectStoragePath(stream.path, conn_id=conn_id).fs
    with listed(fs) as calls:
        listing = list_window("events", stream, start, start + timedelta(minutes=10))
    assert [file.relative for file in listing.files] == ["dt=2026-01-01/hour=10/part-0.parquet"]
    assert [marker.relative for marker in listing.markers] == ["dt=2026-01-01/hour=10/_SUCCESS"]
    assert [call["Prefix"] for call in calls] == [
        f"{prefix}/",
        f"{prefix}/dt=2026-01-01/",
        f"{prefix}/dt=2026-01-01/hour=10/",
    ]


def test_an_arrival_watch_on_s3_lists_the_prefixes_still_receiving_objects(s3: Any, conn_id: str) -> None:
    prefix = f"sales-{uuid.uuid4().hex[:6]}"
    for key in ("", "dt=1/", "dt=1/a.parquet", "dt=2/b.parquet", "dt=2/_SUCCESS"):
        s3.put_object(Bucket=BUCKET, Key=f"{prefix}/{key}", Body=b"x")
    stream = FileStream(f"s3://{BUCKET}/{prefix}", conn_id=conn_id, history=timedelta(hours=1), close_marker="_SUCCESS")
    watch = ArrivalWatch("sales", stream)
    now = datetime.now(UTC)
    assert sorted(f.relative for f in watch.look(now - timedelta(hours=1)).files) == [
        "dt=1/a.parquet",
        "dt=2/b.parquet",
    ]
    s3.put_object(Bucket=BUCKET, Key=f"{prefix}/dt=3/c.parquet", Body=b"x")
    listing = watch.look(now - timedelta(hours=1))
    assert sorted(f.relative for f in listing.files) == ["dt=1/a.parquet", "dt=2/b.parquet", "dt=3/c.parquet"]
    assert [m.relative for m in listing.markers] == ["dt=2/_SUCCESS"]
    # an hour later, nothing new: every partition settles, and their files leave the watch
    assert watch.look(now + timedelta(hours=1, seconds=1)).files == ()


def test_an_ordered_stream_on_s3_lists_the_anchor_s_chain_and_what_follows(s3: Any, conn_id: str) -> None:
    prefix = f"sales-{uuid.uuid4().hex[:6]}"
    for key in ("dt=1/hour=0/a.parquet", "dt=2/hour=0/b.parquet", "dt=2/hour=1/c.parquet", "dt=3/hour=0/d.parquet"):
        s3.put_object(Bucket=BUCKET, Key=f"{prefix}/{key}", Body=b"x")
    stream = FileStream(f"s3://{BUCKET}/{prefix}", conn_id=conn_id, history=timedelta(hours=1), ordered=True)
    whole = list_files("sales", stream)
    anchor = anchor_of(whole.files[1].uri, stream_uri(stream))  # b.parquet's, as the ledger would give it
    assert anchor == ("dt=2", "hour=0")
    fs = ObjectStoragePath(stream.path, conn_id=conn_id).fs
    with listed(fs) as calls:
        since = list_since("sales", stream, anchor)
        since_prefixes = sorted(call["Prefix"] for call in calls)
        calls.clear()
        watched = ArrivalWatch("sales", stream).look(datetime.now(UTC) - timedelta(hours=1), anchor)
        watched_prefixes = sorted(call["Prefix"] for call in calls)
    expected = ["dt=2/hour=0/b.parquet", "dt=2/hour=1/c.parquet", "dt=3/hour=0/d.parquet"]
    assert sorted(f.relative for f in since.files) == expected
    assert sorted(f.relative for f in watched.files) == expected
    assert not any(p.startswith(f"{prefix}/dt=1") for p in since_prefixes + watched_prefixes)  # never listed
    assert since_prefixes[0] == f"{prefix}/"


def test_a_prefix_with_no_objects_yet_is_empty_but_a_missing_bucket_is_an_error(conn_id: str) -> None:
    assert list_files("sales", FileStream(f"s3://{BUCKET}/nothing-yet/", conn_id=conn_id)).files == ()
    with pytest.raises(ListingError, match=r"stream 'sales': cannot list s3://no-such-bucket/sales/"):
        list_files("sales", FileStream("s3://no-such-bucket/sales/", conn_id=conn_id))


def test_an_unreachable_store_is_an_error_naming_stream_and_uri(monkeypatch: pytest.MonkeyPatch) -> None:
    extra = {
        "endpoint_url": f"http://127.0.0.1:{free_port()}",  # nothing listens there
        "config_kwargs": {"retries": {"max_attempts": 1, "mode": "standard"}, "connect_timeout": 1},
        **CREDENTIALS,
    }
    conn_id = connection(monkeypatch, extra)
    began = time.monotonic()
    with pytest.raises(ListingError, match=r"stream 'orders': cannot list s3://iqp-streams/orders/"):
        list_files("orders", FileStream(f"s3://{BUCKET}/orders/", conn_id=conn_id))
    assert time.monotonic() - began < 60
