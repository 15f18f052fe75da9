"""What one system's run on the Tier M window found: CPU by part, memory, and each query's result."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

# The parts of a run's CPU that are Airflow's own (the rest is Spark's, or the ledger's database).
AIRFLOW_PARTS = ("scheduler", "tasks", "triggerer", "dag-processor", "api-server", "metadata-db")


@dataclass(frozen=True)
class QueryResult:
    """One query's final result: when it was ready, what its jobs took, whether it is exact."""

    ready_after_close: float | None  # seconds after the window's end; None if it never came
    busy_s: float | None  # streaming: its micro-batches' time; ours: its partials'; one-shot: its job's
    exact: bool
    note: str = ""
    batches: int = 1


@dataclass(frozen=True)
class SystemRun:
    """One system on the window: CPU-seconds by part over the span, peak memory, per query."""

    config: str
    cpu: dict[str, float]  # part -> CPU-seconds over the span
    peak_rss: int  # bytes: the largest sum of the processes' own peaks at one instant
    span_s: float
    queries: dict[str, QueryResult]
    window_end: float  # epoch seconds
    task_instances: int = 0
    task_attempts: int = 0
    refused: dict[str, str] = field(default_factory=dict)  # query -> why it could not run

    @property
    def total(self) -> float:
        return sum(self.cpu.values())

    @property
    def airflow(self) -> float:
        return sum(v for k, v in self.cpu.items() if k in AIRFLOW_PARTS)

    def met(self, query: str, deadline_s: float) -> bool | None:
        """Whether the query's exact result was ready by `deadline_s` after the window's end."""
        result = self.queries.get(query)
        if result is None or result.ready_after_close is None or not result.exact:
            return None if query in self.refused else False
        return result.ready_after_close <= deadline_s


def load_runs(path: Path) -> list[SystemRun]:
    """The system runs recorded in `path` (runs.jsonl), none if it is not there yet."""
    if not path.exists():
        return []
    runs = []
    for line in path.read_text().splitlines():
        data = json.loads(line)
        data["queries"] = {q: QueryResult(**r) for q, r in data["queries"].items()}
        runs.append(SystemRun(**data))
    return runs


def record_run(run: SystemRun, path: Path) -> None:
    """Append one system's run to `path` as soon as it ends, so a long benchmark that stops keeps it."""
    with path.open("a") as sink:
        sink.write(json.dumps(asdict(run)) + "\n")
