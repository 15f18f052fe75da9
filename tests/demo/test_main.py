"""The plans `make demo` prints are the ones its DAGs run once they have a model (their first
window calibrates): a static example's plan leaves room before its deadline for the longest job
another example may hold the shared resource for. A demo of several windows is asked for by
number."""

from __future__ import annotations

import pytest

from airflow_iqp.declaration import ArrivalRate
from airflow_iqp.demo.__main__ import FILES, LINEITEM_PER_SCALE, demo_windows, examples, execution_path, plans
from airflow_iqp.runtime.costs import prior_model
from airflow_iqp.runtime.demand import window_demand
from airflow_iqp.runtime.sizing import WindowPlan


def test_printed_static_plans_leave_room_for_the_other_examples_longest_job() -> None:
    rows_per_file = LINEITEM_PER_SCALE * 0.2 / FILES
    planned = plans(rows_per_file)
    loaded = examples(rows_per_file)
    longest = {}
    for example in loaded:
        rate = example.declaration.rate
        assert isinstance(rate, ArrivalRate)
        model = prior_model(example.declaration, execution_path())  # the DAGs learn: planned with the prior
        assert model is not None
        longest[example.query] = window_demand(example.declaration, rate, model).longest_job
    static = [e for e in loaded if isinstance(planned[e.query], WindowPlan)]
    assert static
    assert len(static) < len(loaded)  # someone else's job to leave room for
    for example in static:
        plan = planned[example.query]
        assert isinstance(plan, WindowPlan)
        room = max(job for query, job in longest.items() if query != example.query)
        due = (example.declaration.window + example.declaration.deadline).total_seconds()
        assert plan.plan.feasible
        assert plan.finish + room <= due


@pytest.mark.parametrize(("value", "windows"), [(None, 1), ("1", 1), ("3", 3)])
def test_the_demo_runs_as_many_windows_as_asked(
    monkeypatch: pytest.MonkeyPatch, value: str | None, windows: int
) -> None:
    if value is None:
        monkeypatch.delenv("IQP_DEMO_WINDOWS", raising=False)
    else:
        monkeypatch.setenv("IQP_DEMO_WINDOWS", value)
    assert demo_windows() == windows


@pytest.mark.parametrize("value", ["0", "-1", "three", "2.5"])
def test_a_number_of_windows_that_is_none_is_refused(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("IQP_DEMO_WINDOWS", value)
    with pytest.raises(SystemExit, match="IQP_DEMO_WINDOWS must be a whole number"):
        demo_windows()
