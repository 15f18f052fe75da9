from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_iqp.constants import ExecutionPath
from airflow_iqp.declaration import ArrivalRate
from airflow_iqp.exceptions import InvalidDeclaration
from airflow_iqp.runtime.sizing import dynamic_batching, plan_files
from benchmarks.ssbench import ours
from benchmarks.ssbench.ours import Setting, Window

if TYPE_CHECKING:
    from pathlib import Path

FILES = 40
NAMES = [f"part-{i:05d}.parquet" for i in range(FILES)]


@dataclass
class FakePath:
    """Records the batches it is given; its merge writes one row: the number of files merged."""

    warm_spark: bool = False
    spark_pids: frozenset = frozenset()
    batches: list[list[str]] = field(default_factory=list)
    merged: list[Path] = field(default_factory=list)

    def partial(self, batch, output):
        names = [p.name for p in batch["lineitem"]]
        self.batches.append(names)

    def merge(self, partials, output):
        self.merged = list(partials)
        output.mkdir(parents=True)
        files = sum(len(b) for b in self.batches)
        pq.write_table(pa.table({"files": [files]}), output / "part-0.parquet")
        (output / "_IQP_COMMITTED").write_text("{}")


class Clock:
    """Fake time: each poll lands the next file (one per second, window = FILES seconds)."""

    def __init__(self, landing: Path, start: float) -> None:
        self.now = start
        self.landing = landing
        self.landed = 0

    def time(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += max(seconds, 0.0)

    def poll(self) -> None:
        self.now += ours.POLL_S
        self.land_until(self.now)

    def land_until(self, now: float) -> None:
        while self.landed < FILES and self.landed <= now - 1000.0:
            for stream in ("lineitem", "orders"):
                (self.landing / stream).mkdir(parents=True, exist_ok=True)
                (self.landing / stream / NAMES[self.landed]).write_bytes(b"")
            self.landed += 1


@pytest.fixture
def clock(tmp_path, monkeypatch):
    clock = Clock(tmp_path / "landing", 1000.0)
    monkeypatch.setattr(ours, "time", clock)
    monkeypatch.setattr(ours, "wait_poll", clock.poll)
    return clock


def setting(tmp_path, path=ExecutionPath.IN_PROCESS, deadline_s=30.0):
    return Setting(
        query="q6",
        window_s=float(FILES),
        deadline_s=deadline_s,
        landing=tmp_path / "landing",
        rate=ArrivalRate(1.0, 2000.0),
        execution_path=path,
    )


def window(tmp_path, job_path):
    return Window(("lineitem",), NAMES, tmp_path / "landing", 1000.0, 1000.0 + FILES, tmp_path / "work", job_path)


def test_one_batch_runs_once_every_file_is_in_after_the_window(tmp_path, clock):
    path = FakePath()
    account = ours.one_batch(setting(tmp_path))(window(tmp_path, path))
    assert path.batches == [NAMES]
    assert account.batches == 1
    assert account.rows == [(float(FILES),)]
    assert account.ready_at >= 1000.0 + FILES


def test_dynamic_cuts_batches_between_min_batch_and_tau_max_and_takes_every_file_once(tmp_path, clock):
    given = setting(tmp_path)
    declared = given.declaration(ours.Mode.DYNAMIC)
    batching = dynamic_batching(declared, given.rate, declared.fitted_model(given.cost_path), task_seconds=0.0)
    path = FakePath()
    account = ours.dynamic(given)(window(tmp_path, path))
    assert [n for b in path.batches for n in b] == NAMES
    assert len(path.batches) > 1  # warm partials are cheap: batching within alpha pays off
    assert all(batching.min_batch.size <= len(b) <= batching.max_batch for b in path.batches[:-1])
    assert account.batches == len(path.batches) == len(path.merged)
    assert account.rows == [(float(FILES),)]


def test_dynamic_does_not_run_ahead_of_the_files(tmp_path, clock):
    path = FakePath()
    ours.dynamic(setting(tmp_path))(window(tmp_path, path))
    first = path.batches[0]
    # Cut at a poll, so only files landed by then: the first batch ends before the window does.
    assert NAMES.index(first[-1]) < FILES - 1


def test_static_runs_the_planned_batches(tmp_path, clock):
    given = setting(tmp_path)
    declared = given.declaration(ours.Mode.STATIC)
    planned = plan_files(declared, given.rate, declared.fitted_model(given.cost_path)).plan.batches
    path = FakePath()
    ours.static(given)(window(tmp_path, path))
    assert [len(b) for b in path.batches] == [b.size for b in planned]
    assert [n for b in path.batches for n in b] == NAMES


def test_a_static_plan_that_cannot_meet_its_deadline_is_refused(tmp_path):
    with pytest.raises(InvalidDeclaration, match="earliest feasible deadline"):
        ours.static(setting(tmp_path, ExecutionPath.SPARK_SUBMIT, deadline_s=1.0))


def test_plans_use_the_paths_own_cost_model_or_in_process_where_the_packaged_model_has_none(tmp_path):
    # q6's packaged model has a spark_connect section; q3's was fitted for in_process and spark_submit only.
    assert setting(tmp_path, ExecutionPath.SPARK_CONNECT).cost_path is ExecutionPath.SPARK_CONNECT
    static = {"customer": tmp_path / "static" / "customer"}
    q3 = dataclasses.replace(setting(tmp_path, ExecutionPath.SPARK_CONNECT), query="q3", static=static)
    assert q3.cost_path is ExecutionPath.IN_PROCESS
    assert q3.declaration(ours.Mode.DYNAMIC).fitted_model(q3.cost_path).path is ExecutionPath.IN_PROCESS
