"""`iqp check DAGS_FOLDER`: the admission test over the declarations of a dags folder."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from airflow_iqp.cli import main

DAGS = Path(__file__).resolve().parents[2] / "dags"

DAG_FILE = """
from datetime import datetime, timedelta
from airflow_iqp import ArrivalRate, FileStream, intermittent_query

dag = intermittent_query(
    dag_id={dag_id!r},
    query={query!r},
    window=timedelta(minutes=2),
    deadline=timedelta(seconds={deadline}),
    streams={{"lineitem": FileStream({landing!r})}},
    output={results!r},
    rate=ArrivalRate(files_per_second=2, rows_per_file=4300),
    cost_model={cost_model!r},
    start_date=datetime(2026, 1, 1),
)
"""


def dag_file(folder: Path, dag_id: str, query: str, deadline: float, cost_model: str | None = None) -> None:
    folder.mkdir(exist_ok=True)
    text = DAG_FILE.format(
        dag_id=dag_id,
        query=query,
        deadline=deadline,
        landing=str(folder.parent / "landing" / "lineitem"),
        results=str(folder.parent / "results") + "/{dag_id}/{window_start}",
        cost_model=cost_model or query,
    )
    (folder / f"{dag_id}.py").write_text(text)


@pytest.fixture
def demo_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for variable, folder in (("IQP_LANDING", "landing"), ("IQP_STATIC", "static"), ("IQP_RESULTS", "results")):
        monkeypatch.setenv(variable, str(tmp_path / folder))


def test_the_repository_dags_get_a_verdict_each_and_the_exit_code_follows_it(
    demo_env: None, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["check", str(DAGS)])
    out = capsys.readouterr().out
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith("iqp_")}
    assert set(rows) == {"iqp_q1", "iqp_q6", "iqp_q14"}
    assert all(("holds:" in row) != ("MISSES" in row) for row in rows.values())
    feasible = "feasible: every deadline holds" in out
    assert feasible == all("holds:" in row for row in rows.values())
    assert code == (0 if feasible else 1)


def test_an_infeasible_pair_is_refused_naming_the_query_and_the_shortfall(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each alone meets its deadline; together q6's work after its window closes can sit behind
    q1's job, which is due much later but may already hold the resource. q6 plans with room for
    that job (most of its work before the close), but 15 s after the close is too little even so.
    """
    alone, pair = tmp_path / "alone", tmp_path / "pair"
    dag_file(alone, "tight_q6", "q6", deadline=15)
    dag_file(pair, "tight_q6", "q6", deadline=15)
    dag_file(pair, "loose_q1", "q1", deadline=240)

    assert main(["check", str(alone)]) == 0
    assert "feasible: every deadline holds" in capsys.readouterr().out

    assert main(["check", str(pair)]) == 1
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith(("tight_", "loose_"))}
    # dag, window, "s", due, "s", work, "s", after close, "s", longest job, "s", verdict...
    final_q6, longest_q1 = float(rows["tight_q6"][7]), float(rows["loose_q1"][9])
    # At q6's first deadline after close: its final work plus q1's longest job, against 15 s.
    miss = re.search(
        r"infeasible: tight_q6's deadline fails first, short by ([0-9.]+) s \(at \+15 s after close\)", out
    )
    assert miss is not None
    assert float(miss.group(1)) == pytest.approx(final_q6 + longest_q1 - 15, abs=0.11)
    assert "MISSES by" in " ".join(rows["tight_q6"])
    assert "behind loose_q1's" in " ".join(rows["tight_q6"])


def test_queries_without_a_price_are_listed_and_left_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "dags"
    folder.mkdir()
    (folder / "mine.sql").write_text("SELECT sum(l_quantity) AS qty FROM lineitem")
    dag_file(folder, "learning_mine", str(folder / "mine.sql"), deadline=30, cost_model="learn")
    assert main(["check", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "learning_mine: not checked: it learns its cost model without a prior" in out
    assert "nothing to check" in out


def test_a_packaged_query_that_learns_is_priced_by_its_prior(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its learning starts from the packaged model: the same price as declaring that model."""
    learning, fitted = tmp_path / "learning", tmp_path / "fitted"
    dag_file(learning, "some_q6", "q6", deadline=30, cost_model="learn")
    dag_file(fitted, "some_q6", "q6", deadline=30)
    assert main(["check", str(learning)]) == 0
    priced = capsys.readouterr().out.replace(str(learning), "DAGS")
    assert main(["check", str(fitted)]) == 0
    assert priced == capsys.readouterr().out.replace(str(fitted), "DAGS")
    assert "some_q6 " in priced


def test_an_invalid_declaration_fails_the_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "dags"
    dag_file(folder, "ok_q1", "q1", deadline=240)
    dag_file(folder, "impossible_q6", "q6", deadline=1)  # below one batch of the window's files
    assert main(["check", str(folder)]) == 1
    out = capsys.readouterr().out
    invalid = next(line for line in out.splitlines() if line.startswith("impossible_q6.py: invalid declaration:"))
    assert "deadline 1 s after the window end can never be met" in invalid
    assert "ok_q1" in out


def test_a_folder_that_is_not_there_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(tmp_path / "missing")]) == 2
    assert "is not a directory" in capsys.readouterr().err


def test_capacity_prints_the_cores_per_interval_and_who_needs_the_peak(
    tmp_path: Path, demo_env: None, capsys: pytest.CaptureFixture[str]
) -> None:
    def phases(folder: Path) -> dict[str, int]:
        assert main(["check", str(folder), "--capacity", "--confidence", "0.9"]) == 0
        out = capsys.readouterr().out
        assert "capacity for every deadline with probability 0.9 (speedup: default until measured" in out
        assert re.search(r"^peak: \d+ cores?, needed by tight_q6 \(after close\) \(what fixed", out, re.MULTILINE)
        assert re.search(r"^ +120 - .* s +\d+ cores  final work due: .*tight_q6", out, re.MULTILINE)
        found = re.findall(r"^  (while the windows are open|once a window has closed)[^:]*: +(\d+) core", out, re.M)
        return {phase: int(cores) for phase, cores in found}

    loose, tight = tmp_path / "loose", tmp_path / "tight"
    dag_file(loose, "tight_q6", "q6", deadline=60)
    dag_file(tight, "tight_q6", "q6", deadline=20)
    loose_cores, tight_cores = phases(loose), phases(tight)
    assert len(loose_cores) == len(tight_cores) == 2
    assert tight_cores["once a window has closed"] > loose_cores["once a window has closed"], (
        "a tighter deadline needs more"
    )
    assert tight_cores["while the windows are open"] <= tight_cores["once a window has closed"]
