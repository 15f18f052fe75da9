"""The live capacity run of issue 25: the three example DAGs through a real Airflow, their jobs
by spark-submit on a local standalone cluster (tests/spark/cluster.py: a master and two
one-core workers from the pyspark wheel), once per `[iqp] cores` setting: `plan` (each grant
gets the capacity plan's cores for the phase the windows are in, `runtime.capacity`) and a
fixed count (the cluster's peak).

    .venv/bin/python benchmarks/capacity_live.py [--cores plan,2] [--btu 60] [--out DIR]

Each run is the demo (`python -m airflow_iqp.demo`, one window, IQP_DEMO_ONCE) pointed at a
fresh cluster: it plans, replays the stream, runs and merges every window, and checks each
result against single-pass Spark SQL over the same files. Then, per run:

- the grants and their cores over time, from the ledger (`runtime.capacity.granted`);
- the cores each application's executors were launched with, from the workers' records of the
  master's applications (`Cluster.executor_cores`), matched to the grant it ran under by its
  start time: "as granted" counts the applications that got exactly their grant's cores;
- billed core-seconds by the BTU (`planning.elastic.LeasePool`): "leased" follows the grants,
  each core kept to the end of its paid unit unless a grant needs it again; "fixed" holds the
  run's most granted cores from its first grant to its last release, as fixed provisioning does;
- the windows' deadlines met (ledger) and whether the demo found every result equal to
  single-pass Spark SQL.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import select

from airflow_iqp.ledger import session_scope
from airflow_iqp.ledger.models import Query, Window
from airflow_iqp.planning.elastic import LeasePool
from airflow_iqp.runtime.capacity import Granted, granted, plan
from airflow_iqp.settings import DispatchSettings, speedup_points
from airflow_iqp.spark.connect_server import free_port
from tests.spark.cluster import standalone_cluster

WORKER_CORES = 1  # two workers: 2 cores in all, the machine's CPUs
CLUSTER_CORES = 2
RUN_TIMEOUT_S = 20 * 60
if TYPE_CHECKING:
    from sqlalchemy.orm import Session

# The speedup fitted by benchmarks/per_core.py for spark-submit, launch to exit (docs/simulation.md):
# no core count measured faster than one.
MEASURED = "1:1"
EQUAL = "every window merged and equals single-pass Spark SQL over the same files"


@dataclass(frozen=True)
class WindowOutcome:
    """One example DAG's demo window: was its deadline met."""

    dag_id: str
    start: datetime
    finished: datetime | None
    met: bool | None


@dataclass(frozen=True)
class Run:
    """What one setting's run did."""

    cores: str
    seconds: float
    windows: list[WindowOutcome]
    grants: list[Granted]  # in the run's span: from the window's start to its last merge
    apps: list[list[int]]  # per grant, the cores of each application started under it
    equal: bool
    plan: tuple[int | None, int | None] | None  # the plan's (open, closed) cores at the end of the run

    @property
    def end(self) -> datetime:
        """When the last window finished (or the last grant ended, if one did not)."""
        ends = [w.finished for w in self.windows if w.finished is not None]
        return max(ends) if ends else max(g.end or g.start for g in self.grants)

    def held(self) -> list[tuple[datetime, datetime, int]]:
        """Each grant's (start, end, cores), cut at the run's end; the connection's default is every core."""
        end = self.end
        return [
            (g.start, min(g.end or end, end), CLUSTER_CORES if g.cores is None else g.cores)
            for g in self.grants
            if g.start < end
        ]

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

    def fixed(self, btu: float) -> float:
        """Billed core-seconds holding the run's most granted cores from its first grant to its end."""
        held = self.held()
        if not held:
            return 0.0
        pool = LeasePool(btu)
        pool.need(0.0, max(c for _, _, c in held))
        pool.close((self.end - held[0][0]).total_seconds())
        return pool.billed()

    def as_granted(self) -> int:
        """Grants whose one application's executors got exactly the grant's cores."""
        return sum(apps == [cores] for (_, _, cores), apps in zip(self.held(), self.apps))


def run_once(cores: str, speedup: tuple[tuple[int, float], ...] | None, out: Path, demo_dir: Path) -> Run:
    """The demo on a fresh cluster with `[iqp] cores = cores`; its log and ledger are kept under `out`."""
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with standalone_cluster(out / "spark", worker_cores=WORKER_CORES) as cluster:
        env = {
            **os.environ,
            "IQP_DEMO_DIR": str(demo_dir),
            "IQP_DEMO_PATH": "spark_submit",
            "IQP_DEMO_MASTER": cluster.url,
            "IQP_DEMO_ONCE": "1",
            "IQP_DEMO_PORT": str(free_port()),
            "AIRFLOW__IQP__CORES": cores,
            "AIRFLOW__IQP__MAX_CORES": str(CLUSTER_CORES),
        } | ({} if speedup is None else {"AIRFLOW__IQP__SPEEDUP": ",".join(f"{c}:{v:g}" for c, v in speedup)})
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
        (out / "master.json").write_text(json.dumps(state, indent=1))
        apps = [
            (float(app["starttime"]) / 1000, cluster.executor_cores(str(app["id"])))
            for app in [*state["completedapps"], *state["activeapps"]]
        ]
    seconds = time.monotonic() - started
    print(
        f"  cores = {cores}: the demo exited {demo.returncode} after {seconds:.0f} s ({out / 'demo.log'})", flush=True
    )
    ledger = out / "ledger.db"
    shutil.copy(demo_dir / "iqp_ledger.db", ledger)
    with session_scope(f"sqlite:///{ledger}", read_only=True) as session:
        windows = _windows(session)
        grants = granted(session, min(w.start for w in windows), datetime.now(UTC))
        planned = plan(session, DispatchSettings(cores="plan", max_cores=CLUSTER_CORES, speedup=speedup))
    return Run(
        cores=cores,
        seconds=seconds,
        windows=windows,
        grants=grants,
        apps=[
            [c for t, c in apps if g.start.timestamp() <= t < (g.end.timestamp() if g.end else math.inf)]
            for g in grants
        ],
        equal=EQUAL in (out / "demo.log").read_text(),
        plan=None if planned is None else (planned.open.cores, planned.closed.cores),
    )


def _windows(session: Session) -> list[WindowOutcome]:
    """The demo's window of each example DAG: the first window of the ledger."""
    rows = session.execute(
        select(Query.dag_id, Window.window_start, Window.actual_finish, Window.deadline_met)
        .select_from(Window)
        .join(Window.query)
    ).all()
    first = min(start for _, start, _, _ in rows)
    return sorted((WindowOutcome(*row) for row in rows if row[1] == first), key=lambda w: w.dag_id)


def report(runs: list[Run], btu: float) -> list[str]:
    """The table, each run's grants over time, and the plan's saving against fixed capacity."""
    header = (
        f"{'cores':>5}  {'grants (cores x count)':<22} {'apps as granted':>15} {'used core-s':>11} "
        f"{'leased, billed':>14} {'fixed, billed':>13}  {'deadlines met':<13}  {'results':<14} {'run s':>5}"
    )
    lines = [header]
    for r in runs:
        by_cores = ", ".join(f"{c}x{n}" for c, n in sorted(Counter(c for _, _, c in r.held()).items()))
        met = sum(w.met is True for w in r.windows)
        lines.append(
            f"{r.cores:>5}  {by_cores:<22} {f'{r.as_granted()}/{len(r.held())}':>15} {r.used():>11.0f} "
            f"{r.leased(btu):>14.0f} {r.fixed(btu):>13.0f}  {f'{met}/{len(r.windows)}':<13}  "
            f"{'equal' if r.equal else 'NOT CHECKED':<14} {r.seconds:>5.0f}"
        )
    for r in runs:
        plan_cores = "" if r.plan is None else f" (plan: {r.plan[0]} cores while open, {r.plan[1]} once closed)"
        lines.append(f"grants of cores = {r.cores}{plan_cores}, seconds from the window's start:")
        t0 = min(w.start for w in r.windows)
        for g, apps in zip(r.grants, r.apps):
            if g.start >= r.end:
                continue
            held = "held" if g.end is None else f"{(g.end - g.start).total_seconds():5.1f} s"
            lines.append(
                f"  +{(g.start - t0).total_seconds():6.1f} s  {g.query:<8} {g.kind:<8} {g.cores} core(s) {held}  "
                f"executors' cores {apps}"
            )
    planned = next((r for r in runs if r.cores == "plan"), None)
    fixed = next((r for r in runs if r.cores != "plan"), None)
    if planned is not None and fixed is not None:
        lease, hold = planned.leased(btu), fixed.fixed(btu)
        lines.append(
            f"billed by the BTU ({btu:g} s): plan {lease:.0f} core-s leased against {hold:.0f} core-s at fixed "
            f"capacity ({fixed.cores} cores held through its run): {1 - lease / hold:.0%} less"
        )
    return lines


def main() -> int:
    """Run each setting in turn and print the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cores", default=f"plan,{CLUSTER_CORES}", help="the [iqp] cores of each run, in order")
    parser.add_argument(
        "--speedup",
        default=MEASURED,
        help="the plan's speedup as cores:speedup points ('default': the capacity model's labelled default)",
    )
    parser.add_argument("--btu", type=float, default=60.0, help="billing time unit, seconds")
    parser.add_argument("--out", type=Path, help="where runs keep their logs and ledgers (default: a temporary dir)")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="iqp-capacity-live-"))
    started = time.monotonic()
    print(
        f"the three example DAGs by spark-submit on a standalone cluster of 2 workers x {WORKER_CORES} core "
        f"({os.cpu_count()} CPUs); plan speedup {args.speedup}; BTU {args.btu:g} s; logs and ledgers in {out}",
        flush=True,
    )
    speedup = None if args.speedup == "default" else DispatchSettings(speedup=speedup_points(args.speedup)).speedup
    runs = [run_once(cores, speedup, out / f"cores-{cores}", out / "demo") for cores in args.cores.split(",")]
    print("\n".join(report(runs, args.btu)))
    print(f"({time.monotonic() - started:.0f} s)")
    return 0 if all(r.equal and all(w.met for w in r.windows) for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
