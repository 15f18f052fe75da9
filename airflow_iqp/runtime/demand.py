"""What one declared query asks of the shared Spark resource per window: the admission test's
recurring task (`planning.admission`), priced with the cost model and rate it is planned with.

Static mode: its planned batches and the merge job. Dynamic mode: the window's expected files in
MinBatch batches and the merge; it may hold the resource for a batch of up to `max_batch` files
(its tau_max bound), so that is its longest job unless the merge is longer. Either way the batch
holding the window's last file and the merge only run once the window has closed: its final work.

The queries sharing the resource are priced from their declarations (`shared_demands`): each
one's longest job as planned alone, and each static plan leaving room for the longest of the
others'. That is a function of the declarations, the rates and the models only, so the `plan`
task of any of them, and of any window, sees the same room: the first window of a fresh ledger
too, before the other queries have planned anything. A query declared elsewhere is known only by
the demand its own plan recorded in the ledger.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from airflow_iqp.constants import Mode
from airflow_iqp.planning.admission import RecurringQuery, blocking
from airflow_iqp.runtime.sizing import dynamic_batching, file_costs, merge_costs, plan_files

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from airflow_iqp.declaration import ArrivalRate, CostModel, Declaration
    from airflow_iqp.runtime.sizing import WindowPlan


@dataclass(frozen=True)
class Priced:
    """A declared query with the rate and cost model its windows are planned with."""

    declaration: Declaration
    rate: ArrivalRate
    model: CostModel


def static_plan(
    declaration: Declaration, rate: ArrivalRate, model: CostModel, longest_jobs: Mapping[str, float]
) -> tuple[WindowPlan, float, str | None]:
    """The static plan the `plan` task runs: against the deadline less the longest job another
    query sharing the resource may hold it for (`longest_jobs`, by DAG id: `longest_jobs()`);
    with that room, and whose job it is (None: no other query).
    """
    room, blocker = blocking(declaration.dag_id, longest_jobs)
    return plan_files(declaration, rate, model, blocking=room), room, blocker


def window_demand(
    declaration: Declaration, rate: ArrivalRate, model: CostModel, blocking: float = 0.0
) -> RecurringQuery:
    """The declaration's window as a recurring task: period the window, due its deadline after it.
    A static plan leaves room for `blocking`, the longest job another query may hold the resource for.
    """
    always, extra_merge = merge_costs(model)
    if declaration.mode is Mode.DYNAMIC:
        batching = dynamic_batching(declaration, rate, model)
        cost = file_costs(model, rate.rows_per_file)
        full, rest = divmod(batching.expected_files, batching.min_batch.size)
        batches = [cost.cost(batching.min_batch.size)] * full + ([cost.cost(rest)] if rest else [])
        merge = always + extra_merge.cost(len(batches))
        longest = max(cost.cost(batching.max_batch), merge)
    else:
        planned = plan_files(declaration, rate, model, blocking=blocking)
        batches = [b.cost for b in planned.plan.batches]
        merge, longest = planned.merge_job, planned.longest_job
    window = declaration.window.total_seconds()
    return RecurringQuery(
        name=declaration.dag_id,
        period=window,
        deadline=window + declaration.deadline.total_seconds(),
        work=math.fsum([*batches, merge]),
        longest_job=longest,
        final_work=math.fsum([batches[-1], merge]) if batches else merge,
    )


def longest_jobs(priced: Sequence[Priced], recorded: Sequence[RecurringQuery]) -> dict[str, float]:
    """The longest job each query sharing the resource may hold it for, by DAG id: a priced one's
    as its window is planned alone (as `iqp check` prices it), one known only by its recorded
    demand as recorded.
    """
    longest = {q.name: q.longest_job for q in recorded}
    longest.update({p.declaration.dag_id: window_demand(p.declaration, p.rate, p.model).longest_job for p in priced})
    return longest


def shared_demands(priced: Sequence[Priced], recorded: Sequence[RecurringQuery]) -> list[RecurringQuery]:
    """Every query sharing the resource, for admission: each priced one's window planned with room
    for the others' longest job, and the recorded ones that are not priced here.
    """
    longest = longest_jobs(priced, recorded)
    names = {p.declaration.dag_id for p in priced}
    return [
        *(q for q in recorded if q.name not in names),
        *(window_demand(p.declaration, p.rate, p.model, blocking(p.declaration.dag_id, longest)[0]) for p in priced),
    ]
