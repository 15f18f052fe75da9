"""Streams no iqp command wrote, end to end through `airflow dags test`.

pyarrow writes a made-up schema under random file names, with hidden files beside the data; the
windows are in the past, so each run finds its input final and processes it at once, on the
test session's Spark Connect server. Every
result is compared with pandas over exactly that window's files. Then the awkward inputs: a late
file (recorded; re-merged when asked), a rewritten file (refused and recorded), a corrupt file
(named in the error; quarantined when asked), an empty window (the answer over no rows).
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sqlalchemy import select

from airflow_iqp.constants import FileStatus, WindowStatus
from airflow_iqp.ledger import session_scope, store
from airflow_iqp.ledger.models import Query, StreamFile
from airflow_iqp.results.publish import read_marker, read_result
from tests.integration.airflow_env import AirflowEnv

if TYPE_CHECKING:
    from airflow_iqp.spark.connect_server import ConnectServer

W0 = datetime(2026, 1, 1, 10, 0, tzinfo=UTC)  # the first window of the sales DAGs: minutes
MINUTE = timedelta(minutes=1)
CATEGORIES = ["books", "games", "music", "tools", "toys"]
DEPARTMENTS = {"books": "media", "games": "media", "music": "media", "tools": "home", "toys": "home"}

SALES_SQL = """
SELECT p.department, count(*) AS sales, sum(s.amount) AS revenue, max(s.sale_id) AS last_sale
FROM sales s JOIN products p ON s.category = p.category
GROUP BY p.department
ORDER BY p.department
"""
EVENTS_SQL = "SELECT count(*) AS events, sum(value) AS total, min(kind) AS first_kind FROM events"

DAG_FILE = """
from datetime import UTC, datetime, timedelta
from airflow_iqp import FileStream, intermittent_query

dag = intermittent_query(
    dag_id="{dag_id}",
    query="{query}",
    window=timedelta(seconds={window}),
    deadline=timedelta(seconds=60),
    streams={{"{stream}": FileStream("{path}"{stream_args})}},
    static={static},
    output="{results}/{{dag_id}}/{{window_start}}",
    on_late="{on_late}",
    on_corrupt="{on_corrupt}",
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    work_dir="{work}",
    retries=0,
)
"""


@dataclass(frozen=True)
class Setup:
    env: AirflowEnv
    data: Path

    @property
    def results(self) -> Path:
        return self.data / "results"

    def dag(
        self,
        dag_id: str,
        *,
        query: str,
        stream: str,
        path: Path,
        window: timedelta,
        stream_args: str = "",
        static: dict[str, str] | None = None,
        on_late: str = "record",
        on_corrupt: str = "fail",
    ) -> None:
        (self.env.dags / f"{dag_id}.py").write_text(
            DAG_FILE.format(
                dag_id=dag_id,
                query=query,
                window=window.total_seconds(),
                stream=stream,
                path=path,
                stream_args=stream_args,
                static=static or {},
                results=self.results,
                on_late=on_late,
                on_corrupt=on_corrupt,
                work=self.data / "work",
            )
        )

    def run(self, dag_id: str, window_start: datetime, *, ok: bool = True) -> str:
        result = self.env.airflow("dags", "test", dag_id, window_start.isoformat(), timeout=900)
        log = result.stdout + result.stderr
        (self.data / f"{dag_id}-{window_start:%H%M}.log").write_text(log)
        if ok:
            assert result.returncode == 0, log[-5000:]
            assert "state=success" in log, log[-5000:]
        return log

    def window(self, dag_id: str, window_start: datetime) -> store.WindowRow:
        with session_scope(self.env.ledger) as session:
            window_id = store.window_id(session, dag_id, window_start)
            assert window_id is not None, f"{dag_id} has no window at {window_start}"
            return store.window_summary(session, window_id)

    def events(self, dag_id: str, status: FileStatus) -> list[str]:
        with session_scope(self.env.ledger) as session:
            found = session.scalars(
                select(StreamFile.uri).join(Query).where(Query.dag_id == dag_id, StreamFile.status == status)
            )
            return sorted(found)


def write_sales(directory: Path, at: datetime, rows: int, seed: int, name: str | None = None) -> Path:
    """A Parquet file of made-up sales under a random name, modified at `at`."""
    rng = pd.Series(range(rows)).sample(frac=1, random_state=seed).to_numpy()
    table = pa.table(
        {
            "sale_id": pa.array([seed * 1000 + int(i) for i in rng], pa.int64()),
            "category": pa.array([CATEGORIES[(seed + int(i)) % len(CATEGORIES)] for i in rng]),
            "amount": pa.array([round(1.5 * ((seed * 7 + int(i)) % 97) + 0.25, 2) for i in rng], pa.float64()),
        }
    )
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / (name or f"{uuid.uuid4().hex}.parquet")
    pq.write_table(table, path)
    os.utime(path, (at.timestamp(), at.timestamp()))
    return path


def hidden_beside(directory: Path, at: datetime) -> None:
    """What writers leave beside data: none of it may be read."""
    (directory / ".tmp-upload.parquet").write_bytes(b"half a file")
    (directory / "_SUCCESS").write_text("")
    (directory / "_temporary").mkdir(exist_ok=True)
    (directory / "_temporary" / "part-0.parquet").write_bytes(b"not committed")
    for path in directory.rglob("*"):
        if path.name.startswith((".", "_")) or "_temporary" in path.parts:
            os.utime(path, (at.timestamp(), at.timestamp()))


def expected_sales(files: list[Path], products: pd.DataFrame) -> list[dict[str, object]]:
    """The sales query over exactly these files, in pandas."""
    sales = pd.concat([pq.read_table(f).to_pandas() for f in files])
    joined = sales.merge(products, on="category")
    grouped = joined.groupby("department").agg(
        sales=("sale_id", "count"), revenue=("amount", "sum"), last_sale=("sale_id", "max")
    )
    return [
        {"department": d, "sales": int(r.sales), "revenue": float(r.revenue), "last_sale": int(r.last_sale)}
        for d, r in grouped.sort_index().iterrows()
    ]


def assert_rows(actual: list[dict[str, object]], expected: list[dict[str, object]]) -> None:
    assert [list(r) for r in actual] == [list(r) for r in expected]
    for a, e in zip(actual, expected, strict=True):
        for key, value in e.items():
            if isinstance(value, float):
                assert a[key] == pytest.approx(value, rel=1e-9), key
            else:
                assert a[key] == value, key


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory, connect_server: ConnectServer, airflow_metadata: Path) -> Setup:
    env = AirflowEnv(tmp_path_factory.mktemp("airflow"), connect_server.connection())
    env.copy_metadata(airflow_metadata)
    return Setup(env, tmp_path_factory.mktemp("data"))


@pytest.fixture(scope="module")
def products(setup: Setup) -> pd.DataFrame:
    return write_products(setup)


def write_products(setup: Setup) -> pd.DataFrame:
    """The static products table under the setup's data, as Parquet under a random name."""
    frame = pd.DataFrame({"category": list(DEPARTMENTS), "department": list(DEPARTMENTS.values())})
    directory = setup.data / "dim" / "products"
    directory.mkdir(parents=True)
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), directory / f"{uuid.uuid4().hex}.parquet")
    return frame


def test_arrival_windows_with_a_static_join_equal_pandas_then_late_and_rewritten_files(
    setup: Setup, products: pd.DataFrame
) -> None:
    sales = setup.data / "sales"
    in_w0 = [write_sales(sales, W0 + timedelta(seconds=5 + 11 * i), 40 + i, seed=i) for i in range(4)]
    in_w1 = [write_sales(sales, W0 + MINUTE + timedelta(seconds=9 * i), 30, seed=10 + i) for i in range(3)]
    hidden_beside(sales, W0 + timedelta(seconds=20))
    (setup.env.dags / "sales.sql").write_text(SALES_SQL)
    setup.dag(
        "sales",
        query="sales.sql",  # relative to the DAG file's folder
        stream="sales",
        path=sales,
        window=MINUTE,
        static={"products": str(setup.data / "dim" / "products")},
        on_late="remerge",
    )

    setup.run("sales", W0)
    w0 = setup.window("sales", W0)
    assert w0.status == WindowStatus.MERGED
    assert w0.result_uri == str(setup.results / "sales" / "20260101T100000")
    assert_rows(read_result(w0.result_uri), expected_sales(in_w0, products))
    frozen = sorted(u for b in w0.batches for uris in (b.files or {}).values() for u in uris)
    assert frozen == sorted(f"file://{f}" for f in in_w0), "exactly the window's data files, each once"

    # A late file of window 0 and a rewrite of one of its frozen files; window 1's run finds both.
    late = write_sales(sales, W0 + timedelta(seconds=50), 25, seed=99)
    rewritten = in_w0[1]
    first_version = setup.data / "first_version.parquet"
    first_version.write_bytes(rewritten.read_bytes())
    write_sales(sales, W0 + timedelta(seconds=16), 7, seed=77, name=rewritten.name)
    setup.run("sales", W0 + MINUTE)

    w1 = setup.window("sales", W0 + MINUTE)
    assert_rows(read_result(str(w1.result_uri)), expected_sales(in_w1, products))
    assert setup.events("sales", FileStatus.LATE) == [f"file://{late}"]
    assert setup.events("sales", FileStatus.REWRITTEN) == [f"file://{rewritten}"]
    w0 = setup.window("sales", W0)
    assert w0.late_files == 1
    # Re-merged: window 0's published result now counts the late file, and the rewritten file
    # as it was when frozen (its first version is the one that counted).
    assert read_marker(str(w0.result_uri))["remerged_for_late_files"] is True
    counted = [in_w0[0], first_version, in_w0[2], in_w0[3], late]
    assert_rows(read_result(str(w0.result_uri)), expected_sales(counted, products))


def test_hive_partitioned_event_time_windows_and_an_empty_window(setup: Setup) -> None:
    events = setup.data / "events"
    hour = timedelta(hours=1)
    files = {}
    for h in (9, 10, 11):
        part = events / f"dt=2026-01-01/hour={h:02d}"
        part.mkdir(parents=True)
        paths = []
        for i in range(2 + (h == 10)):
            path = part / f"part-{uuid.uuid4().hex[:8]}.parquet"
            pq.write_table(
                pa.table({"kind": [f"k{h}{i}", f"a{h}"], "value": pa.array([h * 10 + i, i], pa.int64())}), path
            )
            os.utime(path, (W0.timestamp() + 7200, W0.timestamp() + 7200))  # all landed later than they happened
            paths.append(path)
        files[h] = paths
    setup.dag(
        "events",
        query=str(setup.data / "events.sql"),
        stream="events",
        path=events,
        window=hour,
        stream_args=', window_by="path", pattern="dt={date}/hour={hour}"',
    )
    (setup.data / "events.sql").write_text(EVENTS_SQL)
    ten = datetime(2026, 1, 1, 10, tzinfo=UTC)
    setup.run("events", ten)
    frame = pd.concat([pq.read_table(f).to_pandas() for f in files[10]])
    result = read_result(str(setup.window("events", ten).result_uri))
    assert result == [{"events": len(frame), "total": int(frame.value.sum()), "first_kind": frame.kind.min()}]

    empty = datetime(2026, 1, 1, 14, tzinfo=UTC)
    setup.run("events", empty)
    window = setup.window("events", empty)
    assert window.status == WindowStatus.MERGED
    assert read_result(str(window.result_uri)) == [{"events": 0, "total": None, "first_kind": None}]


def test_a_corrupt_file_is_named_and_quarantined_when_asked(setup: Setup, products: pd.DataFrame) -> None:
    stream = setup.data / "corrupt_sales"
    good = [write_sales(stream, W0 + timedelta(seconds=10 * i + 1), 20, seed=200 + i) for i in range(3)]
    corrupt = stream / f"{uuid.uuid4().hex}.parquet"
    corrupt.write_bytes(b"PAR1" + os.urandom(300))
    os.utime(corrupt, (W0.timestamp() + 33, W0.timestamp() + 33))
    for dag_id, on_corrupt in (("corrupt_fail", "fail"), ("corrupt_quarantine", "quarantine")):
        (setup.env.dags / f"{dag_id}.sql").write_text(SALES_SQL)
        setup.dag(
            dag_id,
            query=f"{dag_id}.sql",
            stream="sales",
            path=stream,
            window=MINUTE,
            static={"products": str(setup.data / "dim" / "products")},
            on_corrupt=on_corrupt,
        )

    log = setup.run("corrupt_fail", W0, ok=False)
    assert str(corrupt) in log, "the error must name the unreadable file"
    assert corrupt.exists(), "fail mode moves nothing"

    setup.run("corrupt_quarantine", W0)
    window = setup.window("corrupt_quarantine", W0)
    assert window.incomplete
    assert not corrupt.exists()
    assert (stream / "_quarantine" / corrupt.name).exists()
    assert setup.events("corrupt_quarantine", FileStatus.QUARANTINED) == [f"file://{corrupt}"]
    assert_rows(read_result(str(window.result_uri)), expected_sales(good, products))
    assert json.loads((Path(str(window.result_uri)) / "_IQP_RESULT.json").read_text())["incomplete"] is True
