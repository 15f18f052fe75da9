"""What the operators of a window share: the run's window, checked before anything uses it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, cast

import pytest

from airflow_iqp.operators.window import run_window

if TYPE_CHECKING:
    from airflow.sdk import Context

START, END = datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 1, 0, 2, tzinfo=UTC)


def test_the_window_is_the_runs_data_interval() -> None:
    context = cast("Context", {"data_interval_start": START, "data_interval_end": END, "run_id": "r"})
    assert run_window(context) == (START, END)


def test_a_run_without_a_data_interval_is_refused_with_what_to_do() -> None:
    context = cast("Context", {"data_interval_start": None, "data_interval_end": None, "run_id": "manual__x"})
    with pytest.raises(ValueError, match="run manual__x has no data interval.*trigger IQP DAGs with a logical date"):
        run_window(context)
