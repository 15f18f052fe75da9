from __future__ import annotations

from datetime import UTC, datetime

import pytest

from benchmarks.ssbench.progress import batch_end, summarize


def event(batch, rows, ms, at="2026-01-01T00:00:00.000Z", dropped=0, memory=0):
    return {
        "batchId": batch,
        "timestamp": at,
        "numInputRows": rows,
        "durationMs": {"triggerExecution": ms},
        "stateOperators": [{"numRowsDroppedByWatermark": dropped, "memoryUsedBytes": memory}],
    }


def test_batch_end_is_start_plus_trigger_execution():
    start = datetime(2026, 1, 1, tzinfo=UTC).timestamp()
    assert batch_end(event(0, 1, 1500)) == pytest.approx(start + 1.5)


def test_summary_counts_data_batches_and_finds_when_the_input_was_complete():
    events = [
        event(2, 30, 400, at="2026-01-01T00:00:02.000Z", memory=20),
        event(0, 50, 1000, at="2026-01-01T00:00:00.000Z", memory=10),
        event(1, 0, 5000, at="2026-01-01T00:00:01.000Z", dropped=3),
        event(3, 20, 100, at="2026-01-01T00:00:03.000Z"),
    ]
    summary = summarize(events, expected_rows=80)
    start = datetime(2026, 1, 1, tzinfo=UTC).timestamp()
    assert summary.batches == 3
    assert summary.busy_s == pytest.approx(1.5)
    assert summary.input_rows == 100
    assert summary.dropped_by_watermark == 3
    assert summary.state_bytes == 20
    assert summary.ready_at == pytest.approx(start + 2.4)


def test_no_ready_time_while_rows_are_missing():
    assert summarize([event(0, 10, 100)], expected_rows=11).ready_at is None
