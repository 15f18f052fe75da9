"""Per-look listing time and store calls against a stream's history size (issue 24).

Run: uv run --locked python benchmarks/listing_scale.py [--local 10000 100000 1000000] [--s3 10000 100000]

A history of `--per-hour` zero-byte files an hour in a Hive layout (`dt=YYYY-MM-DD/hour=HH/`),
ending in the current hour, each file and partition modified at its hour (`os.utime` on local
disk; moto's stored LastModified on the S3-compatible server on loopback, filled in-process so
that 100k objects take seconds, not an hour of PUTs). The watched window is the current hour,
as a waiting batch's is. Before each look `--landed` new files land in the current hour.

- before: the whole listing each look (`list_files`, what every look did before issue 24), cut
  into the window;
- after, `window_by="path"` (`pattern="dt={date}/hour={hour}"`): `list_window`, only the
  directories the template maps to the window;
- after, `window_by="arrival"` (`history=2h`): an `ArrivalWatch` kept across looks, as the
  triggerer keeps it; its first look in a process lists everything once ("first look"), the
  following ones only the partitions still receiving files.

Store calls: on local disk the directories listed (`os.scandir` calls, through fsspec or
`list_window`), and the entries they returned; on S3 the LIST requests
(`list_objects_v2` calls of the s3fs client) and the keys and prefixes they returned. The shared
listing (one per stream per look, `streams/watch.py`) is left out here: it divides these numbers
by the number of batches waiting at the same tick.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import sys
import tempfile
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_iqp.runtime.inputs import ORIGIN
from airflow_iqp.streams.arrivals import ArrivalWatch
from airflow_iqp.streams.assign import select_window
from airflow_iqp.streams.listing import list_files, list_window
from airflow_iqp.streams.spec import FileStream

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from airflow_iqp.streams.files import StreamListing

HOUR = timedelta(hours=1)
HISTORY = timedelta(hours=2)
PATTERN = "dt={date}/hour={hour}"
CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing", "region_name": "us-east-1"}


@dataclass
class Counter:
    """Store calls and the entries they returned, since the last `reset`."""

    calls: int = 0
    entries: int = 0

    def reset(self) -> None:
        self.calls = self.entries = 0


COUNTER = Counter()


@dataclass(frozen=True)
class Row:
    store: str
    files: int
    window_by: str
    before_ms: float
    before_calls: int
    after_ms: float
    after_calls: int
    after_entries: int
    first_ms: float | None = None
    first_calls: int | None = None


class _CountedEntries:
    """An `os.scandir` iterator that counts the entries it gives."""

    def __init__(self, entries: Any) -> None:
        self.entries = entries

    def __enter__(self) -> _CountedEntries:
        return self

    def __exit__(self, *exc: object) -> None:
        self.entries.close()

    def __iter__(self) -> Iterator[os.DirEntry[str]]:
        for entry in self.entries:
            COUNTER.entries += 1
            yield entry


def count_local_listing() -> None:
    """Count the directories listed (`os.scandir`, by fsspec or by `list_window`) and their entries."""
    scandir = os.scandir

    def counted(path: Any = ".") -> Any:
        COUNTER.calls += 1
        return _CountedEntries(scandir(path))

    os.scandir = counted


def count_s3_listing(fs: Any) -> None:
    """Count the LIST requests of the stream's s3fs client and the keys and prefixes they return."""
    call_s3 = fs._call_s3

    async def counted(method: str, *args: Any, **kwargs: Any) -> Any:
        out = await call_s3(method, *args, **kwargs)
        if method == "list_objects_v2":
            COUNTER.calls += 1
            COUNTER.entries += len(out.get("Contents", [])) + len(out.get("CommonPrefixes", []))
        return out

    fs._call_s3 = counted


def hours_back(now: datetime, files: int, per_hour: int) -> list[datetime]:
    """The hours of a history of `files` files ending in the current hour, oldest first."""
    current = now.replace(minute=0, second=0, microsecond=0)
    return [current - h * HOUR for h in range(files // per_hour - 1, -1, -1)]


def partition(at: datetime) -> str:
    return f"dt={at:%Y-%m-%d}/hour={at:%H}"


def generate_local(root: Path, hours: list[datetime], per_hour: int, now: datetime) -> None:
    """Zero-byte files, each file and directory modified at its hour (the current hour: `now`)."""
    for at in hours:
        directory = root / partition(at)
        directory.mkdir(parents=True, exist_ok=True)
        stamp = min(at + HOUR - timedelta(seconds=1), now).timestamp()
        for i in range(per_hour):
            path = directory / f"part-{i:05d}.parquet"
            path.touch()
            os.utime(path, (stamp, stamp))
        os.utime(directory, (stamp, stamp))
        os.utime(directory.parent, (stamp, stamp))


def generate_s3(bucket: str, prefix: str, hours: list[datetime], per_hour: int, now: datetime) -> None:
    """Objects put into moto's in-process backend, with LastModified set to their hour."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends

    backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
    for at in hours:
        modified = min(at + HOUR - timedelta(seconds=1), now).replace(tzinfo=None)
        for i in range(per_hour):
            key = backend.put_object(bucket, f"{prefix}/{partition(at)}/part-{i:05d}.parquet", b"")
            key.last_modified = modified


def land_local(root: Path, now: datetime, count: int) -> None:
    directory = root / partition(now)
    for _ in range(count):
        (directory / f"new-{uuid.uuid4().hex}.parquet").touch()


def land_s3(client: Any, bucket: str, prefix: str, now: datetime, count: int) -> None:
    for _ in range(count):
        client.put_object(Bucket=bucket, Key=f"{prefix}/{partition(now)}/new-{uuid.uuid4().hex}.parquet", Body=b"")


def look(stream: FileStream, listing: Callable[[], StreamListing], start: datetime, now: datetime) -> int:
    """List, and cut the listing into the window, as a look does; the window's unit count."""
    selection = select_window({"s": stream}, {"s": listing()}, start=start, window=HOUR, origin=ORIGIN, now=now)
    return len(selection.units)


def measure(repeat: int, land: Callable[[], None], one_look: Callable[[], int]) -> tuple[float, int, int, int]:
    """Median time (ms), calls and entries of `repeat` looks, each after new files landed; and
    the units the last look saw.
    """
    times, calls, entries = [], [], []
    units = 0
    for _ in range(repeat):
        land()
        COUNTER.reset()
        began = time.perf_counter()
        units = one_look()
        times.append((time.perf_counter() - began) * 1000)
        calls.append(COUNTER.calls)
        entries.append(COUNTER.entries)
    return statistics.median(times), int(statistics.median(calls)), int(statistics.median(entries)), units


def scenario(
    store: str,
    files: int,
    stream_path: str,
    conn_id: str | None,
    land: Callable[[], None],
    now: datetime,
    repeat: int,
) -> list[Row]:
    """Before and after, for both window kinds, over one generated history."""
    start = now.replace(minute=0, second=0, microsecond=0)
    by_path = FileStream(stream_path, window_by="path", pattern=PATTERN, conn_id=conn_id)
    by_arrival = FileStream(stream_path, history=HISTORY, conn_id=conn_id)
    whole_repeat = 1 if files >= 100_000 else repeat  # a whole listing of 100k objects on moto takes minutes
    rows = []
    for kind, stream in (("path", by_path), ("arrival", by_arrival)):
        whole = partial(look, stream, partial(list_files, "s", stream), start, now)
        before = measure(whole_repeat, land, whole)
        first: tuple[float, int, int, int] | None = None
        if kind == "path":
            narrow = partial(look, stream, partial(list_window, "s", stream, start, start + HOUR), start, now)
        else:
            watch = ArrivalWatch("s", stream)
            horizon = now - max(HISTORY, HOUR + stream.lateness)
            narrow = partial(look, stream, partial(watch.look, horizon), start, now)
            first = measure(1, land, narrow)
        after = measure(repeat, land, narrow)
        if whole() != narrow():
            raise AssertionError(f"{store} {files} {kind}: the window's units differ between the two listings")
        rows.append(
            Row(
                store,
                files,
                kind,
                before[0],
                before[1],
                after[0],
                after[1],
                after[2],
                None if first is None else first[0],
                None if first is None else first[1],
            )
        )
        print(table(rows[-1:]).splitlines()[-1], flush=True)
    return rows


def run_local(sizes: list[int], per_hour: int, landed: int, repeat: int, where: str | None) -> list[Row]:
    count_local_listing()
    rows = []
    for files in sizes:
        root = Path(tempfile.mkdtemp(prefix="iqp-listing-", dir=where))
        try:
            now = datetime.now(UTC)
            began = time.perf_counter()
            generate_local(root / "events", hours_back(now, files, per_hour), per_hour, now)
            print(f"local {files}: generated in {time.perf_counter() - began:.0f} s", flush=True)
            rows += scenario(
                "local",
                files,
                str(root / "events"),
                None,
                partial(land_local, root / "events", now, landed),
                now,
                repeat,
            )
        finally:
            shutil.rmtree(root, ignore_errors=True)
    return rows


@contextmanager
def moto_server() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


def run_s3(sizes: list[int], per_hour: int, landed: int, repeat: int) -> list[Row]:
    import boto3  # type: ignore[import-untyped]  # no stubs published
    from airflow.sdk import ObjectStoragePath

    rows = []
    with moto_server() as endpoint:
        client = boto3.client("s3", endpoint_url=endpoint, **CREDENTIALS)
        conn_id = "iqp_listing_scale"
        os.environ[f"AIRFLOW_CONN_{conn_id.upper()}"] = json.dumps(
            {"conn_type": "aws", "extra": {"endpoint_url": endpoint, **CREDENTIALS}}
        )
        counted = False
        for files in sizes:
            bucket = f"iqp-scale-{files}"
            client.create_bucket(Bucket=bucket)
            now = datetime.now(UTC)
            began = time.perf_counter()
            generate_s3(bucket, "events", hours_back(now, files, per_hour), per_hour, now)
            print(f"s3 {files}: generated in {time.perf_counter() - began:.0f} s", flush=True)
            path = f"s3://{bucket}/events"
            if not counted:
                count_s3_listing(ObjectStoragePath(path, conn_id=conn_id).fs)
                counted = True
            rows += scenario(
                "s3 (moto)",
                files,
                path,
                conn_id,
                partial(land_s3, client, bucket, "events", now, landed),
                now,
                repeat,
            )
    return rows


def table(rows: list[Row]) -> str:
    lines = [
        "| store | files | window_by | before: ms/look | before: calls/look | after: ms/look | after: calls/look "
        "| after: entries/look | after: first look ms (calls) |",
        "|---|---:|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        first = "" if r.first_ms is None else f"{r.first_ms:.0f} ({r.first_calls})"
        lines.append(
            f"| {r.store} | {r.files:,} | {r.window_by} | {r.before_ms:.1f} | {r.before_calls} | {r.after_ms:.1f} "
            f"| {r.after_calls} | {r.after_entries} | {first} |"
        )
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--local", type=int, nargs="*", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--s3", type=int, nargs="*", default=[10_000, 100_000])
    parser.add_argument("--per-hour", type=int, default=100, help="files in each hour's partition")
    parser.add_argument("--landed", type=int, default=10, help="files that land before each look")
    parser.add_argument("--repeat", type=int, default=5, help="looks measured (the median is shown)")
    parser.add_argument("--dir", default=None, help="where the local histories are generated (then deleted)")
    args = parser.parse_args(argv)
    rows = run_local(args.local, args.per_hour, args.landed, args.repeat, args.dir)
    rows += run_s3(args.s3, args.per_hour, args.landed, args.repeat)
    print(table(rows))


if __name__ == "__main__":
    main(sys.argv[1:])
