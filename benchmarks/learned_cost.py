"""Learned cost models in live windows: each batch's predicted cost against its actual one.

Run (about 11 minutes with the defaults; timed, so under the lock):
    flock /tmp/iqp-heavy.lock uv run python benchmarks/learned_cost.py [--windows 6] [--query q1]

The real system end to end, driven as tests/integration drives live windows: a throwaway Airflow
home (SQLite metadata, our ledger on SQLite, Spark local[2] through spark-submit), one DAG
declared with `cost_model="learn"` and `rate="learn"` over a `FileStream`, and `airflow dags
test` per window. A producer thread lands Parquet files into a plain directory (copies of a
generated TPC-H lineitem, evenly spaced over every window), so each window's input arrives
live. At the default scale 2 (12M rows a window) the rows add ~9 s to a partial's ~16 s of
spark-submit start-up, so the 40 s deadline needs two batches of different sizes; at scale
0.5 a partial over 0.1M rows and one over 3M took the same ~20 s, every window was one batch
and the learned partial model flat.

Consecutive windows run one after the other: the next run starts as soon as the previous one
has merged (and refit its model), a little into its window, as a run that catches up would;
Airflow's scheduler would start it at the window's open, alongside the previous run's last
batch and merge, which on two cores would time Airflow's start-up into those jobs.

The first window has no model yet and runs the calibration plan (one file, then the rest, then
the merge), so it predicts nothing. Every later window is planned with the newest model in the
ledger: a batch's *predicted* cost is the `predicted_cost` its plan recorded (the model at the
planned number of files), its *actual* cost the seconds its spark-submit took. `model@rows` is
the same model at the rows the batch really read, which separates the model's error from the
plan's size error; the merge's prediction is that model's merge cost for the partials it merged.
Target (issue 22; issue 10 asked 20% from the fourth): from the third window on (two windows of
observations), each window's batch cost is predicted within 10% on a quiet machine. Missing
it is reported, not an error: the script fails only when a window fails.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import select

from airflow_iqp.constants import JobKind
from airflow_iqp.learning import LearnedCost
from airflow_iqp.ledger import session_scope
from airflow_iqp.ledger.models import CostModel, CostObservation, Query, Window
from airflow_iqp.tpch.generate import generate
from airflow_iqp.tpch.manifest import STREAM_DIR

if TYPE_CHECKING:
    from collections.abc import Sequence

BIN = Path(sys.executable).parent
ORIGIN = datetime(2000, 1, 1, tzinfo=UTC)
DAG_ID = "iqp_learned_cost"
LEAD = timedelta(seconds=30)  # the first run starts this long before its window opens
RUN_TIMEOUT = timedelta(minutes=5)  # beyond the window and its deadline: a run this late is stuck
TARGET = 0.10  # issue 22: each window's batch cost within 10% from the third window on
FIRST_TARGET_WINDOW = 3
DAG_FILE = """
from datetime import UTC, datetime, timedelta
from airflow_iqp import FileStream, intermittent_query

dag = intermittent_query(
    dag_id="{dag_id}",
    query="{query}",
    window=timedelta(seconds={window}),
    deadline=timedelta(seconds={deadline}),
    streams={{"lineitem": FileStream("{landing}")}},
    output="{results}/{{dag_id}}/{{window_start}}",
    rate="learn",
    cost_model="learn",
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    work_dir="{work}",
    retries=0,
)
"""


@dataclass(frozen=True)
class Airflow:
    """A throwaway Airflow home whose CLI runs as a user would run it (tests/integration/airflow_env.py)."""

    home: Path

    @property
    def ledger(self) -> str:
        return f"sqlite:///{self.home / 'iqp_ledger.db'}"

    def environ(self) -> dict[str, str]:
        return {
            **os.environ,
            "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "AIRFLOW_HOME": str(self.home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(self.home / "dags"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
            "AIRFLOW_CONN_IQP_SPARK": json.dumps({"conn_type": "spark", "host": "local[2]"}),
            "AIRFLOW_CONN_IQP_DEFAULT": json.dumps({"conn_type": "iqp", "host": self.ledger}),
            "SPARK_LOCAL_IP": os.environ.get("SPARK_LOCAL_IP", "127.0.0.1"),
        }

    def run(self, *args: str, log: Path, timeout: timedelta) -> int:
        """The CLI's exit code, its output in `log`; a run past `timeout` is killed and fails."""
        with log.open("w") as out:
            try:
                done = subprocess.run(
                    [str(BIN / "airflow"), *args],
                    env=self.environ(),
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    check=False,
                    timeout=timeout.total_seconds(),
                )
            except subprocess.TimeoutExpired:
                out.write(f"\n[benchmark] killed after {timeout}\n")
                return -1
        return done.returncode


class Producer(threading.Thread):
    """Lands a copy of every source file in each window, evenly spaced, each written under a
    dot-name and renamed (a reader never sees half a file).
    """

    def __init__(self, sources: Sequence[Path], landing: Path, starts: Sequence[datetime], window: timedelta) -> None:
        super().__init__(name="producer", daemon=True)
        self.sources, self.landing, self.starts, self.window = sources, landing, starts, window
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            gap = self.window.total_seconds() / len(self.sources)
            for k, start in enumerate(self.starts):
                for i, source in enumerate(self.sources):
                    sleep_until(start + timedelta(seconds=(i + 0.5) * gap))
                    target = self.landing / f"w{k:02d}-{i:04d}.parquet"
                    staged = target.with_name(f".{target.name}.tmp")
                    shutil.copyfile(source, staged)
                    os.replace(staged, target)
        except BaseException as error:  # reported by the main thread
            self.error = error


def sleep_until(at: datetime) -> None:
    time.sleep(max(0.0, (at - datetime.now(UTC)).total_seconds()))


def window_starts(count: int, window: timedelta, after: datetime) -> list[datetime]:
    """`count` consecutive window starts, from the first window that opens at or after `after`."""
    first = ORIGIN + -(-(after - ORIGIN) // window) * window
    return [first + k * window for k in range(count)]


@dataclass(frozen=True)
class Job:
    """One job of one window: a batch (size in rows) or the merge (size in partials)."""

    window: int
    plan: str
    job: str
    size: int
    predicted: float | None
    actual: float
    at_size: float | None  # the plan's model at the job's real size

    @property
    def is_merge(self) -> bool:
        return self.job == "merge"

    @property
    def error(self) -> float | None:
        return relative_error(self.predicted, self.actual)

    @property
    def model_error(self) -> float | None:
        return relative_error(self.at_size, self.actual)


@dataclass(frozen=True)
class WindowCost:
    """A window's batches together: their predicted and actual seconds, and their merge."""

    window: int
    plan: str
    batches: int
    predicted: float | None
    actual: float
    mean_batch_error: float | None  # mean |error| of the single batches
    merge_predicted: float | None
    merge_actual: float | None

    @property
    def error(self) -> float | None:
        return relative_error(self.predicted, self.actual)

    @property
    def merge_error(self) -> float | None:
        return None if self.merge_actual is None else relative_error(self.merge_predicted, self.merge_actual)


def relative_error(predicted: float | None, actual: float) -> float | None:
    """(predicted - actual) / actual: over 0 the model was pessimistic; None without a prediction."""
    return None if predicted is None or actual <= 0 else (predicted - actual) / actual


def window_costs(jobs: Sequence[Job]) -> list[WindowCost]:
    """Per window, its batches summed (a prediction only if every batch had one) and its merge."""
    found = []
    for number in sorted({j.window for j in jobs}):
        mine = [j for j in jobs if j.window == number]
        batches = [j for j in mine if not j.is_merge]
        merge = next((j for j in mine if j.is_merge), None)
        predicted = [j.predicted for j in batches if j.predicted is not None]
        errors = [abs(e) for j in batches if (e := j.error) is not None]
        found.append(
            WindowCost(
                window=number,
                plan=mine[0].plan,
                batches=len(batches),
                predicted=sum(predicted) if batches and len(predicted) == len(batches) else None,
                actual=sum(j.actual for j in batches),
                mean_batch_error=sum(errors) / len(errors) if errors else None,
                merge_predicted=None if merge is None else merge.predicted,
                merge_actual=None if merge is None else merge.actual,
            )
        )
    return found


def worst_error(windows: Sequence[WindowCost], first: int = FIRST_TARGET_WINDOW) -> float | None:
    """The largest |batch cost error| of the predicted windows from window `first` on."""
    errors = [abs(e) for w in windows if w.window >= first and (e := w.error) is not None]
    return max(errors) if errors else None


def read_ledger(ledger: str, runs: Sequence[tuple[datetime, datetime, datetime]]) -> list[Job]:
    """The jobs of each run (window start, run began, run ended), with the predictions of the
    model its plan used: the newest model fitted before the run began (runs never overlap).
    """
    jobs: list[Job] = []
    with session_scope(ledger) as session:
        query_id = session.scalar(select(Query.id).where(Query.dag_id == DAG_ID))
        models = session.execute(
            select(CostModel.fitted_at, CostModel.document)
            .where(CostModel.query_id == query_id)
            .order_by(CostModel.fitted_at)
        ).all()
        merges = session.execute(
            select(CostObservation.observed_at, CostObservation.size, CostObservation.seconds)
            .where(CostObservation.query_id == query_id, CostObservation.kind == JobKind.MERGE)
            .order_by(CostObservation.observed_at)
        ).all()
        for number, (start, began, ended) in enumerate(runs, 1):
            window = session.scalar(select(Window).where(Window.query_id == query_id, Window.window_start == start))
            if window is None:
                continue
            used = [m.document for m in models if m.fitted_at < began]
            model = LearnedCost.from_dict(used[-1]) if used else None
            plan = plan_kind(str(window.plan.get("how", "")))
            predicts = plan == "planned"  # the other plans (calibration, historical, no rate) cost nothing ahead
            for b in window.batches:
                if b.actual_cost is None:
                    continue
                rows = b.actual_tuples or 0
                jobs.append(
                    Job(
                        window=number,
                        plan=plan,
                        job=f"batch {b.batch_index}",
                        size=rows,
                        predicted=b.predicted_cost if predicts else None,
                        actual=b.actual_cost,
                        at_size=None if model is None else model.partial_seconds(rows),
                    )
                )
            merge = next((m for m in merges if began <= m.observed_at <= ended), None)
            if merge is not None:
                predicted = None if model is None else model.merge_seconds(merge.size)
                jobs.append(
                    Job(number, plan, "merge", merge.size, predicted if predicts else None, merge.seconds, predicted)
                )
    return jobs


def plan_kind(how: str) -> str:
    """The plan's kind from the `how` the plan task recorded ("planned at 0.3 files/s ...": planned)."""
    return "planned" if how.startswith("planned") else how.split(":")[0]


def percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:+.0f}%"


def seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def print_jobs(jobs: Sequence[Job]) -> None:
    print(
        f"{'window':>6}  {'plan':<11} {'job':<8} {'rows|parts':>10} {'predicted s':>11} {'actual s':>8} "
        f"{'error':>6} {'model@rows s':>12} {'error':>6}"
    )
    for j in jobs:
        print(
            f"{j.window:>6}  {j.plan:<11} {j.job:<8} {j.size:>10} {seconds(j.predicted):>11} {j.actual:>8.1f} "
            f"{percent(j.error):>6} {seconds(j.at_size):>12} {percent(j.model_error):>6}"
        )


def print_windows(windows: Sequence[WindowCost]) -> None:
    print(
        f"{'window':>6}  {'plan':<11} {'batches':>7} {'predicted s':>11} {'actual s':>8} {'error':>6} "
        f"{'mean |batch err|':>16} {'merge pred s':>12} {'merge s':>7} {'error':>6}"
    )
    for w in windows:
        mean = "-" if w.mean_batch_error is None else f"{100 * w.mean_batch_error:.0f}%"
        print(
            f"{w.window:>6}  {w.plan:<11} {w.batches:>7} {seconds(w.predicted):>11} {w.actual:>8.1f} "
            f"{percent(w.error):>6} {mean:>16} {seconds(w.merge_predicted):>12} {seconds(w.merge_actual):>7} "
            f"{percent(w.merge_error):>6}"
        )
    worst = worst_error(windows)
    if worst is not None:
        verdict = "met" if worst <= TARGET else "MISSED"
        print(
            f"\nfrom window {FIRST_TARGET_WINDOW} on, the worst window's batch cost error is {100 * worst:.0f}% "
            f"(target <= {100 * TARGET:.0f}%: {verdict})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--windows", type=int, default=6, help="windows to run (default 6)")
    parser.add_argument("--query", default="q1", help="a packaged TPC-H query over lineitem only (q1, q6)")
    parser.add_argument("--window", type=float, default=90, help="window length in seconds (default 90)")
    parser.add_argument("--deadline", type=float, default=40, help="seconds after the window end (default 40)")
    parser.add_argument("--files", type=int, default=30, help="files landing per window (default 30)")
    parser.add_argument("--scale", type=float, default=2.0, help="TPC-H scale of one window's files (default 2)")
    parser.add_argument("--keep", type=Path, help="work here and keep it (logs, ledger), instead of a temp dir")
    args = parser.parse_args()
    if args.window < args.deadline + 40:
        parser.error("--window must exceed --deadline by 40 s or more: a run must plan before its window ends")
    work = args.keep or Path(tempfile.mkdtemp(prefix="iqp-learned-cost-"))
    try:
        run(args, work.absolute())
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


def run(args: argparse.Namespace, work: Path) -> None:
    window, deadline = timedelta(seconds=args.window), timedelta(seconds=args.deadline)
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}, {os.cpu_count()} CPUs")
    generate(work / "tpch", args.scale, args.files)
    sources = sorted((work / "tpch" / STREAM_DIR / "lineitem").glob("*.parquet"))
    airflow = Airflow(work / "airflow")
    (airflow.home / "dags").mkdir(parents=True, exist_ok=True)
    landing = work / "landing" / "lineitem"
    landing.mkdir(parents=True)
    (airflow.home / "dags" / f"{DAG_ID}.py").write_text(
        DAG_FILE.format(
            dag_id=DAG_ID,
            query=args.query,
            window=args.window,
            deadline=args.deadline,
            landing=landing,
            results=work / "results",
            work=work / "jobs",
        )
    )
    if airflow.run("db", "migrate", log=work / "migrate.log", timeout=RUN_TIMEOUT) != 0:
        raise SystemExit(f"airflow db migrate failed: see {work / 'migrate.log'}")
    starts = window_starts(args.windows, window, datetime.now(UTC) + LEAD + timedelta(seconds=5))
    print(f"{args.windows} windows of {window}, deadline {deadline} after each, from {starts[0]:%H:%M:%S}", flush=True)
    producer = Producer(sources, landing, starts, window)
    producer.start()
    sleep_until(starts[0] - LEAD)
    runs = []
    for number, start in enumerate(starts, 1):
        log = work / f"window-{number}.log"
        began = datetime.now(UTC)
        code = airflow.run("dags", "test", DAG_ID, start.isoformat(), log=log, timeout=window + deadline + RUN_TIMEOUT)
        ended = datetime.now(UTC)
        runs.append((start, began, ended))
        ok = code == 0 and "state=success" in log.read_text()
        print(
            f"window {number} ({start:%H:%M:%S}): run {(began - start).total_seconds():+.0f} s .. "
            f"{(ended - start).total_seconds():+.0f} s from its start, {'ok' if ok else 'FAILED'}; "
            f"load average {os.getloadavg()[0]:.2f}",
            flush=True,
        )
        if not ok:
            print(log.read_text()[-4000:], file=sys.stderr)
            raise SystemExit(f"window {number} failed: see {log}")
        if producer.error is not None:
            raise SystemExit(f"the producer failed: {producer.error!r}")
    jobs = read_ledger(airflow.ledger, runs)
    print()
    print_jobs(jobs)
    print()
    print_windows(window_costs(jobs))
    print(f"\nload average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
