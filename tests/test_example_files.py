"""From a checkout (the editable install the tests run in) the examples are the repository's
top-level folders; tests/packaging/test_wheel.py shows a wheel finds its packaged copy."""

from __future__ import annotations

from pathlib import Path

from airflow_iqp.declaration import EXAMPLE_COST_MODELS
from airflow_iqp.example_files import example_dir
from airflow_iqp.queries import EXAMPLE_QUERIES

REPO = Path(__file__).resolve().parents[1]


def test_a_checkout_finds_the_examples_at_its_top_level() -> None:
    assert example_dir("queries") == EXAMPLE_QUERIES == REPO / "queries"
    assert example_dir("cost_models") == EXAMPLE_COST_MODELS == REPO / "cost_models"
    assert (EXAMPLE_QUERIES / "q6.sql").is_file()
    assert (EXAMPLE_COST_MODELS / "q6.json").is_file()
