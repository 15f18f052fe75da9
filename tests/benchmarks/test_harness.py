from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import pytest

from benchmarks.ssbench import harness
from benchmarks.ssbench.measure import Selector
from benchmarks.ssbench.systems import Outcome, RunSpec, Sides, SystemRefused


@dataclass
class FakeSystem:
    """Answers with fixed rows when the window closes; its Spark side is this test process."""

    rows: list
    dropped: int = 0
    refuse: bool = False
    config: str = "fake"
    calls: list = field(default_factory=list)

    def start(self, run):
        self.calls.append("start")
        if self.refuse:
            raise SystemRefused("no streaming form")
        return Sides(spark=Selector(pids=frozenset({os.getpid()})))

    def finish(self, window):
        self.calls.append("finish")
        time.sleep(max(0.0, window.end - time.time()))
        return Outcome(rows=self.rows, ready_at=time.time(), busy_s=0.1, batches=1, dropped_by_watermark=self.dropped)

    def close(self):
        self.calls.append("close")


@pytest.fixture
def spec(tmp_path, monkeypatch):
    monkeypatch.setattr(harness.producer, "replay_stream", lambda source, landing, speedup: 2)
    monkeypatch.setattr(harness, "settle", lambda selector: 0.0)
    return RunSpec(
        query="q6",
        source=tmp_path / "source",
        landing=tmp_path / "landing",
        workdir=tmp_path / "work",
        files=2,
        seconds_per_file=0.05,
        deadline_s=5.0,
    )


def test_a_correct_run_is_ok_and_measured(spec):
    system = FakeSystem(rows=[(1.0,)])
    row = harness.run_once(system, spec, speedup=20.0, truth=[(1.0,)], ordered=False, repeat=0)
    assert row.status == "ok"
    assert row.result_ok
    assert row.deadline_met
    assert row.cpu_s is not None
    assert row.cpu_s >= 0
    assert row.peak_rss is not None
    assert row.peak_rss > 0
    assert row.ready_after_close_s is not None
    assert row.ready_after_close_s >= 0
    assert system.calls == ["start", "finish", "close"]


def test_a_wrong_result_or_dropped_rows_make_the_run_invalid(spec):
    wrong = harness.run_once(FakeSystem(rows=[(2.0,)]), spec, 20.0, [(1.0,)], False, 0)
    dropped = harness.run_once(FakeSystem(rows=[(1.0,)], dropped=4), spec, 20.0, [(1.0,)], False, 0)
    assert wrong.status == "invalid"
    assert wrong.result_ok is False
    assert dropped.status == "invalid"
    assert dropped.result_ok is True
    assert "watermark" in (dropped.error or "")


def test_a_refused_configuration_becomes_a_row(spec):
    system = FakeSystem(rows=[], refuse=True)
    row = harness.run_once(system, spec, 20.0, [(1.0,)], False, 0)
    assert row.status == "refused"
    assert row.error == "no streaming form"
    assert row.cpu_s is None
    assert system.calls == ["start", "close"]
