"""The monitor API's response models: what `/iqp/api/v1/` returns, field by field.

Times are ISO UTC; every `*_s` is seconds, and in a window's chart seconds from the window's
start, so the front end only scales and draws.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field

from airflow_iqp.constants import CostSource, JobKind, Mode, Policy, RequestState, WindowStatus


class Outcome(StrEnum):
    """Where a window stands against its deadline."""

    MET = "met"  # merged by the deadline
    MISSED = "missed"  # merged late, failed, or still open after its deadline
    AT_RISK = "at_risk"  # open, and predicted to finish after its deadline
    ON_TRACK = "on_track"  # open, and predicted to make it
    BACKFILL = "backfill"  # a backfill's window: its deadline had passed before it was planned


class WindowSummary(BaseModel):
    """One window's numbers: outcome, laxity and cost against one batch."""

    id: int
    dag_id: str
    run_id: str | None
    window_start: datetime
    window_end: datetime
    deadline: datetime
    status: WindowStatus
    outcome: Outcome
    deadline_met: bool | None
    predicted_finish: datetime | None = Field(
        description="while open, the forecast: the rest of its plan behind the resources' holders and the queue "
        "ahead, priced by the stored cost model with its 90% residual margin; once closed, the last forecast"
    )
    predicted_late_s: float | None = Field(description="predicted_finish - deadline: positive when at risk")
    actual_finish: datetime | None
    laxity_s: float | None = Field(
        description="deadline - finish once merged; while open, deadline - now - remaining work (eq. 9)"
    )
    remaining_s: float = Field(description="predicted seconds of work the window still needs, its merge included")
    cost_s: float | None = Field(description="seconds its jobs took: the batches done, plus the merge once merged")
    single_batch_cost_s: float | None = Field(
        description="one batch over the window's rows plus its merge, by the DAG's stored cost model: the one "
        "its plans use (declared file, calibration or refit)"
    )
    single_batch_low_s: float | None = Field(
        description="the 95% interval of single_batch_cost_s, from the model's residual spread"
    )
    single_batch_high_s: float | None = Field(description="see single_batch_low_s")
    cost_model: CostSource | None = Field(
        description="where that model came from: file, calibration (spread not yet known) or refit"
    )
    cost_ratio: float | None = Field(description="cost_s / single_batch_cost_s, once merged")
    batches: int
    unit: str = Field(description="what a batch's planned range counts: files or tuples")
    expected_tuples: int
    actual_tuples: int | None
    result: str | None
    incomplete: bool
    late_files: int


class Wait(BaseModel):
    """A job's request for the resource: how long it waited and held it."""

    request: int
    state: RequestState
    resource: int | None
    reason: str
    registered_s: float
    granted_s: float | None
    released_s: float | None
    waited_s: float = Field(description="until granted, or until now while waiting")


class Bar(BaseModel):
    """One row of a window's chart: a batch (or a slot still waiting for one) or the merge."""

    label: str
    kind: JobKind
    index: int | None
    slot: int | None
    status: str
    reason: str | None
    release_s: float | None
    latest_start_s: float | None
    planned_start_s: float | None
    planned_end_s: float | None
    actual_start_s: float | None
    actual_end_s: float | None
    predicted_cost_s: float | None
    actual_cost_s: float | None
    planned_size: int | None = Field(description="the planned range's size, in the window's unit")
    actual_tuples: int | None
    attempts: int
    files: dict[str, list[str]] = Field(description="the input files the batch froze, by stream")
    file_count: int
    waits: list[Wait]


class Axis(BaseModel):
    """The chart's time axis: from the window start to `span_s`, labelled at `ticks_s`."""

    span_s: float
    ticks_s: list[float]


class Marks(BaseModel):
    """Vertical lines of the chart, in seconds from the window start."""

    window_end_s: float
    deadline_s: float
    predicted_finish_s: float | None
    actual_finish_s: float | None
    now_s: float | None = Field(description="set while now falls on the axis")


class WindowDetail(BaseModel):
    """A window and its chart."""

    now: datetime
    window: WindowSummary
    plan: dict[str, Any]
    axis: Axis
    marks: Marks
    bars: list[Bar]


class QueryOverview(BaseModel):
    """A query (one DAG) and its recent windows."""

    dag_id: str
    query: str
    mode: Mode
    window_s: float | None
    deadline_s: float | None
    met: int
    missed: int
    at_risk: int
    open: int
    median_laxity_s: float | None = Field(description="over the listed windows that merged")
    median_cost_ratio: float | None
    windows: list[WindowSummary]


class QueriesResponse(BaseModel):
    """Every query the user may read."""

    now: datetime
    queries: list[QueryOverview]


class WindowsResponse(BaseModel):
    """A DAG's windows, newest first."""

    dag_id: str
    windows: list[WindowSummary]


class Holder(BaseModel):
    """The request holding a resource; a DAG the user may not read is redacted."""

    request: int
    redacted: bool
    dag_id: str | None
    kind: JobKind | None
    slot: int | None
    granted_at: datetime | None
    held_s: float | None


class ResourceView(BaseModel):
    """One unit of Spark capacity."""

    id: int
    fence: int
    lease_expires: datetime | None
    expired: bool
    holder: Holder | None


class QueueEntry(BaseModel):
    """A waiting request at its place in the policy's order; redacted for unreadable DAGs."""

    position: int
    request: int
    redacted: bool
    dag_id: str | None
    kind: JobKind | None
    slot: int | None
    reason: str | None
    deadline: datetime | None
    remaining_s: float | None
    laxity_s: float | None
    waited_s: float


class Ranked(BaseModel):
    """A request a grant chose from, with the policy's key (an epoch for EDF and RR)."""

    request: int
    redacted: bool
    dag_id: str | None
    key: float | None
    key_at: datetime | None = Field(
        description="the key as a time: under EDF the deadline, under RR the last service, and a backfill's "
        "request's under every policy the start of the window it backfills"
    )


class Grant(BaseModel):
    """A recent grant and what else was waiting when it was made."""

    request: int
    redacted: bool
    dag_id: str | None
    kind: JobKind | None
    slot: int | None
    resource: int | None
    state: RequestState
    registered_at: datetime
    granted_at: datetime
    released_at: datetime | None
    waited_s: float
    held_s: float | None
    others: list[Ranked]


class DispatcherView(BaseModel):
    """The dispatcher: resources and holders, the queue in policy order, recent grants."""

    now: datetime
    policy: Policy
    resources: list[ResourceView]
    queue: list[QueueEntry]
    grants: list[Grant]


class MissesView(BaseModel):
    """Deadline misses since `since`, and open windows at risk of one."""

    now: datetime
    since: datetime
    missed: list[WindowSummary]
    at_risk: list[WindowSummary]


class CoreStep(BaseModel):
    """From `at_s` (seconds after the chart's start) until the next step, or the chart's end, `cores` cores."""

    at_s: float
    cores: int


class CapacityPlan(BaseModel):
    """The capacity model (`planning.capacity`) over the queries that recorded their demand."""

    queries: int = Field(description="registered queries whose plan recorded a demand; the others are not planned")
    confidence: float = Field(description="the probability of meeting every deadline the cores are sized for")
    open_cores: int | None = Field(description="while the windows are open; None: no count the speedup covers")
    closed_cores: int | None = Field(description="from a window's close to its deadline, beside the next's early work")
    needed_by: str | None = Field(description="the DAG that needs the peak; None when the user may not read it")
    speedup: str = Field(description="where the per-core speedup comes from")


class CapacityView(BaseModel):
    """The cores over time beside the dispatcher: used by grants, planned, and leased by the BTU."""

    now: datetime
    since: datetime = Field(description="the chart's start; every at_s counts from here, the chart ends at now")
    span_s: float
    ticks_s: list[float]
    core_ticks: list[int]
    used: list[CoreStep] = Field(description="the cores the granted jobs held (all DAGs, counted, not named)")
    used_core_s: float
    grants: int = Field(description="grants that held cores in the period")
    default_grants: int = Field(description="of those, the ones that named no cores: drawn at default_cores")
    default_cores: int | None = Field(
        description="the Spark connection's cores extra, what a grant naming none runs on; None: not set (what "
        "the master gives, unknown here), drawn as 1"
    )
    plan: CapacityPlan | None = Field(description="None: no registered query has recorded its demand yet")
    planned: list[CoreStep]
    leased: list[CoreStep] = Field(
        description="the executors the server's lease controller recorded holding (`--cores plan`); without its "
        "records, what a BTU-aware controller following the plan would hold (at least one core while a job holds "
        "a grant)"
    )
    btu_s: float = Field(description="the billing time unit: a core is paid per started unit")
    btu_source: str
    billed_core_s: float | None = Field(description="started units x btu x cores of the leases, up to now")
    fixed_billed_core_s: float | None = Field(
        description="the plan's peak held instead, from the first lease to now, billed the same way"
    )
