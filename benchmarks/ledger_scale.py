"""The ledger's per-file queries and the monitor's reads, timed with a long history in `stream_files`.

Run: uv run --locked python benchmarks/ledger_scale.py [--windows 1000] [--files 1000]

A SQLite ledger with one DAG, `--windows` hourly windows of one batch each (merged, but the
latest), every batch having frozen `--files` files (1000 x 1000: 1M rows in `stream_files`). Then each read a task, a
trigger or a page of the monitor makes is timed (median of 5) against the latest window: what
the late-file check and a retry ask (`frozen_identities` of the window's files), what a plan's
input check asks (`frozen_files`), a freeze of a new batch (`freeze_files`, which looks for every
one of its files in the DAG's frozen ones), a late-file event, and the monitor's reads (its
queries, a page of windows, one window, the dispatcher). Each is printed against the 200 ms a
page may take.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import insert

from airflow_iqp.constants import BatchStatus, FileStatus, Mode, WindowStatus
from airflow_iqp.ledger import lookup, session_scope, store
from airflow_iqp.ledger.models import StreamFile
from airflow_iqp.planning.record import PlanRecord
from airflow_iqp.streams.files import DataFile
from airflow_iqp.ui import read

if TYPE_CHECKING:
    from collections.abc import Callable

    from sqlalchemy.orm import Session

DAG = "iqp_scale"
HOUR = timedelta(hours=1)
FIRST = datetime(2025, 1, 1, tzinfo=UTC)
TARGET_MS = 200.0


def uri(window: int, i: int) -> str:
    at = FIRST + window * HOUR
    return f"s3://landing/events/dt={at:%Y-%m-%d}/hour={at:%H}/part-{i:05d}.parquet"


def listed_file(address: str, modified: datetime) -> DataFile:
    return DataFile(
        stream="events", uri=address, relative=address.split("/events/", 1)[1], size=1000, modified=modified
    )


def batch_row(at: datetime) -> dict[str, Any]:
    return {
        "index": 0,
        "first_tuple": 1,
        "last_tuple": 1,
        "release": at,
        "latest_start": at,
        "planned_start": at,
        "predicted_cost": 1.0,
    }


def fill(url: str, windows: int, files: int) -> list[int]:
    """The DAG, its windows and their frozen files; the window ids, oldest first."""
    ids = []
    with session_scope(url) as s:
        store.register_query(s, dag_id=DAG, name="scale", sql="SELECT 1", mode=Mode.STATIC, params={})
    for w in range(windows):
        at = FIRST + w * HOUR
        with session_scope(url) as s:
            window_id = store.record_plan(s, DAG, at, at + HOUR, at + 2 * HOUR, files, PlanRecord(), [batch_row(at)])
            batch = lookup.batch(s, window_id, 0)
            query_id = lookup.query_id(s, DAG)
            rows = [
                {
                    "query_id": query_id,
                    "window_id": window_id,
                    "batch_id": batch.id,
                    "stream": "events",
                    "uri": uri(w, i),
                    "size": 1000,
                    "modified": at,
                    "status": FileStatus.FROZEN.value,
                    "recorded_at": at,
                }
                for i in range(files)
            ]
            s.execute(insert(StreamFile), rows)
            batch.files = {"events": [row["uri"] for row in rows]}
            if w < windows - 1:  # a year of history is merged; the latest window is open
                batch.status = BatchStatus.DONE
                lookup.window(s, window_id).status = WindowStatus.MERGED
        ids.append(window_id)
    return ids


def timed(url: str, work: Callable[[Session], object], repeat: int = 5, read_only: bool = True) -> float:
    print(".", end="", flush=True)
    times = []
    for _ in range(repeat):
        with session_scope(url, read_only=read_only) as s:
            began = time.perf_counter()
            work(s)
            times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times)


def api_times(url: str, window_id: int, repeat: int = 5) -> list[tuple[str, float]]:
    """The monitor's routes through its FastAPI app in process, as an admin, median of `repeat`.

    As tests/ui/test_api.py does it: Airflow's SimpleAuthManager answers for the user, and the
    two lookups the API server makes in Airflow's metadata database (a DAG's team, a revoked
    token) are answered here, since this process has none.
    """
    from airflow.api_fastapi.app import _AuthManagerState
    from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
    from airflow.models.dag import DagModel
    from airflow.models.revoked_token import RevokedToken
    from fastapi.testclient import TestClient

    from airflow_iqp.ui.api import create_app

    class OneDag(SimpleAuthManager):
        def get_authorized_dag_ids(self, *, user: Any, method: Any = "GET", session: Any = None) -> set[str]:
            return {DAG}

    os.environ["AIRFLOW__API_AUTH__JWT_SECRET"] = "ledger-scale-" + "0" * 64
    os.environ["AIRFLOW_CONN_IQP_DEFAULT"] = url
    manager = OneDag()
    _AuthManagerState.instance = manager
    setattr(
        DagModel, "get_team_name", staticmethod(lambda dag_id, **_: None)
    )  # setattr: mypy refuses assigning a method
    setattr(RevokedToken, "is_revoked", classmethod(lambda cls, jti, **_: False))
    cookie = {"Cookie": f"_token={manager.generate_jwt(SimpleAuthManagerUser(username='admin', role='admin'))}"}
    routes = [
        "/api/v1/queries",
        f"/api/v1/dags/{DAG}/windows",
        f"/api/v1/dags/{DAG}/windows/{window_id}",
        "/api/v1/dispatcher",
        "/api/v1/misses",
    ]
    found = []
    with TestClient(create_app(), base_url="http://testserver/") as client:
        for route in routes:
            times = []
            for _ in range(repeat):
                began = time.perf_counter()
                response = client.get(route, headers=cookie)
                times.append((time.perf_counter() - began) * 1000)
                if response.status_code != 200:
                    raise RuntimeError(f"{route}: {response.status_code} {response.text[:200]}")
            found.append((f"GET {route}", statistics.median(times)))
    return found


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--windows", type=int, default=1000)
    parser.add_argument("--files", type=int, default=1000)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="iqp-ledger-scale-") as tmp:
        url = f"sqlite:///{Path(tmp) / 'ledger.db'}"
        began = time.perf_counter()
        ids = fill(url, args.windows, args.files)
        print(f"{args.windows * args.files:,} rows in stream_files in {time.perf_counter() - began:.0f} s", flush=True)
        latest, last = ids[-1], args.windows - 1
        listed = [uri(last, i) for i in range(args.files)] + [uri(args.windows, i) for i in range(100)]
        with session_scope(url) as s:
            query = read.query_of_dag(s, DAG)
        assert query is not None
        at = FIRST + args.windows * HOUR
        with session_scope(url) as s:
            new_window = store.record_plan(s, DAG, at, at + HOUR, at + 2 * HOUR, 100, PlanRecord(), [batch_row(at)])
        fresh = [listed_file(uri(args.windows, i), at) for i in range(100)]
        late = listed_file(uri(0, args.files), FIRST + 2 * HOUR)
        reads: dict[str, Callable[[Session], object]] = {
            f"frozen_identities ({len(listed)} uris: late files, retries)": lambda s: store.frozen_identities(
                s, DAG, listed
            ),
            "frozen_files (a plan's input check)": lambda s: store.frozen_files(s, latest),
            "window_summary (tasks)": lambda s: store.window_summary(s, latest),
            "planned_upto (WindowInputTrigger)": lambda s: store.planned_upto(s, latest, 0),
            "monitor: queries": lambda s: read.queries(s),
            "monitor: a page of 50 windows": lambda s: read.windows(s, query, 50),
            "monitor: one window": lambda s: read.window(s, query, latest),
            "monitor: dispatcher": lambda s: read.dispatcher(s, at - timedelta(days=1)),
        }
        rows = [(name, timed(url, work)) for name, work in reads.items()]
        rows.append(
            (
                "freeze_files (100 new files)",
                timed(url, lambda s: store.freeze_files(s, new_window, 0, {"events": fresh}), 1, read_only=False),
            )
        )
        rows.append(
            (
                "record_file_event (a late file)",
                timed(
                    url,
                    lambda s: store.record_file_event(s, DAG, ids[0], late, FileStatus.LATE, note="late"),
                    1,
                    read_only=False,
                ),
            )
        )
        everything = [uri(w, i) for w in range(args.windows) for i in range(args.files)]
        rows.append(
            (
                f"frozen_identities of the whole history ({len(everything):,} uris: late_files' whole listing)",
                timed(url, lambda s: store.frozen_identities(s, DAG, everything), 1),
            )
        )
        rows += api_times(url, latest)
    print(f"| read or write ({args.windows * args.files:,} rows in stream_files) | ms | under {TARGET_MS:.0f} ms |")
    print("|---|---:|---|")
    for name, ms in rows:
        print(f"| {name} | {ms:.1f} | {'yes' if ms < TARGET_MS else 'NO'} |")


if __name__ == "__main__":
    main(sys.argv[1:])
