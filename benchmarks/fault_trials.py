"""Fault trials: live windows with one component killed at a random moment, then checked (issues 15, 23).

Run: uv run python benchmarks/fault_trials.py --trials 30 [--seed 15] [--kinds worker,driver] [--out FILE]

Airflow as several hosts would run it, the Celery topology of tests/topology.py (Redis as broker,
two Celery workers, two schedulers, DAG processor, triggerer, API server; its metadata on
PostgreSQL), our ledger on a PostgreSQL server of its own, and a Spark Connect server, each its
own process group under a supervisor that starts it again a second after it dies
(`benchmarks/faults/services.py`). Each trial is one 20 s window of TPC-H Q6 whose files land
while it runs, on Spark Connect (on spark-submit for `driver`); at a random moment of the window
one of these gets SIGKILL (`benchmarks/faults/trial.py`):
- worker: the task process running a partial (`airflow worker -- <task instance id>`), on either
  Celery worker; its supervisor process lives and reports it,
- celery-worker: the Celery worker running a partial or the merge, whole (its process group and
  the task processes under it), as when its host goes,
- scheduler (one of the two, at random), triggerer, connect-server: the component's process group,
- driver: the spark-submit JVM of a partial,
- postgres-restart: the ledger's PostgreSQL, `pg_ctl restart -m immediate` (every connection cut).
Per trial: whether the kill happened (the signal reached the target while it ran, and it was gone
after), exact (the published result equals one Spark SQL pass over the window's files, every file
in exactly one done batch), no file in two committed batches of the DAG, the deadline outcome,
and, in seconds after the kill, the window's next job granted the resource, the killed component
back (supervisor), and the result merged. "K/N exact" and "D/N deadlines met" count only the N
trials whose kill happened; the others are counted apart ("no kill: M"), since they tested
nothing. The exit status is 1 when a trial is not exact or no trial killed anything.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.faults.services import Services  # noqa: E402
from benchmarks.faults.trial import KINDS, Trial  # noqa: E402

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from benchmarks.faults.trial import TrialResult

SCALE = 0.01
STREAM_FILES = 140  # about 430 lineitem rows a file at scale 0.01


def kinds_for(trials: int, kinds: Sequence[str], rng: random.Random) -> list[str]:
    """Each kind in turn, in a seeded order, so every kind gets trials // len(kinds) or one more."""
    order = list(kinds)
    rng.shuffle(order)
    return [order[i % len(order)] for i in range(trials)]


def run_trials(
    root: Path,
    kinds: Sequence[str],
    seed: int,
    log: Callable[[str], None],
    lease_seconds: float | None = None,
) -> list[TrialResult]:
    """Start the services under `root`, run one trial per entry of `kinds`, stop the services."""
    from airflow_iqp.demo.verify import local_spark
    from airflow_iqp.tpch.generate import generate

    rng = random.Random(seed)
    stream = root / "stream"
    generate(stream, scale=SCALE, files=STREAM_FILES)
    services = Services(root, lease_seconds=lease_seconds)
    results: list[TrialResult] = []
    try:
        services.start(log)
        spark = local_spark()
        for index, kind in enumerate(kinds, start=1):
            started = time.monotonic()
            result = Trial(services, stream, index, kind, rng).run(spark)
            results.append(result)
            log(f"{row(result)}  ({time.monotonic() - started:.0f} s)")
            for problem in result.problems:
                log(f"    {problem}")
    finally:
        services.stop()
    return results


HEADER = (
    "| # | kind | target | killed | at (s into window) | done batches | next grant (s) | back (s) | merged (s) "
    "| deadline | exact | no file twice |"
)


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def row(r: TrialResult) -> str:
    """One trial as a Markdown table row."""
    cells = (
        str(r.index),
        r.kind,
        r.target,
        "yes" if r.killed else "NO",
        _seconds(r.at),
        str(r.batches),
        _seconds(r.next_grant),
        _seconds(r.restarted),
        _seconds(r.merged),
        r.outcome,
        "yes" if r.exact else "NO",
        "yes" if r.no_duplicates else "NO",
    )
    return "| " + " | ".join(cells) + " |"


def exact(r: TrialResult) -> bool:
    return r.exact and r.no_duplicates


def table(results: Sequence[TrialResult]) -> str:
    """The trials as a Markdown table and the totals: exact among the trials whose kill happened,
    and the trials whose kill did not.
    """
    killed = [r for r in results if r.killed]
    lines = [HEADER, "|" + "---|" * (HEADER.count("|") - 1)]
    lines += [row(r) for r in results]
    lines.append(f"\n{sum(r.outcome == 'met' for r in killed)}/{len(killed)} deadlines met")
    lines.append(f"{sum(map(exact, killed))}/{len(killed)} exact")
    lines.append(f"no kill: {len(results) - len(killed)}")
    if not killed:
        lines.append("no trial killed its target: these trials test nothing")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=len(KINDS))
    parser.add_argument("--seed", type=int, default=15)
    parser.add_argument("--kinds", default=",".join(KINDS), help=f"comma-separated, of {', '.join(KINDS)}")
    parser.add_argument("--out", type=Path, help="also write the table here")
    parser.add_argument("--keep", type=Path, help="run under this directory and keep it (logs)")
    args = parser.parse_args(argv)
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown or not kinds or args.trials < 1:
        parser.error(f"--kinds from {', '.join(KINDS)} (got {unknown or 'none'}), --trials at least 1")
    began = time.monotonic()

    def log(message: str) -> None:
        print(f"[{time.monotonic() - began:6.0f}s] {message}", flush=True)

    plan = kinds_for(args.trials, kinds, random.Random(args.seed))
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        results = run_trials(args.keep, plan, args.seed, log)
    else:
        with tempfile.TemporaryDirectory(prefix="iqp-faults-") as tmp:
            results = run_trials(Path(tmp), plan, args.seed, log)
    out = table(results)
    print(out)
    if args.out:
        args.out.write_text(out + "\n")
    return 0 if any(r.killed for r in results) and all(map(exact, results)) else 1


if __name__ == "__main__":
    raise SystemExit(main())
