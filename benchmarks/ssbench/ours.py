"""Ours on one window, without Airflow: when a batch runs and what it takes, then the merge.

Each policy decides as the Airflow side does (same planning core, same eligibility rules, same
one-second polling as the triggers) and runs its jobs through a `JobPath` (jobs.py):
- `one_batch`: when the window closes, one partial over all its files, then the merge (the
  normaliser);
- `static`: the plan `plan_files` makes at the declared rate, each batch run once its files
  have landed (as WindowInputTrigger waits), the last taking what is left;
- `dynamic`: MinBatch and the tau_max bound from `dynamic_batching` (no Airflow task to
  charge a batch for), a batch cut whenever `batch_reason` allows (MinBatch landed, the last
  file in, the window closed, slow input), as `slots.decide` does, with the last free slot
  taking the rest. One query holds the resource alone, so the dispatcher's ranking (LLF)
  never has a choice to make here.
What the loop leaves out is Airflow itself: its scheduler, triggerer and ledger transactions.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING

import pyarrow.parquet as pq

from airflow_iqp.constants import ExecutionPath, Mode
from airflow_iqp.declaration import (
    EXAMPLE_COST_MODELS,
    ArrivalRate,
    Declaration,
    declare,
    dynamic_batching,
    plan_files,
)
from airflow_iqp.dynamic import batch_reason, expected_time_of
from airflow_iqp.planning.cost_model_file import fitted_paths
from airflow_iqp.queries import load_query
from airflow_iqp.streams.spec import FileStream
from benchmarks.ssbench import producer
from benchmarks.ssbench.check import canonical_rows

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from pathlib import Path

    from benchmarks.ssbench.check import Row
    from benchmarks.ssbench.jobs import Batch, JobPath

POLL_S = 1.0  # the triggers' poll interval
ALPHA = 0.5  # the paper's dynamic setting
TAU_MAX_S = 30.0


@dataclass(frozen=True)
class Account:
    """Ours' final result for the window and what it took."""

    rows: list[Row]
    ready_at: float  # epoch seconds the merge committed
    busy_s: float  # sum of job wall times
    batches: int  # partials (the merge not counted)


@dataclass
class Window:
    """One window of ours: its files, its times, where its jobs write, how they run."""

    streams: tuple[str, ...]
    names: list[str]  # the window's file names in arrival order (the same in every stream)
    landing: Path
    start: float  # epoch seconds
    end: float
    workdir: Path
    path: JobPath
    busy_s: float = 0.0
    partials: list[Path] = field(default_factory=list)

    def landed(self) -> list[str]:
        """Names of the window's files that have landed in every stream."""
        present = [{p.name for p in producer.landed_files(self.landing, s)} for s in self.streams]
        return [n for n in self.names if all(n in names for names in present)]

    def batch(self, names: Sequence[str]) -> Batch:
        return {s: [self.landing / s / n for n in names] for s in self.streams}

    def run_partial(self, names: Sequence[str]) -> None:
        output = self.workdir / f"batch-{len(self.partials):04d}"
        began = time.monotonic()
        self.path.partial(self.batch(names), output)
        self.busy_s += time.monotonic() - began
        self.partials.append(output)

    def merge(self) -> Account:
        output = self.workdir / "result"
        began = time.monotonic()
        self.path.merge(self.partials, output)
        self.busy_s += time.monotonic() - began
        ready_at = time.time()
        table = pq.read_table(output)  # skips the `_`-marker; one file, so ORDER BY holds
        rows = canonical_rows(tuple(record.values()) for record in table.to_pylist())
        return Account(rows, ready_at, self.busy_s, len(self.partials))


def wait_poll() -> None:
    """Sleep to the next wall-clock multiple of the poll interval, as the triggers do."""
    time.sleep(POLL_S - time.time() % POLL_S)


def sleep_until(epoch: float) -> None:
    time.sleep(max(0.0, epoch - time.time()))


@dataclass(frozen=True)
class Setting:
    """What a policy knows before the window opens: the query as a DAG file would declare it."""

    query: str
    window_s: float
    deadline_s: float
    landing: Path
    rate: ArrivalRate  # the replay's: one file per slot, the stream's rows per file
    execution_path: ExecutionPath  # whose cost model plans (see `cost_path`)
    static: Mapping[str, Path] = field(default_factory=dict)  # static table -> its files

    @property
    def cost_path(self) -> ExecutionPath:
        """The packaged cost model's section that plans: the execution path's own, or in_process's
        (a warm Spark, as a Connect server is) for a model fitted without a section for the path.
        """
        fitted = fitted_paths(EXAMPLE_COST_MODELS / f"{self.query}.json")
        return self.execution_path if self.execution_path in fitted else ExecutionPath.IN_PROCESS

    def declaration(self, mode: Mode) -> Declaration:
        """The checked declaration; a static one whose deadline no plan can meet is refused here
        (InvalidDeclaration), as it would be when the DAG file is parsed.
        """
        landing = self.landing.absolute()
        dynamic = mode is Mode.DYNAMIC
        return declare(
            dag_id=f"ssbench_{self.query}",
            query=self.query,
            window=timedelta(seconds=self.window_s),
            deadline=timedelta(seconds=self.deadline_s),
            streams={s: FileStream(str(landing / s)) for s in load_query(self.query).streams},
            static={table: str(path.absolute()) for table, path in self.static.items()},
            output=str(landing.parent / "result" / "{window_start}"),
            rate=self.rate,
            cost_model=self.query,
            mode=mode,
            execution_path=self.cost_path,
            alpha=ALPHA if dynamic else None,
            tau_max=TAU_MAX_S if dynamic else None,
        )


Run = Callable[[Window], Account]


def one_batch(setting: Setting) -> Run:
    """When the window closes, one partial over all its files, then the merge (no plan needed)."""

    def run(window: Window) -> Account:
        sleep_until(window.end)
        while len(window.landed()) < len(window.names):
            wait_poll()
        window.run_partial(window.names)
        return window.merge()

    return run


def static(setting: Setting) -> Run:
    """The static plan's batches, each run once its files have landed; the last takes the rest."""
    declaration = setting.declaration(Mode.STATIC)
    batches = plan_files(declaration, setting.rate, declaration.fitted_model(setting.cost_path)).plan.batches

    def run(window: Window) -> Account:
        for index, planned in enumerate(batches):
            names = window.names[planned.first - 1 : None if index == len(batches) - 1 else planned.last]
            while not set(names) <= set(window.landed()):
                wait_poll()
            window.run_partial(names)
        return window.merge()

    return run


def dynamic(setting: Setting) -> Run:
    """A batch whenever one is eligible, at most tau_max's worth; the last free slot takes the rest."""
    declaration = setting.declaration(Mode.DYNAMIC)
    batching = dynamic_batching(
        declaration, setting.rate, declaration.fitted_model(setting.cost_path), task_seconds=0.0
    )

    def run(window: Window) -> Account:
        taken: list[str] = []
        while True:
            arrived = window.landed()
            waiting = [n for n in arrived if n not in taken]
            all_in = len(arrived) == len(window.names)
            if all_in and not waiting:
                return window.merge()
            if len(window.partials) >= batching.slots - 1:
                if all_in:
                    window.run_partial(waiting)
                    taken += waiting
                else:
                    wait_poll()
                continue
            size = batching.min_batch.size
            late_at = expected_time_of(len(taken) + size, len(window.names), window.start, window.end)
            now = time.time()
            reason = batch_reason(
                waiting=len(waiting),
                min_batch=size,
                all_in=all_in,
                window_closed=now >= window.end,
                input_late=now >= late_at,
            )
            if reason is None:
                wait_poll()
                continue
            cut = waiting[: batching.max_batch]
            window.run_partial(cut)
            taken += cut

    return run


POLICIES: Mapping[str, Callable[[Setting], Run]] = {"one-batch": one_batch, "static": static, "dynamic": dynamic}
