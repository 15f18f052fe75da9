"""The demo takes windows, deadlines and modes from the example DAG files it runs."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from airflow_iqp.declaration import ArrivalRate
from airflow_iqp.demo.examples import Example, load_examples
from airflow_iqp.exceptions import InvalidDeclaration

DAGS = Path(__file__).resolve().parents[2] / "dags"
ENV = {
    "IQP_LANDING": "/tmp/iqp-test-landing",
    "IQP_STATIC": "/tmp/iqp-test-static",
    "IQP_RESULTS": "/tmp/iqp-test-results",
    "IQP_FILES_PER_SECOND": "2",
    "IQP_ROWS_PER_FILE": "4300",
}


def test_examples_are_what_the_dag_files_declare() -> None:
    found = load_examples(DAGS, ENV)
    assert {p.name for p in found} == {p.name for p in DAGS.glob("iqp_*.py")}
    examples = {e.dag_id: e for e in found.values() if isinstance(e, Example)}
    assert set(examples) == {"iqp_q1", "iqp_q6", "iqp_q14"}
    for dag_id, example in examples.items():
        source = (DAGS / f"{dag_id}.py").read_text()
        assert f"deadline=timedelta(seconds={example.deadline.total_seconds():g})" in source
        assert example.window == timedelta(minutes=2)
        assert example.query == dag_id.removeprefix("iqp_")
        assert example.declaration.streams["lineitem"].path == f"{ENV['IQP_LANDING']}/lineitem"
        assert example.declaration.output.template == ENV["IQP_RESULTS"] + "/{dag_id}/{window_start}"
        assert example.declaration.rate == ArrivalRate(files_per_second=2, rows_per_file=4300)
    assert examples["iqp_q14"].declaration.mode == "dynamic"
    assert examples["iqp_q14"].declaration.static["part"].path == f"{ENV['IQP_STATIC']}/part"


def test_an_example_that_cannot_be_declared_is_reported_not_raised(tmp_path: Path) -> None:
    (tmp_path / "iqp_bad.py").write_text((DAGS / "iqp_q6.py").read_text().replace('query="q6"', 'query="nope"'))
    found = load_examples(tmp_path, ENV)
    assert isinstance(found[tmp_path / "iqp_bad.py"], InvalidDeclaration)
    assert "unknown query 'nope'" in str(found[tmp_path / "iqp_bad.py"])
