"""`iqp db prune DAGS_FOLDER --older-than`: over a real SQLite ledger and a dags folder, it drops
the file rows of old merged windows and prints what, or refuses a cutoff the streams' history needs.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest
from sqlalchemy import func, select

from airflow_iqp.cli import main
from airflow_iqp.commands.db import duration
from airflow_iqp.constants import Mode
from airflow_iqp.ledger import session_scope, store
from airflow_iqp.ledger.models import StreamFile
from airflow_iqp.planning.record import PlanRecord
from airflow_iqp.streams.files import DataFile

if TYPE_CHECKING:
    from pathlib import Path

DAG_FILE = """
from datetime import datetime, timedelta
from airflow_iqp import FileStream, intermittent_query

dag = intermittent_query(
    dag_id="iqp_sales",
    query="q6",
    window=timedelta(hours=1),
    deadline=timedelta(minutes=30),
    streams={{"lineitem": FileStream({landing!r}, history={history})}},
    output={results!r},
    start_date=datetime(2026, 1, 1),
)
"""
START = datetime(2026, 1, 1, 10, tzinfo=UTC)  # long before the test runs


@pytest.fixture
def ledger(tmp_path: Path) -> str:
    """iqp_sales with one merged window (two frozen files) and iqp_other, which no DAG file declares."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    batch = {
        "index": 0,
        "first_tuple": 1,
        "last_tuple": 2,
        "release": START,
        "latest_start": START,
        "planned_start": START,
        "predicted_cost": 1.0,
    }
    files = [DataFile("lineitem", f"file:///landing/{n}", n, 10, START) for n in ("a.parquet", "b.parquet")]
    with session_scope(url) as s:
        for dag_id in ("iqp_sales", "iqp_other"):
            store.register_query(s, dag_id=dag_id, name="q6", sql="SELECT 1", mode=Mode.STATIC, params={})
            end = START + timedelta(hours=1)
            window_id = store.record_plan(s, dag_id, START, end, end, 2, PlanRecord(), [batch])
            store.freeze_files(s, window_id, 0, {"lineitem": files})
            store.record_merge(s, window_id, end, 2, "/results/sales/result")
    return url


def dags(tmp_path: Path, history: str) -> Path:
    folder = tmp_path / "dags"
    folder.mkdir()
    text = DAG_FILE.format(
        landing=str(tmp_path / "landing"), history=history, results=f"{tmp_path}/results/{{window_start}}"
    )
    (folder / "sales.py").write_text(text)
    return folder


def rows(url: str) -> int:
    with session_scope(url) as s:
        return s.scalar(select(func.count()).select_from(StreamFile)) or 0


def test_prune_drops_the_old_rows_of_the_declared_dags_and_says_what(
    ledger: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = dags(tmp_path, "timedelta(days=7)")

    assert main(["db", "prune", str(folder), "--older-than", "8d", "--url", ledger]) == 0

    out = capsys.readouterr().out
    assert "iqp_sales: dropped 2 file row(s) (2 frozen) of 1 window(s) ended by" in out
    assert "left as they are (no DAG file in" in out
    assert out.rstrip().endswith("declares them): iqp_other")
    assert rows(ledger) == 2, "iqp_other's rows stay"


def test_prune_refuses_a_cutoff_inside_the_history_and_drops_nothing(
    ledger: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = dags(tmp_path, "timedelta(days=7)")

    assert main(["db", "prune", str(folder), "--older-than", "36h", "--url", ledger]) == 2

    err = capsys.readouterr().err
    assert "iqp db: --older-than 36h would drop files that late_files still looks at" in err
    assert "pass --older-than 7d or more" in err
    assert rows(ledger) == 4


def test_prune_refuses_a_stream_without_history(
    ledger: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = dags(tmp_path, "None")

    assert main(["db", "prune", str(folder), "--older-than", "365d", "--url", ledger]) == 2

    assert "stream(s) 'lineitem' declare no history=" in capsys.readouterr().err
    assert rows(ledger) == 4


@pytest.mark.parametrize(
    ("text", "span"), [("30d", timedelta(days=30)), ("12h", timedelta(hours=12)), (" 90m", timedelta(minutes=90))]
)
def test_durations(text: str, span: timedelta) -> None:
    assert duration(text) == span


@pytest.mark.parametrize("text", ["30", "0d", "1.5d", "2w", "-1d"])
def test_other_durations_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        duration(text)
