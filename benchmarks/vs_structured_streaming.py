"""Spark Structured Streaming against ours on the same replayed file stream, cost in CPU-seconds.

Run (one heavy job at a time on this machine):
    flock /tmp/iqp-heavy.lock uv run python benchmarks/vs_structured_streaming.py \
        --queries q6 --files 60 --speedup 4

Each query's stream is generated once (`--scale` defaults to ~500 orders per file), its batch
truth computed once, then every configuration runs on its own fresh replay, one at a time:
- SS-default (default trigger), SS-pt (processing time = span / 7.5, the paper's 10 minutes of
  4500 s), SS-once (availableNow started at window close);
- ours: IQP-1D (one partial and the merge after the window: the normaliser), IQP-static (the
  static plan), IQP-dyn (dynamic, alpha 0.5, tau_max 30 s), each on a warm in-process session;
  the same three with `-connect`: a session per job on a Spark Connect server (the production
  path), and with `-submit`: one spark-submit per job (the `spark` connection's path).
A run counts only if its final result equals the batch truth and no row was dropped by a
watermark. Writes runs.jsonl, tables.txt and ratios.png into --out; prints the tables.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from airflow_iqp.queries import load_query
from benchmarks.ssbench import producer
from benchmarks.ssbench.harness import RunRow, run_once
from benchmarks.ssbench.report import format_runs, format_table, format_totals, plot
from benchmarks.ssbench.shape import is_ordered
from benchmarks.ssbench.spark_worker import CONFIGS, batch_truth
from benchmarks.ssbench.systems import RunSpec

ORDERS_PER_FILE = 500  # the protocol's density: scale 0.1 (150,000 orders) over 300 files
DEFAULT_CONFIGS = (
    "SS-default",
    "SS-pt",
    "SS-once",
    "IQP-1D",
    "IQP-dyn",
    "IQP-1D-connect",
    "IQP-dyn-connect",
    "IQP-1D-submit",
    "IQP-dyn-submit",
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--queries", default="q6,q14,q3,cq4", help="comma-separated (default: Tier S)")
    parser.add_argument(
        "--configs", default=",".join(DEFAULT_CONFIGS), help=f"comma-separated, of {', '.join(CONFIGS)}"
    )
    parser.add_argument("--baseline", default="IQP-1D", help="the configuration every cost is divided by")
    parser.add_argument("--files", type=int, default=300, help="files per stream (one per second of event time)")
    parser.add_argument("--scale", type=float, help="TPC-H scale (default: files / 3000, ~500 orders per file)")
    parser.add_argument("--speedup", type=float, default=1.0, help="replay this many times faster than 1 file/s")
    parser.add_argument("--deadline", type=float, default=30.0, help="seconds after window close the result is due")
    parser.add_argument("--repeats", type=int, default=1, help="runs per configuration and query (median)")
    parser.add_argument("--data", type=Path, default=Path("data/ssbench"), help="where streams are generated")
    parser.add_argument("--out", type=Path, help="results directory (default: under --data, by time)")
    parser.add_argument(
        "--from-runs", type=Path, nargs="+", help="run nothing: tables and plot (into --out) from these runs.jsonl"
    )
    args = parser.parse_args(argv)
    unknown = sorted(set(args.configs.split(",")) - set(CONFIGS))
    if unknown:
        parser.error(f"unknown configuration(s) {unknown}; choose from {', '.join(CONFIGS)}")
    if args.files < 2 or args.speedup <= 0 or args.repeats < 1 or args.deadline <= 0:
        parser.error("--files must be at least 2, --repeats at least 1, --speedup and --deadline positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    queries = [q.strip() for q in args.queries.split(",") if q.strip()]
    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    scale = args.scale or args.files * ORDERS_PER_FILE / 1_500_000
    source = (args.data / f"s{scale:g}-f{args.files}").absolute()
    out = (args.out or args.data / time.strftime("results-%Y%m%d-%H%M%S")).absolute()
    out.mkdir(parents=True, exist_ok=True)
    if args.from_runs:
        report(
            [RunRow(**json.loads(line)) for runs in args.from_runs for line in runs.read_text().splitlines()], args, out
        )
        return 0
    began = time.monotonic()
    manifest = producer.ensure_stream(source, scale, args.files)
    print(f"stream: {source} ({args.files} files, scale {scale:g}); computing the batch truth", flush=True)
    truth = batch_truth(source, queries, out / "truth")
    rows = []
    with (out / "runs.jsonl").open("w") as sink:
        for query in queries:
            ordered = is_ordered(load_query(query).sql)
            for repeat in range(args.repeats):
                for config in configs:
                    spec = RunSpec(
                        query=query,
                        source=source,
                        landing=out / "landing",
                        workdir=out / "work",
                        files=args.files,
                        seconds_per_file=manifest.seconds_per_file / args.speedup,
                        deadline_s=args.deadline,
                    )
                    row = run_once(CONFIGS[config](), spec, args.speedup, truth[query], ordered, repeat)
                    rows.append(row)
                    sink.write(json.dumps(row.as_json()) + "\n")
                    sink.flush()
                    cost = "-" if row.cpu_s is None else f"{row.cpu_s:.1f} CPU-s"
                    print(
                        f"{query} {config} #{repeat} (load {row.load_1m:.2f}): {row.status} {cost} {row.error or ''}",
                        flush=True,
                    )
    report(rows, args, out)
    print(f"{len(rows)} runs in {time.monotonic() - began:.0f} s; rows, tables and plot in {out}")
    return 0


def report(rows: list[RunRow], args: argparse.Namespace, out: Path) -> None:
    parts = [format_runs(rows), format_table(rows, args.baseline), format_totals(rows), format_totals(rows, "busy_s")]
    tables = "\n\n".join(parts)
    (out / "tables.txt").write_text(tables + "\n")
    plot(rows, out / "ratios.png")
    print(tables)


if __name__ == "__main__":
    sys.exit(main())
