"""The cores over time beside the dispatcher: used, planned and leased, with what the leases bill.

* **used**: the cores the granted jobs held, from each grant to its release (a grant that named
  no cores at the Spark connection's default, drawn as one when the connection sets none);
* **planned**: the capacity model (`planning.capacity.capacity`, as `iqp check --capacity` runs
  it) over the queries that recorded their demand, laid on their windows: the closed phase's
  cores while some window is between its close and its deadline, the open phase's while some
  window is open, none while no window is either;
* **leased**: the executors the server's lease controller recorded holding (`recorded`,
  `iqp connect-server start --cores plan`), else what a BTU-aware controller following that
  plan would hold (`leased`), billed per started unit, beside the plan's peak held from the
  first lease on (fixed provisioning).

Pure: the rows come from `ui.capacity`, `now` is passed in; times are seconds from the chart's start.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from airflow_iqp.planning.capacity import capacity
from airflow_iqp.planning.elastic import Lease, LeasePool
from airflow_iqp.ui.models import CapacityPlan, CapacityView, CoreStep
from airflow_iqp.ui.views import tick_step

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Iterable, Sequence
    from datetime import datetime

    from airflow_iqp.ledger.leases import Held
    from airflow_iqp.planning.capacity import Capacity
    from airflow_iqp.runtime.capacity import Granted
    from airflow_iqp.ui.capacity import CapacityRows, WindowSpan

MOST_CORE_TICKS = 5

Span = tuple[float, float, int]  # from, to (seconds from the chart's start) and cores


def view(
    rows: CapacityRows,
    *,
    since: datetime,
    now: datetime,
    confidence: float,
    btu: tuple[float, str],
    default_cores: int | None,
    readable: Collection[str],
) -> CapacityView:
    """The chart and its numbers over [since, now]; `btu` is the billing unit and where it comes from."""
    span = (now - since).total_seconds()
    kept = [(g, s) for g in rows.grants if (s := hold(g, since, now, default_cores)) is not None]
    held = [s for _, s in kept]
    used = steps(held, span)
    plan = capacity(rows.demands, confidence=confidence) if rows.demands else None
    phases = planned(plan, rows.windows, since, span) if plan is not None else []
    if rows.leases:
        leases: tuple[list[CoreStep], float] | None = recorded(rows.leases, since, now, btu[0])
    else:
        leases = leased(phases, held, btu[0], span) if phases else None
    top = max([1, *(s.cores for series in (used, phases, leases[0] if leases else []) for s in series)])
    return CapacityView(
        now=now,
        since=since,
        span_s=span,
        ticks_s=clock_ticks(since, span),
        core_ticks=core_ticks(top),
        used=used,
        used_core_s=math.fsum((end - start) * cores for start, end, cores in held),
        grants=len(held),
        default_grants=sum(g.cores is None for g, _ in kept),
        default_cores=default_cores,
        plan=None if plan is None else _plan(plan, len(rows.demands), readable),
        planned=phases,
        leased=leases[0] if leases else [],
        btu_s=btu[0],
        btu_source=btu[1],
        billed_core_s=leases[1] if leases else None,
        fixed_billed_core_s=fixed_billed(plan, leases[0], btu[0], span) if plan and leases else None,
    )


def hold(g: Granted, since: datetime, now: datetime, default_cores: int | None) -> Span | None:
    """The grant's hold clipped to [since, now] (one still held holds until now) with its cores;
    None when it holds nothing there.
    """
    start = max(0.0, (g.start - since).total_seconds())
    end = (now - since).total_seconds()
    if g.end is not None:
        end = min(end, (g.end - since).total_seconds())
    if end <= start:
        return None
    return start, end, g.cores if g.cores is not None else default_cores or 1


def steps(spans: Iterable[Span], span: float) -> list[CoreStep]:
    """The cores held at once over [0, span] by spans that each hold theirs from start to end."""
    changes: dict[float, int] = {0.0: 0}
    for start, end, cores in spans:
        changes[start] = changes.get(start, 0) + cores
        if end < span:
            changes[end] = changes.get(end, 0) - cores
    out: list[CoreStep] = []
    held = 0
    for at in sorted(changes):
        held += changes[at]
        if not out or out[-1].cores != held:
            out.append(CoreStep(at_s=at, cores=held))
    return out


def planned(plan: Capacity, windows: Sequence[WindowSpan], since: datetime, span: float) -> list[CoreStep]:
    """The plan's cores over [0, span]: closed phase while a window is due after its close, open
    phase while one is open, none otherwise. Empty when a phase has no count that suffices.
    """
    if plan.open.cores is None or plan.closed.cores is None:
        return []
    opened, closed = plan.open.cores, plan.closed.cores
    times = [tuple((t - since).total_seconds() for t in (w.start, w.close, w.deadline)) for w in windows]

    def cores(at: float) -> int:
        if any(close <= at < deadline for _, close, deadline in times):
            return closed
        return opened if any(start <= at < close for start, close, _ in times) else 0

    bounds = sorted({0.0, *(t for window in times for t in window if 0 < t < span)})
    return _sampled(bounds, cores)


def _sampled(bounds: Iterable[float], value: Callable[[float], int]) -> list[CoreStep]:
    """Steps at `bounds` where the value changes."""
    out: list[CoreStep] = []
    for at in bounds:
        cores = value(at)
        if not out or out[-1].cores != cores:
            out.append(CoreStep(at_s=at, cores=cores))
    return out


def cores_at(series: Sequence[CoreStep], when: float) -> int:
    """The cores a step series has at `when`."""
    return next((s.cores for s in reversed(series) if s.at_s <= when), 0)


def leased(plan: Sequence[CoreStep], held: Sequence[Span], btu: float, span: float) -> tuple[list[CoreStep], float]:
    """The cores leased over [0, span] and their bill (core-seconds) up to `span`.

    Without a lease controller's records, this is what a BTU-aware controller following the plan
    would have held (the simulator's `Planned`): the plan's cores at every change of the plan,
    at least one while a job holds a grant, more released only at the end of their paid unit
    (`planning.elastic.LeasePool`); every unit started by `span` is billed. Once the run-time
    controller records its leases in the ledger, `recorded` reads them instead.
    """
    pool = LeasePool(btu)
    events = sorted({*(s.at_s for s in plan), *(t for start, end, _ in held for t in (start, end) if t < span)})
    for when in events:
        busy = any(start <= when < end for start, end, _ in held)
        pool.need(when, max(cores_at(plan, when), 1 if busy else 0))
    pool.close(span)  # what is still held is billed for its started unit
    spans = [(lease.start, min(lease.end if lease.end is not None else span, span), 1) for lease in pool.leases]
    return steps(spans, span), pool.billed()


def recorded(leases: Iterable[Held], since: datetime, now: datetime, btu: float) -> tuple[list[CoreStep], float]:
    """The cores a lease controller recorded holding over [since, now] (`ledger.leases`) and
    their bill: each executor's started units of its life within the period.
    """
    span = (now - since).total_seconds()
    spans = [
        (max(0.0, (h.start - since).total_seconds()), min(span, ((h.end or now) - since).total_seconds()), h.cores)
        for h in leases
    ]
    kept = [(start, end, cores) for start, end, cores in spans if end > start]
    bill = math.fsum(cores * Lease(start, end).units(btu) * btu for start, end, cores in kept)
    return steps(kept, span), bill


def fixed_billed(plan: Capacity, leased: Sequence[CoreStep], btu: float, span: float) -> float | None:
    """The plan's peak held from the first lease to the chart's end, billed by `btu` (None: no
    peak count, or nothing leased).
    """
    first = next((s.at_s for s in leased if s.cores > 0), None)
    if plan.peak.cores is None or first is None:
        return None
    pool = LeasePool(btu)
    pool.need(first, plan.peak.cores)
    pool.close(span)
    return pool.billed()


def clock_ticks(since: datetime, span: float) -> list[float]:
    """Labels over [0, span] at round clock times (multiples of a round step since the epoch)."""
    step = tick_step(span)
    first = math.ceil(since.timestamp() / step) * step - since.timestamp()
    return [round(first + i * step, 6) for i in range(math.floor((span - first) / step + 1e-9) + 1)]


def core_ticks(top: int) -> list[int]:
    """Whole core counts from 0 up to `top` or just past it, at most MOST_CORE_TICKS + 1 of them."""
    step = max(1, math.ceil(top / MOST_CORE_TICKS))
    return list(range(0, top + step, step))


def _plan(plan: Capacity, queries: int, readable: Collection[str]) -> CapacityPlan:
    """The plan as shown; the DAG that needs the peak only if the user may read it (a final
    work's name is its DAG's id and a note after a space, which no DAG id has).
    """
    needer = plan.peak.needed_by
    dag = None if needer is None else needer.split(" ", 1)[0]
    return CapacityPlan(
        queries=queries,
        confidence=plan.confidence,
        open_cores=plan.open.cores,
        closed_cores=plan.closed.cores,
        needed_by=dag if dag in readable else None,
        speedup=plan.speedup.source,
    )
