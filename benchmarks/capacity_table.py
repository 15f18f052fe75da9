"""The elastic-capacity table of docs/simulation.md: the paper's 13 queries at TPC-H scale 1
(in_process, FR) with job costs spread 0.3, under the three capacity controllers, seeds 0-4.

    .venv/bin/python benchmarks/capacity_table.py [--btu 60] [--volume 1] [--spread 0.3] [--threshold S]

The plan is made once per delta (it depends on the spread, not on the draws); each seed draws
the jobs' costs anew. Prints, per delta and seed, every controller's deadlines met and billed
core-seconds, and how much less elastic is billed than fixed and reactive.
"""

from __future__ import annotations

import argparse
import time

from airflow_iqp.example_files import example_dir
from airflow_iqp.simulation import capacity, protocol
from airflow_iqp.simulation.engine import Noise

DELTAS = (1.0, 0.8, 0.6, 0.4, 0.2)
SEEDS = range(5)


def main() -> int:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--btu", type=float, default=capacity.BTU)
    parser.add_argument("--volume", default="1")
    parser.add_argument("--spread", type=float, default=0.3)
    parser.add_argument("--threshold", type=float, help="reactive: scale up over this backlog (s; default tau_max)")
    args = parser.parse_args()
    volume = args.volume if args.volume in protocol.VOLUMES else float(args.volume)
    queries, window_end, _ = protocol.paper_workload(example_dir("cost_models"), "in_process", "FR", volume)
    order = protocol.deadline_order(queries)
    started = time.monotonic()
    threshold = "tau_max" if args.threshold is None else f"{args.threshold:g} s"
    print(
        f"13 queries, volume {args.volume}, in_process, FR, spread {args.spread:g}, BTU {args.btu:g} s, EDF; "
        f"reactive threshold {threshold}"
    )
    print(
        f"{'delta':>5} {'seed':>4} {'plan':>6}  {'elastic':>14} {'fixed':>14} {'reactive':>14}  vs fixed  vs reactive"
    )
    for delta in DELTAS:
        planning = protocol.Experiment(queries, window_end, order, 0.5, 30.0, Noise(args.spread))
        model = capacity.plan(planning.workload(delta), planning)
        if model.open.cores is None or model.closed.cores is None:
            print(
                f"{delta:>5.1f}    - no capacity up to {model.speedup.max_cores} cores "
                f"(needed by {model.peak.needed_by})"
            )
            continue
        for seed in SEEDS:
            experiment = protocol.Experiment(queries, window_end, order, 0.5, 30.0, Noise(args.spread, 0.0, seed))
            runs = {
                r.controller: r
                for r in capacity.run(
                    experiment.workload(delta), experiment, model, btu=args.btu, threshold=args.threshold
                )
            }
            cells = " ".join(f"{f'{r.result.met_count}/13 {r.billed:.0f}':>14}" for r in runs.values())
            elastic = runs["elastic"].billed
            saved = [1 - elastic / runs[other].billed for other in ("fixed", "reactive")]
            plan = f"{model.open.cores}/{model.closed.cores}"
            print(f"{delta:>5.1f} {seed:>4} {plan:>6}  {cells}  {saved[0]:>8.0%}  {saved[1]:>11.0%}")
    print(f"({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
