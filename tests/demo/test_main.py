"""The plans `make demo` prints are the ones its DAGs run: a static example's plan leaves room
before its deadline for the longest job another example may hold the shared resource for."""

from __future__ import annotations

from airflow_iqp.declaration import ArrivalRate
from airflow_iqp.demo.__main__ import FILES, LINEITEM_PER_SCALE, examples, execution_path, plans
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
        model = example.declaration.fitted_model(execution_path())
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
