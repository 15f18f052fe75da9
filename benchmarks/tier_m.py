"""Tier M: the 13 packaged queries on one replayed window, end to end, cost in CPU-seconds.

Run (one heavy job at a time on this machine):
    flock /tmp/iqp-heavy.lock uv run python benchmarks/tier_m.py --quick

Systems, each on its own fresh replay of the same generated stream:
- ours-tight, ours-loose: 13 IQP DAGs (dynamic, alpha 0.5) in a real Airflow (scheduler,
  triggerer, DAG processor, API server, LocalExecutor task processes; metadata and ledger on
  PostgreSQL) sharing one Spark Connect server through the dispatcher (LLF), declared with the
  tight and the loose deadlines;
- one-shot: one scheduled Airflow task per query that runs it once after the window closes, on
  the same Airflow and Connect server;
- SS-default, SS-pt (processing time span / 7.5), SS-once (availableNow at the window close):
  one Structured Streaming application running the 13 queries.
Deadlines: window end + 10 s + delta x the cumulative single-batch costs (benchmarks/tierm/deadlines.py).
Cost: CPU-seconds over the span of every process a system needs (ours and one-shot: the Connect
server, each Airflow process, the task processes, Airflow's metadata database and the ledger's,
reported apart; streaming: its whole application). Results are checked against one Spark SQL pass.
Appends each system's run to runs.jsonl in --out as it ends; a system already recorded there is
not run again (a run that stopped resumes). Writes tables.txt and prints the tables.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from airflow_iqp.queries import load_query
from benchmarks.ssbench import producer
from benchmarks.ssbench.spark_worker import batch_truth
from benchmarks.tierm.airflow_side import AirflowWindow, Stream, tier_services
from benchmarks.tierm.deadlines import deadline_offsets, fitted_models, single_batch_cost
from benchmarks.tierm.run import QueryResult, SystemRun, load_runs, record_run
from benchmarks.tierm.streaming import TRIGGERS, run_streaming
from benchmarks.tierm.table import airflow_per_task, parts, per_query, totals

if TYPE_CHECKING:
    from collections.abc import Callable

QUERIES = ("q1", "q3", "q4", "q6", "q9", "q10", "q12", "q14", "q19", "cq1", "cq2", "cq3", "cq4")
ORDERS_PER_FILE = 500  # Tier S's density: scale 0.1 (150,000 orders) over 300 files
SYSTEMS = ("one-shot", "ours-tight", "ours-loose", *TRIGGERS)
# --quick: a short window over Tier S's four queries (an aggregate, a join, a static-table join,
# a custom query); with all 13 it took 11-14 minutes, most of it the 13 queries' start-up in each
# streaming application and the 13 DAGs' tasks after each close.
QUICK = {"span": 30.0, "files": 15, "queries": "q3,q6,q14,cq4"}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"a short window: {QUICK['span']:g} s, {QUICK['files']} files, queries {QUICK['queries']}",
    )
    parser.add_argument("--span", type=float, default=1200.0, help="the window, in seconds of real time")
    parser.add_argument("--files", type=int, default=600, help="files per stream over the window")
    parser.add_argument("--deltas", default="1,3", help="tight,loose: the deadline's multiple of the cumulative costs")
    parser.add_argument("--systems", default=",".join(SYSTEMS), help=f"comma-separated, of {', '.join(SYSTEMS)}")
    parser.add_argument("--queries", help="comma-separated, of the 13 (default: all; the span sweep runs q6 alone)")
    parser.add_argument("--data", type=Path, default=Path("data/tier-m"), help="where the stream is generated")
    parser.add_argument("--out", type=Path, help="results directory (default: under --data, by time)")
    args = parser.parse_args(argv)
    if args.quick:
        args.span, args.files = QUICK["span"], QUICK["files"]
        args.queries = args.queries or QUICK["queries"]
    args.queries = args.queries or ",".join(QUERIES)
    unknown = sorted(set(args.systems.split(",")) - set(SYSTEMS))
    if unknown:
        parser.error(f"unknown system(s) {unknown}; choose from {', '.join(SYSTEMS)}")
    unknown = sorted(set(args.queries.split(",")) - set(QUERIES))
    if unknown:
        parser.error(f"unknown quer(ies) {unknown}; choose from {', '.join(QUERIES)}")
    args.queries = tuple(q for q in QUERIES if q in args.queries.split(","))  # deadlines follow this order
    return args


def log(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {message}", flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    queries: tuple[str, ...] = args.queries
    began = time.monotonic()
    tight, loose = (float(d) for d in args.deltas.split(","))
    systems = [s for s in SYSTEMS if s in args.systems.split(",")]
    scale = args.files * ORDERS_PER_FILE / 1_500_000
    source = (args.data / f"s{scale:g}-f{args.files}").absolute()
    out = (args.out or args.data / time.strftime("results-%Y%m%d-%H%M%S")).absolute()
    out.mkdir(parents=True, exist_ok=True)
    manifest = producer.ensure_stream(source, scale, args.files)
    log(f"stream: {source} ({args.files} files, scale {scale:g}, span {args.span:g} s)")
    rows = {q: sum(f.rows for s in _streams(q) for f in manifest.streams[s]) for q in queries}
    models = fitted_models(source, queries, source.parent / f"{source.name}-models")
    costs = {q: single_batch_cost(models[q], rows[q]) for q in queries}
    deadlines = {"tight": deadline_offsets(costs, queries, tight), "loose": deadline_offsets(costs, queries, loose)}
    recorded = {r.config: r for r in load_runs(out / "runs.jsonl")}
    pending = [s for s in systems if s not in recorded]
    if recorded:
        log(f"recorded in {out} already, not run again: {', '.join(s for s in systems if s in recorded)}")
    truth: dict[str, list[tuple[float | str | None, ...]]] = {}
    computing = threading.Thread(target=lambda: truth.update(batch_truth(source, queries, out / "truth")))
    if pending:
        computing.start()
    stream = Stream(
        source=source,
        queries=queries,
        span_s=args.span,
        speedup=manifest.seconds_per_file * args.files / args.span,
        truth=truth,
        models=models,
        rows_per_file={q: rows[q] / args.files for q in queries},
    )
    airflow_systems = [s for s in pending if s not in TRIGGERS]
    last = max(deadlines["loose"].values())
    if airflow_systems:
        services = tier_services(out / "airflow")
        try:
            services.start(log)
            computing.join()
            log("truth computed; Airflow up")
            for config in airflow_systems:
                offsets = {} if config == "one-shot" else deadlines[config.removeprefix("ours-")]
                window = AirflowWindow(services, stream, config, out / config, offsets)
                recorded[config] = _logged(config, partial(window.run, last), queries, out)
        finally:
            services.stop()
    if pending:
        computing.join()
    for config in (s for s in pending if s in TRIGGERS):
        recorded[config] = _logged(config, partial(run_streaming, config, stream, out / config, last), queries, out)
    runs = [recorded[s] for s in systems]
    tables = "\n\n".join(
        [
            f"Tier M: {len(queries)} queries ({','.join(queries)}), {args.files} files over {args.span:g} s, "
            f"deltas {tight:g} (tight) and {loose:g} (loose)",
            totals(runs, deadlines),
            per_query(runs, deadlines, costs),
            airflow_per_task(runs),
            parts(runs),
        ]
    )
    (out / "tables.txt").write_text(tables + "\n")
    print(tables)
    log(f"{len(runs)} runs in {time.monotonic() - began:.0f} s; rows and tables in {out}")
    return 0


def _streams(query: str) -> tuple[str, ...]:
    return load_query(query).streams


def _logged(config: str, run: Callable[[], SystemRun], queries: tuple[str, ...], out: Path) -> SystemRun:
    """Run one system and record it in `out`; a failure is not recorded (a rerun tries it again)
    and becomes a run with no results here, so the others still run.
    """
    log(f"{config}: running")
    try:
        found = run()
    except Exception as err:
        log(f"{config}: failed: {type(err).__name__}: {err}")
        failed = QueryResult(None, None, False, f"{type(err).__name__}: {err}"[:200])
        return SystemRun(config, {}, 0, 0.0, dict.fromkeys(queries, failed), 0.0)
    record_run(found, out / "runs.jsonl")
    exact = sum(r.exact for r in found.queries.values())
    log(f"{config}: {found.total:.1f} CPU-s over {found.span_s:.0f} s; {exact}/{len(queries)} exact")
    for query, why in found.refused.items():
        log(f"{config}: {query} refused: {why}")
    return found


if __name__ == "__main__":
    sys.exit(main())
