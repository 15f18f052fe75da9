"""The live capacity run of issue 25: the three example DAGs through a real Airflow on a local
standalone cluster (tests/spark/cluster.py: a master and two one-core workers from the pyspark
wheel), elastic against fixed capacity.

    .venv/bin/python benchmarks/capacity_live.py [--path spark_connect] [--runs elastic,fixed] [--btu 60] [--out DIR]
    .venv/bin/python benchmarks/capacity_live.py --path spark_submit [--runs plan,2] [--speedup 1:1] ...
    .venv/bin/python benchmarks/capacity_live.py --out DIR --report    # the table of the runs DIR holds

Each run is the demo (`python -m airflow_iqp.demo`, one window, IQP_DEMO_ONCE) pointed at a
fresh cluster (IQP_DEMO_MASTER): it plans, replays the stream, runs and merges every window, and
checks each result against single-pass Spark SQL over the same files. Its log, ledger and the
cluster's logs stay under DIR/RUN, and the table is made from them, so runs made one at a time
(each under the machine's lock) are reported together.

- spark_connect (the production path): the demo's Connect server runs on the cluster. `elastic`:
  Spark's dynamic allocation of one-core executors between 0 and the capacity plan's peak
  (`iqp check dags --capacity`, at most the cluster's cores; IQP_DEMO_CORES, as `iqp
  connect-server start --cores` does), an executor released once idle for `--btu` seconds
  (`[iqp] billing_unit_seconds`), and `[iqp] cores = plan` so that each grant records the plan's
  cores; `elastic-N`: as `elastic`, between 0 and N executors; `fixed`: static allocation, every
  core of the cluster held by the server; `planned`: the server's own lease controller (`iqp
  connect-server start --cores plan`, `spark.lease_driver`) leases one-core executors as the
  ledger's capacity plan needs them, up to the cluster's cores, and releases each at the end
  of a paid `--btu` unit unless the plan needs it again.
- spark_submit: every job its own application, once per `[iqp] cores` setting (`plan`: each
  grant gets the plan's cores for the phase the windows are in, `runtime.capacity`; a number:
  that many for every job).

Per run:

- the executors, from the workers' records (`tests.spark.cluster.executors`: launched, finished, cores), and
  what a provider bills for them: each executor's core per started `--btu` unit of its life,
  both cut to the run's span (from the window's start to its last window's merge), so runs of
  different lengths bill only what their windows needed;
- the grants and their cores over time, from the ledger (`runtime.capacity.granted`): "grant
  core-s" is what the jobs held, and "lease of grants" what a BTU-aware controller following
  them would bill (`planning.elastic.LeasePool`: each core kept to the end of its paid unit
  unless a grant needs it again), the simulator's measure;
- on spark_submit, the cores each application's executors were launched with, matched to the
  grant it ran under ("as granted");
- on spark_connect, the executors against the plan: the plan's cores over time are the open
  phase's while a window is open, the closed phase's from a window's close until it finished,
  none otherwise (the phases `runtime.capacity.needed` follows); "plan met" is the share of the
  span with at least that many executor cores up, "over plan" the core-seconds up beyond it, and
  "released at" how far into its last paid unit each executor that ended within the span ended;
- `planned`: the executor leases its controller recorded in the ledger (`ledger.leases`), beside
  the workers' records of the same executors;
- the windows' deadlines met (ledger) and whether the demo found every result equal to
  single-pass Spark SQL.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from contextlib import closing
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from sqlalchemy import select

from airflow_iqp.constants import ExecutionPath
from airflow_iqp.ledger import leases, session_scope
from airflow_iqp.ledger.models import Query, Window
from airflow_iqp.planning.elastic import LeasePool
from airflow_iqp.runtime.capacity import Granted, granted, plan
from airflow_iqp.settings import DEFAULT_BILLING_UNIT, PLAN, DispatchSettings, speedup_points
from airflow_iqp.spark.connect_server import free_port
from tests.spark.cluster import Executor, executors, standalone_cluster

if TYPE_CHECKING:
    from collections.abc import Iterable

    from sqlalchemy.orm import Session

    from airflow_iqp.ledger.leases import Held

REPO = Path(__file__).resolve().parents[1]
WORKER_CORES = 1  # two workers: 2 cores in all, the machine's CPUs
CLUSTER_CORES = 2
RUN_TIMEOUT_S = 20 * 60
ELASTIC, FIXED, PLANNED = "elastic", "fixed", "planned"
# The speedup fitted by benchmarks/per_core.py for spark-submit, launch to exit (docs/simulation.md):
# no core count measured faster than one.
MEASURED = "1:1"
EQUAL = "every window merged and equals single-pass Spark SQL over the same files"
PEAK = re.compile(r"^peak: (\d+) cores?", re.MULTILINE)


@dataclass(frozen=True)
class WindowOutcome:
    """One example DAG's demo window: was its deadline met."""

    dag_id: str
    start: datetime
    close: datetime
    deadline: datetime
    finished: datetime | None
    met: bool | None


@dataclass(frozen=True)
class Run:
    """What one run did, as its directory records it."""

    name: str
    path: str
    seconds: float
    windows: list[WindowOutcome]
    grants: list[Granted]  # in the run's span: from the window's start to its last merge
    apps: list[list[int]]  # spark_submit: per grant, the cores of each application started under it
    executors: list[Executor]
    leases: list[Held]  # the executors the server's lease controller recorded in the ledger (planned only)
    bounds: tuple[int, int] | Literal["plan"] | None  # the elastic server's executors: (min, max), or as planned
    equal: bool
    plan: tuple[int | None, int | None] | None  # the plan's (open, closed) cores at the end of the run

    @property
    def start(self) -> datetime:
        """The demo window's start: where the run's span begins."""
        return min(w.start for w in self.windows)

    @property
    def end(self) -> datetime:
        """When the last window finished (or the last grant ended, if one did not)."""
        ends = [w.finished for w in self.windows if w.finished is not None]
        return max(ends) if ends else max(g.end or g.start for g in self.grants)

    @property
    def span(self) -> float:
        """The run's span in seconds."""
        return (self.end - self.start).total_seconds()

    def cores_of(self, grant: Granted) -> int:
        """A grant's cores; one that named none had the connection's default, every core."""
        return CLUSTER_CORES if grant.cores is None else grant.cores

    def held(self) -> list[tuple[datetime, datetime, int]]:
        """Each grant's (start, end, cores), cut at the run's end."""
        end = self.end
        return [(g.start, min(g.end or end, end), self.cores_of(g)) for g in self.grants if g.start < end]

    def used(self) -> float:
        """Core-seconds the grants held."""
        return math.fsum(cores * (end - start).total_seconds() for start, end, cores in self.held())

    def leased(self, btu: float) -> float:
        """Billed core-seconds when cores follow the grants, each kept to the end of its paid unit
        unless a grant needs it again (`LeasePool.need`).
        """
        held = self.held()
        if not held:
            return 0.0
        t0 = held[0][0]
        pool = LeasePool(btu)
        for t in sorted({s for s, _, _ in held} | {e for _, e, _ in held}):
            pool.need((t - t0).total_seconds(), sum(c for s, e, c in held if s <= t < e))
        pool.close((self.end - t0).total_seconds())
        return pool.billed()

    def as_granted(self) -> int:
        """spark_submit: grants whose one application's executors got exactly the grant's cores."""
        return sum(apps == [cores] for (_, _, cores), apps in zip(self.held(), self.apps))

    def lives(self) -> list[tuple[float, float, int]]:
        """Each executor's (start, end, cores) in seconds from the window's start, cut to the span."""
        out = []
        for e in self.executors:
            start = max(0.0, (e.launched - self.start).total_seconds())
            end = min(self.span, (e.finished - self.start).total_seconds() if e.finished else self.span)
            if end > start:
                out.append((start, end, e.cores))
        return out

    def executor_core_s(self) -> float:
        """Core-seconds the executors were up within the span."""
        return math.fsum(cores * (end - start) for start, end, cores in self.lives())

    def planned(self, at: float) -> int:
        """The plan's cores `at` seconds from the window's start (at most the cluster's): the closed
        phase's from a window's close until it finished, the open phase's while one is open, else none.
        """
        if self.plan is None:
            return 0
        opened, closed = (CLUSTER_CORES if cores is None else min(cores, CLUSTER_CORES) for cores in self.plan)
        phases = [
            tuple((t - self.start).total_seconds() for t in (w.start, w.close, w.finished or self.end))
            for w in self.windows
        ]
        if any(close <= at < finished for _, close, finished in phases):
            return closed
        return opened if any(start <= at < close for start, close, _ in phases) else 0

    def against_plan(self) -> tuple[float, float]:
        """The share of the span's seconds with at least the plan's cores up, and the core-seconds up beyond it."""
        seconds = range(math.ceil(self.span))
        up = [sum(c for s, e, c in self.lives() if s <= t < e) for t in seconds]
        met = sum(cores >= self.planned(t) for t, cores in zip(seconds, up))
        return met / max(1, len(up)), float(sum(max(0, cores - self.planned(t)) for t, cores in zip(seconds, up)))

    def released_at(self, btu: float) -> list[float]:
        """How many seconds into its last paid unit each executor that ended within the span ended."""
        lives = [
            (e.finished - e.launched).total_seconds() for e in self.executors if e.finished and e.finished < self.end
        ]
        return [life - btu * max(0, math.ceil(life / btu) - 1) for life in lives]

    def most_at_once(self) -> int:
        """The most executor cores up at one time within the span."""
        lives = self.lives()
        return max((sum(c for s, e, c in lives if s <= t < e) for t, _, _ in lives), default=0)


def elastic(run: Run) -> bool:
    """Whether the run's capacity followed the jobs (elastic on Connect, the plan on spark-submit)."""
    return run.bounds is not None or run.name == PLAN


def billed(lives: Iterable[tuple[float, float, int]], btu: float) -> float:
    """What a provider bills for these (start, end, cores) lives: every started unit of each, per core."""
    return math.fsum(cores * max(1, math.ceil((end - start) / btu - 1e-9)) * btu for start, end, cores in lives)


def peak_cores() -> tuple[int, list[str]]:
    """The capacity plan's peak for the example DAGs on Connect (`iqp check dags --capacity`), at
    most the cluster's cores (all of them when no count meets every deadline), and the check's lines.
    """
    check = subprocess.run(
        [str(Path(sys.executable).with_name("iqp")), "check", str(REPO / "dags"), "--capacity"],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    lines = check.stdout.splitlines()
    found = PEAK.search(check.stdout)
    return (CLUSTER_CORES if found is None else min(int(found[1]), CLUSTER_CORES)), lines


def measure(
    path: ExecutionPath,
    name: str,
    out: Path,
    btu: float,
    bounds: tuple[int, int] | Literal["plan"] | None,
    speedup: str,
) -> None:
    """The demo on a fresh cluster; its log, ledger and the cluster's logs are kept under `out`."""
    out.mkdir(parents=True, exist_ok=True)
    demo_dir = out / "demo"
    started = time.monotonic()
    with standalone_cluster(out / "spark", worker_cores=WORKER_CORES) as cluster:
        settings = {"CORES": name if path is ExecutionPath.SPARK_SUBMIT else (PLAN if bounds else str(CLUSTER_CORES))}
        settings |= {"MAX_CORES": str(CLUSTER_CORES), "BILLING_UNIT_SECONDS": f"{btu:g}"}
        if speedup != "default":
            settings["SPEEDUP"] = speedup
        env = {
            **os.environ,
            "IQP_DEMO_DIR": str(demo_dir),
            "IQP_DEMO_PATH": path.value,
            "IQP_DEMO_MASTER": cluster.url,
            "IQP_DEMO_ONCE": "1",
            "IQP_DEMO_PORT": str(free_port()),
            "SPARK_LOCAL_IP": "127.0.0.1",  # the Connect server's driver, which the executors call back
            **{f"AIRFLOW__IQP__{option}": value for option, value in settings.items()},
        }
        env.pop("IQP_DEMO_CORES", None)
        if bounds is not None:
            env["IQP_DEMO_CORES"] = PLAN if bounds == PLAN else f"{bounds[0]},{bounds[1]}"
        with (out / "demo.log").open("w") as log:
            demo = subprocess.run(
                [sys.executable, "-m", "airflow_iqp.demo"],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                timeout=RUN_TIMEOUT_S,
                check=False,
            )
        state = cluster.state()
        apps = [
            (float(app["starttime"]) / 1000, cluster.executor_cores(str(app["id"])))
            for app in [*state["completedapps"], *state["activeapps"]]
        ]
        stopped = datetime.now(UTC)
    seconds = time.monotonic() - started
    keep_ledger(demo_dir / "iqp_ledger.db", out / "ledger.db")
    (out / "run.json").write_text(
        json.dumps(
            {
                "name": name,
                "path": path.value,
                "seconds": seconds,
                "exit": demo.returncode,
                "bounds": bounds,
                "speedup": speedup,
                "apps": apps,
                "stopped": stopped.isoformat(),
            },
            indent=1,
        )
    )
    print(f"  {name}: the demo exited {demo.returncode} after {seconds:.0f} s ({out / 'demo.log'})", flush=True)


def keep_ledger(ledger: Path, kept: Path) -> None:
    """A copy of the demo's SQLite ledger with what its write-ahead log holds (a file copy misses it)."""
    with closing(sqlite3.connect(ledger)) as source, closing(sqlite3.connect(kept)) as copy:
        source.backup(copy)


def load(out: Path) -> Run:
    """A measured run from its directory."""
    meta = json.loads((out / "run.json").read_text())
    stopped = datetime.fromisoformat(meta["stopped"])
    speedup = (
        None if meta["speedup"] == "default" else DispatchSettings(speedup=speedup_points(meta["speedup"])).speedup
    )
    with session_scope(f"sqlite:///{out / 'ledger.db'}", read_only=True) as session:
        windows = _windows(session)
        grants = granted(session, min(w.start for w in windows), stopped)
        recorded = leases.held(session, datetime.min.replace(tzinfo=UTC), stopped)
        planned = plan(session, DispatchSettings(cores="plan", max_cores=CLUSTER_CORES, speedup=speedup))
    lives = [e for log in sorted((out / "spark").glob("worker-*.log")) for e in executors(log)]
    apps = [(float(t), int(c)) for t, c in meta["apps"]] if meta["path"] == ExecutionPath.SPARK_SUBMIT else []
    return Run(
        name=meta["name"],
        path=meta["path"],
        seconds=meta["seconds"],
        windows=windows,
        grants=grants,
        apps=[
            [c for t, c in apps if g.start.timestamp() <= t < (g.end.timestamp() if g.end else math.inf)]
            for g in grants
        ],
        executors=lives,
        leases=recorded,
        bounds=PLAN if meta["bounds"] == PLAN else None if meta["bounds"] is None else tuple(meta["bounds"]),
        equal=EQUAL in (out / "demo.log").read_text(),
        plan=None if planned is None else (planned.open.cores, planned.closed.cores),
    )


def _windows(session: Session) -> list[WindowOutcome]:
    """The demo's window of each example DAG: the first window of the ledger."""
    rows = session.execute(
        select(
            Query.dag_id,
            Window.window_start,
            Window.window_end,
            Window.deadline,
            Window.actual_finish,
            Window.deadline_met,
        )
        .select_from(Window)
        .join(Window.query)
    ).all()
    first = min(row[1] for row in rows)
    return sorted((WindowOutcome(*row) for row in rows if row[1] == first), key=lambda w: w.dag_id)


def report(runs: list[Run], btu: float) -> list[str]:
    """The table, each run's executors and grants over time, and elastic's saving against fixed."""
    header = (
        f"{'run':>9}  {'span s':>6} {'executors':>9} {'most':>4} {'executor core-s':>15} {'billed':>6}  "
        f"{'grants (cores x n)':<18} {'grant core-s':>12} {'lease of grants':>15}  {'deadlines met':<13}  "
        f"{'results':<11} {'run s':>5}  {'plan met':>8} {'over plan':>9}  released at (s into the unit)"
    )
    lines = [f"BTU {btu:g} s; times in seconds from the window's start", header]
    for r in runs:
        by_cores = ", ".join(f"{c}x{n}" for c, n in sorted(Counter(c for _, _, c in r.held()).items()))
        met = sum(w.met is True for w in r.windows)
        share, over = r.against_plan()
        ended = ", ".join(f"{at:.0f}" for at in sorted(r.released_at(btu))) or "-"
        lines.append(
            f"{r.name:>9}  {r.span:>6.0f} {len(r.lives()):>9} {r.most_at_once():>4} {r.executor_core_s():>15.0f} "
            f"{billed(r.lives(), btu):>6.0f}  {by_cores:<18} {r.used():>12.0f} {r.leased(btu):>15.0f}  "
            f"{f'{met}/{len(r.windows)}':<13}  {'equal' if r.equal else 'NOT CHECKED':<11} {r.seconds:>5.0f}  "
            f"{share:>8.0%} {over:>9.0f}  {ended}"
        )
    for r in runs:
        lines += timeline(r)
    fixed = next((r for r in runs if not elastic(r)), None)
    hold = 0.0 if fixed is None else billed(fixed.lives(), btu)
    for r in runs:
        lease = billed(r.lives(), btu)
        if fixed is not None and elastic(r) and hold:
            lines.append(
                f"executors billed by the BTU ({btu:g} s): {r.name} {lease:.0f} core-s against {hold:.0f} core-s "
                f"for {fixed.name}: {1 - lease / hold:.0%} less"
            )
    return lines


def timeline(r: Run) -> list[str]:
    """One run's windows, executors and grants over time."""
    if r.bounds == PLAN:
        bounds = ", executors leased as planned by the server's controller"
    else:
        bounds = "" if r.bounds is None else f", executors {r.bounds[0]}-{r.bounds[1]} by dynamic allocation"
    plan_cores = "" if r.plan is None else f"; plan: {r.plan[0]} cores while open, {r.plan[1]} once closed"
    lines = [f"{r.name} ({r.path}{bounds}{plan_cores}):"]
    for w in r.windows:
        finished = "not finished" if w.finished is None else f"finished +{(w.finished - r.start).total_seconds():.1f}"
        lines.append(
            f"  {w.dag_id:<8} closes +{(w.close - r.start).total_seconds():.0f}, due "
            f"+{(w.deadline - r.start).total_seconds():.0f}, {finished}: {'met' if w.met else 'MISSED'}"
        )
    for h in r.leases:
        end = "held at the end" if h.end is None else f"{(h.end - r.start).total_seconds():+7.0f}"
        lines.append(f"  ledger: executor lease {(h.start - r.start).total_seconds():+7.0f} to {end}")
    for e in sorted(r.executors, key=lambda e: e.launched):
        start = (e.launched - r.start).total_seconds()
        end = "still up" if e.finished is None else f"{(e.finished - r.start).total_seconds():+7.0f}"
        lines.append(f"  executor {e.app}/{e.executor_id} on {e.worker}, {e.cores} core(s): {start:+7.0f} to {end}")
    for g, apps in zip(r.grants, r.apps or [[] for _ in r.grants]):
        if g.start >= r.end:
            continue
        held = "held" if g.end is None else f"{(g.end - g.start).total_seconds():5.1f} s"
        t = (g.start - r.start).total_seconds()
        up = sum(c for s, e, c in r.lives() if s <= t < e)
        detail = f"applications' cores {apps}" if r.path == ExecutionPath.SPARK_SUBMIT else f"executor cores up {up}"
        lines.append(f"  grant {t:+7.1f}  {g.query:<8} {g.kind:<8} {g.cores} core(s) {held}  {detail}")
    if r.path == ExecutionPath.SPARK_SUBMIT:
        lines.append(f"  applications as granted: {r.as_granted()}/{len(r.held())}")
    return lines


def main() -> int:
    """Run each setting in turn (or none, with --report) and print the table of every run in --out."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--path", type=ExecutionPath, default=ExecutionPath.SPARK_CONNECT, help="the demo's jobs' path")
    parser.add_argument(
        "--runs",
        help=f"spark_connect: {ELASTIC} (0 to the plan's peak executors), {ELASTIC}-N (0 to N), {FIXED}, "
        f"{PLANNED} (leased as the plan says); "
        "spark_submit: [iqp] cores each, plan,2",
    )
    parser.add_argument(
        "--speedup",
        help=f"the plan's speedup as cores:speedup points (default: {MEASURED} on spark_submit as measured; "
        "the capacity model's labelled default on spark_connect)",
    )
    parser.add_argument(
        "--btu",
        type=float,
        default=DEFAULT_BILLING_UNIT,
        help=f"billing time unit, seconds: the runs' [iqp] billing_unit_seconds (default {DEFAULT_BILLING_UNIT:g})",
    )
    parser.add_argument("--out", type=Path, help="where runs keep their logs and ledgers (default: a temporary dir)")
    parser.add_argument("--report", action="store_true", help="run nothing: report the runs --out holds")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="iqp-capacity-live-"))
    started = time.monotonic()
    connect = args.path is ExecutionPath.SPARK_CONNECT
    names = (
        [] if args.report else (args.runs or (f"{ELASTIC},{FIXED}" if connect else f"plan,{CLUSTER_CORES}")).split(",")
    )
    speedup = args.speedup or ("default" if connect else MEASURED)
    if names:
        print(
            f"the three example DAGs on {args.path.value}, a standalone cluster of 2 workers x {WORKER_CORES} core "
            f"({os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}); BTU {args.btu:g} s; logs and ledgers in {out}",
            flush=True,
        )
    peak = None
    for name in names:
        bounds: tuple[int, int] | Literal["plan"] | None = None
        if connect and name == PLANNED:
            bounds = PLAN
        elif connect and name.startswith(f"{ELASTIC}-"):  # elastic-N: at most N executors, whatever the plan says
            bounds = (0, int(name.removeprefix(f"{ELASTIC}-")))
        elif connect and name == ELASTIC:
            if peak is None:
                peak, check = peak_cores()
                print(
                    "\n".join(
                        f"  {line}" for line in check if line.startswith(("capacity", "  while", "  once", "peak"))
                    )
                )
            bounds = (0, peak)
        measure(args.path, name, out / name, args.btu, bounds, speedup)
    runs = [load(d) for d in sorted(out.iterdir()) if (d / "run.json").is_file()]
    runs.sort(key=lambda r: not elastic(r))
    print("\n".join(report(runs, args.btu)))
    print(f"({time.monotonic() - started:.0f} s)")
    return 0 if all(r.equal and all(w.met for w in r.windows) for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
