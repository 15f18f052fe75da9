"""Every open window's predicted finish, from the ledger's rows, so that a window that will miss
its deadline is flagged at risk before the deadline comes.

What a window has left is priced by its DAG's stored cost model, the one its plans use
(`read.cost_model`: a declared file's, or learned from its own jobs), made pessimistic by that
model's residual spread (a job takes at most 1 + the `RISK_QUANTILE`
residual times its prediction, nine times in ten), else by the costs its plan recorded. Then
`dynamic.forecast.finish` runs it behind the jobs holding the resources and the waiting
requests the dispatcher serves first (`best_first`, the dispatcher's own ranking). A job that
overruns its prediction is taken to end now, so while it keeps running the forecast moves
with the clock. Jobs that have not registered yet are not foreseen.

Pure: `now` is passed in; the adapter that reads the ledger, keeps the forecasts in it and logs
the windows that turn at risk is `runtime.forecasts`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from airflow_iqp.constants import (
    OPEN_REQUEST_STATES,
    OPEN_WINDOW_STATES,
    BatchStatus,
    CostSource,
    JobKind,
    Mode,
    Policy,
    RequestState,
)
from airflow_iqp.dynamic.dispatch import Candidate, best_first
from airflow_iqp.dynamic.estimate import expected_time_of
from airflow_iqp.dynamic.forecast import Backlog, Pending, finish
from airflow_iqp.dynamic.laxity import unfinished

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from airflow_iqp.learning.cost import LearnedCost
    from airflow_iqp.ui.read import BatchRow, RequestRow, ResourceRow, WindowRow

RISK_QUANTILE = 0.9
# Ids of jobs not registered yet (a window's id is added): after every real request they tie with.
_NOT_REGISTERED = 2**62


def pessimistic(model: LearnedCost | None) -> LearnedCost | None:
    """The stored model with its `RISK_QUANTILE` margin; a calibration's spread (two or three
    timings) means nothing yet and a file's is none, so those are used as they are.
    """
    if model is None or model.source is not CostSource.REFIT:
        return model
    return model.with_margin(quantile=RISK_QUANTILE)


def backlog(w: WindowRow, model: LearnedCost | None, now: float) -> Backlog | None:
    """What the open window `w` has left at `now` (epoch seconds), priced by `model` (already
    pessimistic), else by its plan; None when neither prices its merge (or, in dynamic mode, the
    files no batch has taken yet).
    """
    pricing = _Pricing(w, model)
    running_until: float | None = None
    jobs: list[tuple[int | None, Pending]] = []  # (slot, job): None for dynamic work not cut yet
    for b in sorted(w.batches, key=lambda b: b.index):
        if not unfinished(b):
            continue
        seconds = pricing.batch(b)
        if b.status is BatchStatus.RUNNING and b.actual_start is not None:
            running_until = _overrun(b.actual_start.timestamp() + seconds, now)
        else:  # a static batch's slot is its index
            jobs.append((b.index if b.slot is None else b.slot, Pending(seconds, b.release.timestamp())))
    if w.plan.mode is Mode.DYNAMIC:
        uncut = _uncut(w, pricing, now)
        if uncut is None:
            return None
        jobs += [(None, job) for job in uncut]
    granted = next((r for r in w.requests if r.state is RequestState.GRANTED), None)
    partials = sum(b.status is BatchStatus.DONE for b in w.batches) + len(jobs) + (running_until is not None)
    merge = pricing.merge(partials)
    if merge is None:
        return None
    if granted is not None and granted.kind is JobKind.MERGE and granted.granted_at is not None:
        return Backlog(_overrun(granted.granted_at.timestamp() + merge, now), ())
    if granted is not None and granted.granted_at is not None and running_until is None and jobs:
        # granted, but its batch has not started (or not been cut) yet: that job runs from the grant
        position = next((i for i, (slot, _) in enumerate(jobs) if slot == granted.slot), 0)
        _, job = jobs.pop(position)
        running_until = _overrun(max(granted.granted_at.timestamp(), job.release) + job.seconds, now)
    return Backlog(running_until, (*(job for _, job in jobs), Pending(merge)))


def forecasts(
    windows: Sequence[WindowRow],
    resources: Sequence[ResourceRow],
    resource_count: int,
    models: Mapping[str, LearnedCost | None],
    policy: Policy,
    last_served: Mapping[str, datetime],
    now: datetime,
) -> dict[int, datetime]:
    """The predicted finish of every open window that can be priced, by window id. `windows`
    must be every open window of every DAG: each may be in the others' way. `models` and
    `last_served` are by dag_id.
    """
    t = now.timestamp()
    open_windows = [w for w in windows if w.status in OPEN_WINDOW_STATES]
    backlogs = {w.id: b for w in open_windows if (b := backlog(w, pessimistic(models.get(w.dag_id)), t)) is not None}
    busy = _busy_until(open_windows, backlogs, resources, resource_count, t)
    queue = _queue(open_windows, backlogs, last_served, t)
    seconds_of = {q.candidate.request: q.seconds for q in queue.values()}
    found: dict[int, datetime] = {}
    for w in open_windows:
        if (b := backlogs.get(w.id)) is None:
            continue
        own = queue.get(w.id)
        if own is None:  # its next job is not ready, or it runs one now: it queues when ready
            ready = max(t, b.jobs[0].release) if b.jobs else t
            own = _Queued(_unregistered(w, b, ready, last_served), 0.0)
        others = [q.candidate for window_id, q in queue.items() if window_id != w.id]
        ranked = best_first(policy, [*others, own.candidate], t)
        ahead = [seconds_of[c.request] for c in ranked[: ranked.index(own.candidate)]]
        found[w.id] = datetime.fromtimestamp(finish(t, b, busy, ahead), now.tzinfo)
    return found


def applied(w: WindowRow, predicted: Mapping[int, datetime]) -> WindowRow:
    """The row with its live forecast as its predicted finish, while it is open."""
    if w.status not in OPEN_WINDOW_STATES or w.id not in predicted:
        return w
    return replace(w, predicted_finish=predicted[w.id])


# -- pricing -----------------------------------------------------------------------------------


class _Pricing:
    """Seconds of one window's jobs: the stored model where the plan says how many rows a
    batch holds, else the plan's own costs.
    """

    def __init__(self, w: WindowRow, model: LearnedCost | None) -> None:
        self.w = w
        self.model = model
        self.rows_per_unit = 1.0 if w.plan.unit == "tuples" else _positive(w.plan.rows_per_file)

    def rows(self, size: int) -> int | None:
        return None if self.rows_per_unit is None else round(size * self.rows_per_unit)

    def batch(self, b: BatchRow) -> float:
        rows = self.rows(b.last_tuple - b.first_tuple + 1)
        if self.model is not None and rows is not None:
            return self.model.partial_seconds(rows)
        return b.predicted_cost

    def merge(self, partials: int) -> float | None:
        if self.model is not None:
            return self.model.merge_seconds(partials)
        return _positive(self.w.plan.merge_cost, zero=True)


def _uncut(w: WindowRow, pricing: _Pricing, now: float) -> list[Pending] | None:
    """Dynamic mode: the files no batch has taken yet, in MinBatch-sized batches, each released
    when its last file should land (files arrive evenly over the window). Once the window has
    ended only a slot still asking for the resource has files to cut. Priced by the stored
    model, else by the work the window's latest partial request reported; None if neither.
    """
    plan = w.plan
    expected, min_batch = plan.expected_files, plan.dynamic.min_batch if plan.dynamic is not None else 0
    taken = sum(b.last_tuple - b.first_tuple + 1 for b in w.batches)
    cut_slots = {b.slot for b in w.batches if unfinished(b)}
    asking = any(
        r.kind is JobKind.PARTIAL and r.state in OPEN_REQUEST_STATES and r.slot not in cut_slots for r in w.requests
    )
    start, end = w.window_start.timestamp(), w.window_end.timestamp()
    pending = max(expected - taken, 0) if now < end or asking else 0
    if pending == 0:
        return []
    size = max(min_batch, 1)
    sizes = [size] * (pending // size) + ([pending % size] if pending % size else [])
    releases, landed = [], taken
    for n in sizes:
        landed += n
        releases.append(expected_time_of(landed, expected, start, end))
    if pricing.model is not None and (rows := pricing.rows(size)) is not None:
        per_batch = [pricing.model.partial_seconds(round(rows * n / size)) for n in sizes]
    else:
        partial_requests = [r for r in w.requests if r.kind is JobKind.PARTIAL]
        merge = _positive(plan.merge_cost, zero=True)
        if not partial_requests or merge is None:
            return None
        work = max(partial_requests[-1].remaining_cost - merge, 0.0)
        per_batch = [work * n / pending for n in sizes]
    return [Pending(seconds, release) for seconds, release in zip(per_batch, releases, strict=True)]


def _positive(value: object, zero: bool = False) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if value > 0 or (zero and value == 0) else None


def _overrun(predicted_end: float, now: float) -> float:
    """A job still running past its predicted end ends, at the soonest, now."""
    return max(predicted_end, now)


# -- the dispatcher ---------------------------------------------------------------------------


def _busy_until(
    windows: Sequence[WindowRow],
    backlogs: Mapping[int, Backlog],
    resources: Sequence[ResourceRow],
    resource_count: int,
    now: float,
) -> list[float]:
    """When each resource frees: its holder's job's end; free (now) if it has no holder, its
    lease expired, or its holder's end cannot be priced.
    """
    window_of = {r.id: w.id for w in windows for r in w.requests}
    held = {r.id: r for r in resources}
    busy = []
    for resource in range(resource_count):
        row = held.get(resource)
        holder = None if row is None or row.holder is None else window_of.get(row.holder)
        expired = row is not None and row.lease_expires is not None and row.lease_expires.timestamp() < now
        log = None if holder is None or expired else backlogs.get(holder)
        busy.append(now if log is None or log.running_until is None else log.running_until)
    return busy


@dataclass(frozen=True)
class _Queued:
    """A job in the dispatcher's queue, or about to be: how it ranks and its seconds."""

    candidate: Candidate
    seconds: float


def _queue(
    windows: Sequence[WindowRow], backlogs: Mapping[int, Backlog], served: Mapping[str, datetime], now: float
) -> dict[int, _Queued]:
    """By window: its waiting request, or its next job if that is released and the window has
    no open request (it queues the moment its task sees its files).
    """
    queue: dict[int, _Queued] = {}
    for w in windows:
        b = backlogs.get(w.id)
        waiting = next((r for r in w.requests if r.state is RequestState.WAITING), None)
        if waiting is not None:
            queue[w.id] = _Queued(_candidate(w, waiting, served), _next_job(b, waiting.remaining_cost))
        elif b is not None and b.jobs and b.running_until is None and b.jobs[0].release <= now:
            if not any(r.state in OPEN_REQUEST_STATES for r in w.requests):
                # not registered yet, so it registers now at the earliest (a merge is released at -inf)
                ready = max(b.jobs[0].release, now)
                queue[w.id] = _Queued(_unregistered(w, b, ready, served), b.jobs[0].seconds)
    return queue


def _candidate(w: WindowRow, r: RequestRow, served: Mapping[str, datetime]) -> Candidate:
    """A waiting request as the dispatcher ranks it (`served` is by dag_id, each DAG's requests
    name their DAG as their query).
    """
    return Candidate.of_waiting(r, served.get(w.dag_id))


def _unregistered(w: WindowRow, b: Backlog, ready: float, served: Mapping[str, datetime]) -> Candidate:
    """The window's next job as the dispatcher would rank it once it registers at `ready`."""
    return Candidate.of_request(
        request=_NOT_REGISTERED + w.id,
        query=w.dag_id,
        deadline=w.deadline,
        remaining=b.seconds,
        ready=datetime.fromtimestamp(ready, UTC),
        last_served=served.get(w.dag_id),
        backfill_window=w.window_start if w.backfill else None,
    )


def _next_job(b: Backlog | None, reported: float) -> float:
    """Seconds of the job a waiting request will run: its window's next job; all the work the
    request reported when its window cannot be priced.
    """
    return b.jobs[0].seconds if b is not None and b.jobs else reported
