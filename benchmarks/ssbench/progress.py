"""What a streaming query's progress events say: batches, busy time, rows dropped, when the result was whole.

Each event is `StreamingQueryProgress.json` parsed into a dict. A data batch is one that read rows;
the engine also runs no-data batches (to advance the watermark) that count in the CPU but not here.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence

Progress = dict[str, Any]


@dataclass(frozen=True)
class ProgressSummary:
    """The streaming side's own account of a run."""

    batches: int  # data batches
    all_batches: int  # data and no-data batches
    busy_s: float  # sum of triggerExecution of the data batches (the paper's busy time)
    input_rows: int
    dropped_by_watermark: int
    state_bytes: int  # largest memoryUsedBytes of all state operators in one batch
    ready_at: float | None  # epoch seconds when the batch that completed the input ended


def batch_end(progress: Progress) -> float:
    """Epoch seconds at which a batch ended: its start timestamp plus its triggerExecution."""
    start = datetime.fromisoformat(progress["timestamp"].replace("Z", "+00:00")).timestamp()
    return start + progress["durationMs"].get("triggerExecution", 0) / 1000


def summarize(events: Sequence[Progress], expected_rows: int) -> ProgressSummary:
    """Summary of one query's progress events; the result is ready once `expected_rows` were read."""
    ordered = sorted(events, key=lambda e: e["batchId"])
    data = [e for e in ordered if e["numInputRows"] > 0]
    ready_at = None
    seen = 0
    for event in data:
        seen += event["numInputRows"]
        if seen >= expected_rows:
            ready_at = batch_end(event)
            break
    operators = [e.get("stateOperators", []) for e in ordered]
    return ProgressSummary(
        batches=len(data),
        all_batches=len(ordered),
        busy_s=sum(e["durationMs"].get("triggerExecution", 0) for e in data) / 1000,
        input_rows=sum(e["numInputRows"] for e in data),
        dropped_by_watermark=sum(op.get("numRowsDroppedByWatermark", 0) for ops in operators for op in ops),
        state_bytes=max((sum(op.get("memoryUsedBytes", 0) for op in ops) for ops in operators), default=0),
        ready_at=ready_at,
    )
