"""Per-look listing time and store calls against a stream's history size (issue 24).

Run: uv run --locked python benchmarks/listing_scale.py [--local 10000 100000 1000000] [--s3 10000 100000]
     [--kinds path arrival]

A history of `--per-hour` zero-byte files an hour in a Hive layout (`dt=YYYY-MM-DD/hour=HH/`),
ending in the current hour, each file and partition modified at its hour (`os.utime` on local
disk; moto's stored LastModified on the S3-compatible server on loopback, filled in-process so
that 100k objects take seconds, not an hour of PUTs). The watched window is the current hour,
as a waiting batch's is. Before each look `--landed` new files land in the current hour.

- before: the whole listing each look (`list_files`, what every look did before issue 24), cut
  into the window;
- after, `window_by="path"` (`pattern="dt={date}/hour={hour}"`): `list_window`, only the
  directories the template maps to the window;
- after, `window_by="arrival"` (`history=2h`, `ordered=True`): an `ArrivalWatch` kept across
  looks, as the triggerer keeps it, given the anchor the ledger holds (streams/ordered.py); its
  first look in a process ("first look") lists the partitions from the anchor on, the
  following ones only those still receiving files.
- task look: `InputSpec.look_own`, what a batch task lists before it freezes: `list_window`
  for path windows, `list_since` from the ledger's anchor for the ordered arrival stream.

The ledger is a real SQLite one in which every hour of the history but the current one was a
window whose batch froze its files, recorded ten minutes after the hour (as a live run's freeze
stamps them); each arrival look reads its anchor from it, and that read is in the look's time.

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

from sqlalchemy import insert

from airflow_iqp.constants import FileStatus, Mode
from airflow_iqp.ledger import lookup, session_scope
from airflow_iqp.ledger.models import StreamFile
from airflow_iqp.ledger.store import record_plan, register_query
from airflow_iqp.planning.record import PlanRecord
from airflow_iqp.runtime.inputs import ORIGIN, InputSpec, ledger_anchor
from airflow_iqp.streams.arrivals import ArrivalWatch
from airflow_iqp.streams.assign import select_window
from airflow_iqp.streams.listing import list_files, list_window, stream_uri
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
    task_ms: float
    task_calls: int
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

    def __iter__(self) -> _CountedEntries:
        return self

    def __next__(self) -> os.DirEntry[str]:
        entry: os.DirEntry[str] = next(self.entries)
        COUNTER.entries += 1
        return entry


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


def record_history(url: str, dag_id: str, stream: FileStream, hours: list[datetime], per_hour: int) -> None:
    """A window per hour of the history but the current one, whose batch froze the hour's files,
    recorded ten minutes after the hour.
    """
    base = stream_uri(stream)
    with session_scope(url) as s:
        register_query(s, dag_id=dag_id, name="s", sql="SELECT 1", mode=Mode.STATIC, params={})
        query_id = lookup.query_id(s, dag_id)
        for at in hours[:-1]:
            row = {"index": 0, "first_tuple": 1, "last_tuple": per_hour, "release": at, "latest_start": at}
            row |= {"planned_start": at, "predicted_cost": 1.0}
            window_id = record_plan(s, dag_id, at, at + HOUR, at + 2 * HOUR, per_hour, PlanRecord(), [row])
            batch = lookup.batch(s, window_id, 0)
            uris = [f"{base}/{partition(at)}/part-{i:05d}.parquet" for i in range(per_hour)]
            modified = at + HOUR - timedelta(seconds=1)
            rows = [
                {
                    "query_id": query_id,
                    "window_id": window_id,
                    "batch_id": batch.id,
                    "stream": "s",
                    "uri": uri,
                    "size": 0,
                    "modified": modified,
                    "status": FileStatus.FROZEN.value,
                    "recorded_at": at + HOUR + timedelta(minutes=10),
                }
                for uri in uris
            ]
            s.execute(insert(StreamFile), rows)
            batch.files = {"s": uris}


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


def watched(stream: FileStream, watch: ArrivalWatch, now: datetime) -> StreamListing:
    """A trigger's look at an ordered arrival stream (streams/watch.py), its ledger read included."""
    horizon = max(HISTORY, HOUR + stream.lateness)
    return watch.look(now - horizon, ledger_anchor(stream, now - 2 * horizon))


def own_look(spec: InputSpec, now: datetime) -> int:
    """A task's look (`InputSpec.look_own`); the window's unit count."""
    return len(spec.look_own(now).units)


def scenario(
    store: str,
    files: int,
    stream_path: str,
    conn_id: str | None,
    land: Callable[[], None],
    now: datetime,
    repeat: int,
    kinds: list[str],
) -> list[Row]:
    """Before and after, for the window kinds asked for, over one generated history."""
    start = now.replace(minute=0, second=0, microsecond=0)
    by_path = FileStream(stream_path, window_by="path", pattern=PATTERN, conn_id=conn_id)
    by_arrival = FileStream(stream_path, history=HISTORY, ordered=True, conn_id=conn_id)
    whole_repeat = 1 if files >= 100_000 else repeat  # a whole listing of 100k objects on moto takes minutes
    rows = []
    for kind, stream in (("path", by_path), ("arrival", by_arrival)):
        if kind not in kinds:
            continue
        whole = partial(look, stream, partial(list_files, "s", stream), start, now)
        before = measure(whole_repeat, land, whole)
        first: tuple[float, int, int, int] | None = None
        if kind == "path":
            narrow = partial(look, stream, partial(list_window, "s", stream, start, start + HOUR), start, now)
        else:
            watch = ArrivalWatch("s", stream)
            narrow = partial(look, stream, partial(watched, stream, watch, now), start, now)
            first = measure(1, land, narrow)
        after = measure(repeat, land, narrow)
        task = partial(own_look, InputSpec.of({"s": stream}, start, HOUR), now)
        task_look = measure(repeat, land, task)
        if not whole() == narrow() == task():
            raise AssertionError(f"{store} {files} {kind}: the window's units differ between the listings")
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
                task_look[0],
                task_look[1],
                None if first is None else first[0],
                None if first is None else first[1],
            )
        )
        print(table(rows[-1:]).splitlines()[-1], flush=True)
    return rows


def ledger_for(
    root: Path, path: str, conn_id: str | None, hours: list[datetime], per_hour: int, kinds: list[str]
) -> None:
    """A fresh SQLite ledger in `root`, the one the looks read, holding the history if arrival
    windows are measured.
    """
    url = f"sqlite:///{root / 'ledger.db'}"
    os.environ["AIRFLOW_CONN_IQP_DEFAULT"] = url
    if "arrival" in kinds:
        began = time.perf_counter()
        record_history(url, "iqp_listing_scale", FileStream(path, conn_id=conn_id), hours, per_hour)
        print(f"  ledger: {len(hours) - 1} windows recorded in {time.perf_counter() - began:.0f} s", flush=True)


def run_local(
    sizes: list[int], per_hour: int, landed: int, repeat: int, where: str | None, kinds: list[str]
) -> list[Row]:
    count_local_listing()
    rows = []
    for files in sizes:
        root = Path(tempfile.mkdtemp(prefix="iqp-listing-", dir=where))
        try:
            now = datetime.now(UTC)
            began = time.perf_counter()
            hours = hours_back(now, files, per_hour)
            generate_local(root / "events", hours, per_hour, now)
            print(f"local {files}: generated in {time.perf_counter() - began:.0f} s", flush=True)
            ledger_for(root, str(root / "events"), None, hours, per_hour, kinds)
            rows += scenario(
                "local",
                files,
                str(root / "events"),
                None,
                partial(land_local, root / "events", now, landed),
                now,
                repeat,
                kinds,
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


def run_s3(sizes: list[int], per_hour: int, landed: int, repeat: int, kinds: list[str]) -> list[Row]:
    import boto3  # type: ignore[import-untyped]  # no stubs published
    from airflow.sdk import ObjectStoragePath

    rows = []
    with moto_server() as endpoint, tempfile.TemporaryDirectory(prefix="iqp-listing-ledger-") as ledgers:
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
            hours = hours_back(now, files, per_hour)
            generate_s3(bucket, "events", hours, per_hour, now)
            print(f"s3 {files}: generated in {time.perf_counter() - began:.0f} s", flush=True)
            path = f"s3://{bucket}/events"
            (ledger := Path(ledgers) / bucket).mkdir()
            ledger_for(ledger, path, conn_id, hours, per_hour, kinds)
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
                kinds,
            )
    return rows


def table(rows: list[Row]) -> str:
    lines = [
        "| store | files | window_by | before: ms/look | before: calls/look | after: ms/look | after: calls/look "
        "| after: entries/look | after: first look ms (calls) | task look ms (calls) |",
        "|---|---:|---|---:|---:|---:|---:|---:|---|---|",
    ]
    for r in rows:
        first = "" if r.first_ms is None else f"{r.first_ms:.0f} ({r.first_calls})"
        lines.append(
            f"| {r.store} | {r.files:,} | {r.window_by} | {r.before_ms:.1f} | {r.before_calls} | {r.after_ms:.1f} "
            f"| {r.after_calls} | {r.after_entries} | {first} | {r.task_ms:.1f} ({r.task_calls}) |"
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
    parser.add_argument("--kinds", nargs="+", choices=["path", "arrival"], default=["path", "arrival"])
    args = parser.parse_args(argv)
    rows = run_local(args.local, args.per_hour, args.landed, args.repeat, args.dir, args.kinds)
    rows += run_s3(args.s3, args.per_hour, args.landed, args.repeat, args.kinds)
    print(table(rows))


if __name__ == "__main__":
    main(sys.argv[1:])
