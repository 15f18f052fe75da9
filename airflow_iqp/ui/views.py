"""From ledger rows to what the monitor shows: outcomes, laxity, cost against one batch, and
the geometry of a window's chart, all computed here so the front end only draws.

Pure: nothing here reads a database or Airflow; `now` is always passed in.
"""

from __future__ import annotations

import math
import statistics
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from airflow_iqp.constants import OPEN_WINDOW_STATES, BatchStatus, JobKind, Policy, RequestState, WindowStatus
from airflow_iqp.dynamic.dispatch import Candidate, best_first
from airflow_iqp.dynamic.laxity import window_remaining
from airflow_iqp.ui.models import (
    Axis,
    Bar,
    DispatcherView,
    Grant,
    Holder,
    Marks,
    MissesView,
    Outcome,
    QueryOverview,
    QueueEntry,
    Ranked,
    ResourceView,
    Wait,
    WindowDetail,
    WindowSummary,
)

if TYPE_CHECKING:
    from collections.abc import Collection, Iterable, Iterator, Mapping

    from airflow_iqp.learning.cost import LearnedCost
    from airflow_iqp.ui.read import BatchRow, DispatcherRows, QueryRow, RequestRow, WindowRow

AXIS_MARGIN = 1.05  # the axis runs 5% past the latest thing drawn
MOST_TICKS = 8
# Tick steps in seconds: decimal below ten seconds, then steps a clock reader expects.
_CLOCK_STEPS = (10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)


# -- geometry ---------------------------------------------------------------------------------


def seconds_after(at: datetime | None, origin: datetime) -> float | None:
    """`at` as seconds after `origin` (None stays None)."""
    return None if at is None else (at - origin).total_seconds()


def tick_step(span_s: float, most: int = MOST_TICKS) -> float:
    """The smallest round step that labels [0, span_s] with at most `most` ticks. Consecutive
    steps differ by at most 2.5 times, so at least most / 2.5 ticks remain (two from 3 on).
    """
    if not (math.isfinite(span_s) and span_s > 0) or most < 3:
        raise ValueError(f"a tick step needs a positive finite span and at least 3 ticks, got {span_s!r}, {most!r}")
    return next(step for step in _steps() if math.floor(span_s / step + 1e-9) + 1 <= most)


def _steps() -> Iterator[float]:
    """Every tick step, smallest first, without end."""
    exponent = -3
    while (base := 10.0**exponent) < 10:
        yield from (base, 2 * base, 5 * base)
        exponent += 1
    yield from _CLOCK_STEPS
    days = 1
    while True:
        for factor in (2, 5, 10):
            yield 86400.0 * days * factor
        days *= 10


def ticks(span_s: float, most: int = MOST_TICKS) -> list[float]:
    """Evenly spaced labels from 0 up to `span_s`, a round step apart."""
    step = tick_step(span_s, most)
    count = math.floor(span_s / step + 1e-9) + 1
    return [round(i * step, 9) for i in range(count)]


def axis(values: Iterable[float | None]) -> Axis:
    """From the window start to a little past the latest value drawn, at least one second."""
    latest = max([1.0, *(v for v in values if v is not None and math.isfinite(v))])
    span = latest * AXIS_MARGIN
    return Axis(span_s=span, ticks_s=ticks(span))


# -- a window's numbers -----------------------------------------------------------------------


CONFIDENCE = 0.95  # of the interval shown around a prediction


def single_batch(model: LearnedCost, rows: int) -> tuple[float, float, float]:
    """One batch over `rows` rows plus its merge by the stored model: the prediction and its
    `CONFIDENCE` interval (each job's interval from its kind's residual spread, added up).
    """
    partial_low, partial_high = model.interval(JobKind.PARTIAL, rows, CONFIDENCE)
    merge_low, merge_high = model.interval(JobKind.MERGE, 1, CONFIDENCE)
    predicted = model.partial_seconds(rows) + model.merge_seconds(1)
    return predicted, partial_low + merge_low, partial_high + merge_high


def merge_request(w: WindowRow) -> RequestRow | None:
    """The window's latest merge request."""
    merges = [r for r in w.requests if r.kind is JobKind.MERGE]
    return merges[-1] if merges else None


def merge_cost(w: WindowRow) -> float | None:
    """Seconds the merge ran: its job as the ledger observed it (`read.merge_seconds`: what the
    cost model is fitted to and `single_batch` prices), else from its grant to the window's finish.
    """
    if w.merge_seconds is not None:
        return w.merge_seconds
    merge = merge_request(w)
    if merge is None or merge.granted_at is None or w.actual_finish is None:
        return None
    return max((w.actual_finish - merge.granted_at).total_seconds(), 0.0)


def remaining_s(w: WindowRow) -> float:
    """The window's remaining work (`dynamic.laxity.window_remaining`): as its open request told
    the dispatcher, which ranks it by that; else from its plan's batches and merge.
    """
    if w.status not in OPEN_WINDOW_STATES:
        return 0.0
    open_requests = [r for r in w.requests if r.state in (RequestState.WAITING, RequestState.GRANTED)]
    if open_requests:
        return open_requests[-1].remaining_cost
    return window_remaining(w.status, w.batches, w.plan.merge_cost)


def laxity_s(w: WindowRow, now: datetime) -> float | None:
    """Seconds to spare: deadline - finish once the window finished; while open, deadline - now - remaining
    work (eq. 9 of the paper). None for a window that failed without a finish time.
    """
    if w.status in OPEN_WINDOW_STATES:
        return (w.deadline - now).total_seconds() - remaining_s(w)
    return seconds_after(w.deadline, w.actual_finish) if w.actual_finish is not None else None


def outcome(w: WindowRow, now: datetime, laxity: float | None) -> Outcome:
    """Met or missed once closed; an open window past its deadline has missed it, and one
    predicted to finish after it (by the ledger's predicted finish, or no laxity left) is at risk.
    A backfill's window has no deadline to meet or miss.
    """
    if w.backfill:
        return Outcome.BACKFILL
    if w.status not in OPEN_WINDOW_STATES:
        return Outcome.MET if w.deadline_met else Outcome.MISSED
    if now > w.deadline:
        return Outcome.MISSED
    late = w.predicted_finish is not None and w.predicted_finish > w.deadline
    return Outcome.AT_RISK if late or (laxity is not None and laxity < 0) else Outcome.ON_TRACK


def summarize(w: WindowRow, now: datetime, model: LearnedCost | None) -> WindowSummary:
    """A window's outcome, laxity and cost against one batch over its rows, priced by `model`,
    the DAG's stored cost model (the one its plans use, `read.cost_model`).
    """
    done = [b.actual_cost for b in w.batches if b.status == BatchStatus.DONE and b.actual_cost is not None]
    merge = merge_cost(w)
    cost = None if not done and merge is None else sum(done) + (merge or 0.0)
    rows = w.actual_tuples if w.actual_tuples is not None else w.expected_tuples
    single, low, high = (None, None, None) if model is None else single_batch(model, rows)
    merged = w.status == WindowStatus.MERGED and merge is not None
    ratio = cost / single if merged and cost is not None and single else None
    laxity = laxity_s(w, now)
    return WindowSummary(
        id=w.id,
        dag_id=w.dag_id,
        run_id=w.run_id,
        window_start=w.window_start,
        window_end=w.window_end,
        deadline=w.deadline,
        status=w.status,
        outcome=outcome(w, now, laxity),
        deadline_met=w.deadline_met,
        predicted_finish=w.predicted_finish,
        predicted_late_s=seconds_after(w.predicted_finish, w.deadline),
        actual_finish=w.actual_finish,
        laxity_s=laxity,
        remaining_s=remaining_s(w),
        cost_s=cost,
        single_batch_cost_s=single,
        single_batch_low_s=low,
        single_batch_high_s=high,
        cost_model=None if model is None else model.source,
        cost_ratio=ratio,
        batches=len(w.batches),
        unit=w.plan.unit,
        expected_tuples=w.expected_tuples,
        actual_tuples=w.actual_tuples,
        result=w.result,
        incomplete=w.incomplete,
        late_files=w.late_files,
    )


# -- a window's chart -------------------------------------------------------------------------


def wait(r: RequestRow, origin: datetime, now: datetime) -> Wait:
    """A request on the chart's clock."""
    return Wait(
        request=r.id,
        state=r.state,
        resource=r.resource_id,
        reason=r.reason,
        registered_s=_seconds(r.registered_at, origin),
        granted_s=seconds_after(r.granted_at, origin),
        released_s=seconds_after(r.released_at, origin),
        waited_s=((r.granted_at or now) - r.registered_at).total_seconds(),
    )


def batch_bar(b: BatchRow, waits: list[Wait], origin: datetime) -> Bar:
    """A batch as planned (release, latest start, planned start and end) and as it ran."""
    planned_start = seconds_after(b.planned_start, origin)
    frozen = b.files or {}
    files = sum(len(names) for names in frozen.values())
    return Bar(
        label=f"batch {b.index}",
        kind=JobKind.PARTIAL,
        index=b.index,
        slot=b.slot,
        status=b.status,
        reason=b.reason,
        release_s=seconds_after(b.release, origin),
        latest_start_s=seconds_after(b.latest_start, origin),
        planned_start_s=planned_start,
        planned_end_s=None if planned_start is None else planned_start + b.predicted_cost,
        actual_start_s=seconds_after(b.actual_start, origin),
        actual_end_s=seconds_after(b.actual_end, origin),
        predicted_cost_s=b.predicted_cost,
        actual_cost_s=b.actual_cost,
        planned_size=b.last_tuple - b.first_tuple + 1,
        actual_tuples=b.actual_tuples,
        attempts=b.attempts,
        files=frozen,
        file_count=files,
        waits=waits,
    )


# A slot's latest request, as the status of the batch it has not cut yet.
_SLOT_STATUS = {
    RequestState.WAITING: BatchStatus.WAITING,
    RequestState.GRANTED: BatchStatus.RUNNING,
    RequestState.RELEASED: BatchStatus.SKIPPED,
    RequestState.EXPIRED: BatchStatus.FAILED,
}


def slot_bar(slot: int, waits: list[Wait]) -> Bar:
    """A dynamic slot that asked for the resource but has not cut its batch yet."""
    return Bar(
        label=f"slot {slot}",
        kind=JobKind.PARTIAL,
        index=None,
        slot=slot,
        status=_SLOT_STATUS[waits[-1].state],
        reason=waits[-1].reason,
        release_s=None,
        latest_start_s=None,
        planned_start_s=None,
        planned_end_s=None,
        actual_start_s=None,
        actual_end_s=None,
        predicted_cost_s=None,
        actual_cost_s=None,
        planned_size=None,
        actual_tuples=None,
        attempts=0,
        files={},
        file_count=0,
        waits=waits,
    )


def merge_bar(w: WindowRow, waits: list[Wait], now: datetime) -> Bar:
    """The window's final merge: planned from the plan, run under its own request."""
    origin = w.window_start
    predicted = w.plan.merge_cost
    planned_start = w.plan.merge_start
    merge = merge_request(w)
    start = merge.granted_at if merge is not None else None
    end = w.actual_finish if w.status not in OPEN_WINDOW_STATES else None
    return Bar(
        label="merge",
        kind=JobKind.MERGE,
        index=None,
        slot=None,
        status=_merge_status(w, merge),
        reason=merge.reason if merge is not None else None,
        release_s=None,
        latest_start_s=None,
        planned_start_s=planned_start,
        planned_end_s=None if planned_start is None else planned_start + predicted,
        actual_start_s=seconds_after(start, origin),
        actual_end_s=seconds_after(end, origin),
        predicted_cost_s=predicted,
        actual_cost_s=merge_cost(w),
        planned_size=None,
        actual_tuples=w.actual_tuples,
        attempts=sum(1 for r in w.requests if r.kind is JobKind.MERGE and r.granted_at is not None),
        files={},
        file_count=0,
        waits=waits,
    )


def _merge_status(w: WindowRow, merge: RequestRow | None) -> BatchStatus:
    if w.status == WindowStatus.MERGED:
        return BatchStatus.DONE
    if w.status == WindowStatus.FAILED:
        return BatchStatus.FAILED
    if merge is None:
        return BatchStatus.PLANNED
    return BatchStatus.RUNNING if merge.state == RequestState.GRANTED else BatchStatus.WAITING


def bars(w: WindowRow, now: datetime) -> list[Bar]:
    """One row per batch, per slot still waiting for a batch, and the merge."""
    origin = w.window_start
    by_slot: dict[int, list[Wait]] = {}
    merge_waits: list[Wait] = []
    for r in w.requests:
        if r.kind is JobKind.MERGE:
            merge_waits.append(wait(r, origin, now))
        else:
            by_slot.setdefault(r.slot, []).append(wait(r, origin, now))
    rows = []
    for b in w.batches:
        rows.append(batch_bar(b, by_slot.pop(b.slot if b.slot is not None else b.index, []), origin))
    rows += [slot_bar(slot, waits) for slot, waits in sorted(by_slot.items())]
    return [*rows, merge_bar(w, merge_waits, now)]


def detail(w: WindowRow, now: datetime, model: LearnedCost | None) -> WindowDetail:
    """A window with its chart: bars, the window end, the deadline, the finish and now."""
    origin = w.window_start
    rows = bars(w, now)
    marks = Marks(
        window_end_s=_seconds(w.window_end, origin),
        deadline_s=_seconds(w.deadline, origin),
        predicted_finish_s=seconds_after(w.predicted_finish, origin),
        actual_finish_s=seconds_after(w.actual_finish, origin),
        now_s=None,
    )
    now_s = _seconds(now, origin)
    drawn: list[float | None] = [marks.window_end_s, marks.deadline_s, marks.predicted_finish_s, marks.actual_finish_s]
    for bar in rows:
        drawn += [bar.planned_end_s, bar.actual_end_s, bar.actual_start_s, bar.latest_start_s, bar.release_s]
        drawn += [v for wt in bar.waits for v in (wt.registered_s, wt.granted_s, wt.released_s)]
    if w.status in OPEN_WINDOW_STATES:
        drawn.append(now_s)
    chart = axis(drawn)
    marks.now_s = now_s if 0 <= now_s <= chart.span_s else None
    return WindowDetail(
        now=now, window=summarize(w, now, model), plan=w.plan.dump(), axis=chart, marks=marks, bars=rows
    )


def _seconds(at: datetime, origin: datetime) -> float:
    return (at - origin).total_seconds()


# -- lists ------------------------------------------------------------------------------------


def overview(q: QueryRow, windows: list[WindowRow], now: datetime, model: LearnedCost | None) -> QueryOverview:
    """A query's recent windows: met, missed, at risk, median laxity and cost ratio."""
    summaries = [summarize(w, now, model) for w in windows]
    merged = [s for s in summaries if s.status == WindowStatus.MERGED]
    return QueryOverview(
        dag_id=q.dag_id,
        query=q.name,
        mode=q.mode,
        window_s=_param(q, "window_s"),
        deadline_s=_param(q, "deadline_s"),
        met=sum(s.outcome is Outcome.MET for s in summaries),
        missed=sum(s.outcome is Outcome.MISSED for s in summaries),
        at_risk=sum(s.outcome is Outcome.AT_RISK for s in summaries),
        open=sum(s.status in OPEN_WINDOW_STATES for s in summaries),
        median_laxity_s=_median(s.laxity_s for s in merged),
        median_cost_ratio=_median(s.cost_ratio for s in merged),
        windows=summaries,
    )


def misses(
    windows: Iterable[WindowRow], since: datetime, now: datetime, models: Mapping[str, LearnedCost | None]
) -> MissesView:
    """Windows that missed their deadline since `since` (open ones past it too), and open
    windows at risk of missing it; latest deadline first.
    """
    summaries = sorted(
        (summarize(w, now, models.get(w.dag_id)) for w in windows), key=lambda s: s.deadline, reverse=True
    )
    return MissesView(
        now=now,
        since=since,
        missed=[s for s in summaries if s.outcome is Outcome.MISSED and s.deadline >= since],
        at_risk=[s for s in summaries if s.outcome is Outcome.AT_RISK],
    )


def _param(q: QueryRow, name: str) -> float | None:
    value = q.params.get(name)
    return float(value) if isinstance(value, int | float) else None


def _median(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


# -- the dispatcher ---------------------------------------------------------------------------


def queue_order(rows: DispatcherRows, policy: Policy, now: datetime) -> list[RequestRow]:
    """The waiting requests in the order the dispatcher serves them (`best_first`, the one ranking)."""
    waiting = {r.id: r for r in rows.open if r.state == RequestState.WAITING}
    candidates = [Candidate.of_waiting(r, rows.last_served.get(r.query)) for r in waiting.values()]
    return [waiting[c.request] for c in best_first(policy, candidates, now.timestamp())]


def dispatcher(rows: DispatcherRows, policy: Policy, now: datetime, readable: Collection[str]) -> DispatcherView:
    """Resources and holders, the queue in policy order and recent grants; requests of DAGs
    the user may not read show only their place and timing.
    """
    known = {r.id: r for r in (*rows.open, *rows.grants)}
    resources = [
        ResourceView(
            id=res.id,
            fence=res.fence,
            lease_expires=res.lease_expires,
            expired=res.lease_expires is not None and res.lease_expires < now,
            holder=None if res.holder is None else _holder(res.holder, known.get(res.holder), now, readable),
        )
        for res in rows.resources
    ]
    queue = [_queue_entry(i, r, now, readable) for i, r in enumerate(queue_order(rows, policy, now), start=1)]
    grants = [_grant(g, rows, policy, readable) for g in rows.grants if g.granted_at is not None]
    return DispatcherView(now=now, policy=policy, resources=resources, queue=queue, grants=grants)


def _holder(request: int, r: RequestRow | None, now: datetime, readable: Collection[str]) -> Holder:
    hidden = r is None or r.dag_id not in readable
    return Holder(
        request=request,
        redacted=hidden,
        dag_id=None if hidden or r is None else r.dag_id,
        kind=None if hidden or r is None else r.kind,
        slot=None if hidden or r is None else r.slot,
        granted_at=None if r is None else r.granted_at,
        held_s=None if r is None or r.granted_at is None else (now - r.granted_at).total_seconds(),
    )


def _queue_entry(position: int, r: RequestRow, now: datetime, readable: Collection[str]) -> QueueEntry:
    waited = (now - r.registered_at).total_seconds()
    if r.dag_id not in readable:
        return QueueEntry(
            position=position,
            request=r.id,
            redacted=True,
            dag_id=None,
            kind=None,
            slot=None,
            reason=None,
            deadline=None,
            remaining_s=None,
            laxity_s=None,
            waited_s=waited,
        )
    return QueueEntry(
        position=position,
        request=r.id,
        redacted=False,
        dag_id=r.dag_id,
        kind=r.kind,
        slot=r.slot,
        reason=r.reason,
        deadline=r.deadline,
        remaining_s=r.remaining_cost,
        laxity_s=(r.deadline - now).total_seconds() - r.remaining_cost,
        waited_s=waited,
    )


def _grant(g: RequestRow, rows: DispatcherRows, policy: Policy, readable: Collection[str]) -> Grant:
    granted = g.granted_at or g.registered_at
    hidden = g.dag_id not in readable
    others = []
    for entry in g.ranking[1:]:  # the first is the request the grant chose
        dag = rows.ranked_dags.get(entry.request)
        shown = dag is not None and dag in readable
        others.append(
            Ranked(
                request=entry.request,
                redacted=not shown,
                dag_id=dag if shown else None,
                key=entry.key,
                key_at=_key_time(policy, entry.key, backfill=entry.request in rows.ranked_backfills),
            )
        )
    return Grant(
        request=g.id,
        redacted=hidden,
        dag_id=None if hidden else g.dag_id,
        kind=None if hidden else g.kind,
        slot=None if hidden else g.slot,
        resource=g.resource_id,
        state=g.state,
        registered_at=g.registered_at,
        granted_at=granted,
        released_at=g.released_at,
        waited_s=(granted - g.registered_at).total_seconds(),
        held_s=None if g.released_at is None else (g.released_at - granted).total_seconds(),
        others=others,
    )


def _key_time(policy: Policy, key: float | None, backfill: bool) -> datetime | None:
    """EDF ranks by the deadline and round robin by the last service, both epochs; a backfill's
    request, under every policy, by the start of the window it backfills
    (`dynamic.dispatch.Candidate.key`).
    """
    if key is None or not (backfill or policy in (Policy.EDF, Policy.RR)):
        return None
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(seconds=key)
