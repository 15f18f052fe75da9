"""What the live-window integration tests share: the TPC-H replayer as the producer of files, the
DAGs' own declarations, and the checks every window must pass (the window's files as the tests'
own oracle finds them in the landing directories, not as the package lists them).
"""

from __future__ import annotations

import math
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from airflow_iqp.constants import BatchStatus, WindowStatus
from airflow_iqp.demo.examples import Example, load_examples
from airflow_iqp.demo.verify import verify_window, window_paths
from airflow_iqp.ledger import session_scope, store
from airflow_iqp.tpch.manifest import MANIFEST_NAME, load_manifest
from tests.integration.airflow_env import BIN, next_window_start
from tests.oracle import arrived_in

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from airflow_iqp.declaration import Declaration
    from tests.integration.airflow_env import AirflowEnv


# Files keep landing this long after the window closes (and the replay's start-up, 2-4 s, later):
# as long as its `airflow dags test` takes to merge it, not longer.
TAIL = timedelta(seconds=1)


def replay(
    stream: Path, landing: Path, speedup: float, window: timedelta, lead: timedelta
) -> tuple[subprocess.Popen[str], datetime]:
    """Start `iqp data replay` (the i-th file it lands, i / speedup stream seconds from now); returns
    the process and the first window that opens at least `lead` from now, so Airflow is up before
    its files land. It replays the stream's last files, as many as land until `TAIL` after that
    window closes: a test that waits for the producer to end waits no longer than for the window.
    """
    started = datetime.now(UTC)
    start = next_window_start(window, started + lead)
    manifest = load_manifest(stream / MANIFEST_NAME)
    landing_for = (start + window + TAIL - started).total_seconds() * speedup / manifest.seconds_per_file
    first = max(0, manifest.files - 1 - math.ceil(landing_for))
    process = subprocess.Popen(
        [
            str(BIN / "iqp"),
            "data",
            "replay",
            "--source",
            str(stream),
            "--landing",
            str(landing),
            "--speedup",
            str(speedup),
            "--start-index",
            str(first),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    return process, start


def declaration(env: AirflowEnv, dag_id: str) -> Declaration:
    """The DAG file's declaration, parsed as Airflow parses it."""
    found = [e for e in load_examples(env.dags, {}, pattern=f"{dag_id}.py").values() if isinstance(e, Example)]
    assert len(found) == 1, f"{dag_id}: {found}"
    return found[0].declaration


def check_window(ledger: str, spark: SparkSession, declared: Declaration, start: datetime) -> store.WindowRow:
    """Every file of the window in exactly one batch, the window merged by its deadline, and its
    published result equal to one Spark SQL pass over the same files."""
    with session_scope(ledger) as session:
        window_id = store.window_id(session, declared.dag_id, start)
        assert window_id is not None, f"{declared.dag_id}: no window at {start}"
        window = store.window_summary(session, window_id)
    assert all(s.window_by == "arrival" for s in declared.streams.values()), "the oracle here knows arrival"
    landings = {name: Path(s.path.removeprefix("file://")) for name, s in declared.streams.items()}
    expected = arrived_in(landings, window.window_start, window.window_end)
    done = [b for b in window.batches if b.status == BatchStatus.DONE]
    for stream in declared.streams:
        frozen = sorted(f.removeprefix("file://") for b in done for f in (b.files or {}).get(stream, []))
        assert frozen == expected.get(stream, []), f"{declared.dag_id}: every {stream} file in exactly one batch"
    read, _ = window_paths(declared, window.window_start, window.window_end)
    assert {s: sorted(p) for s, p in read.items()} == expected, f"{declared.dag_id}: the single pass reads them"
    assert window.status == WindowStatus.MERGED, f"{declared.dag_id}: {window.status}"
    assert window.result_uri is not None
    _, differences = verify_window(spark, declared, window.window_start, window.window_end, window.result_uri)
    assert differences == [], f"{declared.dag_id}: {differences}"
    return window
