"""Regenerate the tables of docs/simulation.md: `iqp simulate` on both execution paths, at the
measured and the paper's volume, on FR and the variable-rate profiles, each run timed.

    .venv/bin/python benchmarks/policy_table.py                 # every run below, ~6 min on 2 cores
    .venv/bin/python benchmarks/policy_table.py --only measured # just the runs whose label has this

Writes OUT/<label>.txt (the command, its output and its wall time) and OUT/<label>.png (its
picture), OUT being --out (default $TMPDIR/iqp-policy-table), and prints them all. Runs go one
after another: the timings are of one simulation on one core.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
IQP = REPO / ".venv" / "bin" / "iqp"

MARGIN_POLICIES = "edf,llf,edf-idle,llf-idle,edf-margin,llf-margin,edf-idle-margin,llf-idle-margin"

# (label, arguments): the volumes the docs report, not a search for a matching one.
RUNS = [
    *[
        (f"measured-{path}-{profile}", ["--path", path, "--volume", "measured", "--profile", profile])
        for path in ("in_process", "spark_submit")
        for profile in ("FR", "VR1", "VR2", "VR3", "VR4")
    ],
    *[
        (f"paper-{path}-{profile}", ["--path", path, "--volume", "paper", "--profile", profile])
        for path in ("in_process", "spark_submit")
        for profile in ("FR", "VR3")
    ],
    # Sensitivity, one decade apart: extrapolated like `paper`, reported as such.
    *[
        (f"sf{scale}-{path}-FR", ["--path", path, "--volume", scale, "--profile", "FR"])
        for path in ("in_process", "spark_submit")
        for scale in ("0.1", "1")
    ],
    # Jobs that stray from the model (relative std 0.3, two seeds) with and without idle time and margins.
    *[
        (
            f"sf1-spread0.3-seed{seed}-in_process-FR",
            ["--volume", "1", "--spread", "0.3", "--seed", seed, "--policies", MARGIN_POLICIES],
        )
        for seed in ("0", "1")
    ],
    # The paper picks the first query at random: the default seed, once.
    *[
        (f"random0-{volume}-in_process-FR", ["--volume", volume, "--order", "random", "--seed", "0"])
        for volume in ("measured", "1")
    ],
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "iqp-policy-table")
    parser.add_argument("--only", default="", help="run only labels containing this text")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    failed = 0
    for label, extra in RUNS:
        if args.only not in label:
            continue
        command = [str(IQP), "simulate", *extra, "--png", str(args.out / f"{label}.png")]
        started = time.monotonic()
        done = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
        wall = time.monotonic() - started
        shown = "iqp simulate " + " ".join(extra)
        text = f"$ {shown}\n{done.stdout}{done.stderr}(exit {done.returncode}, wall {wall:.1f} s)\n"
        (args.out / f"{label}.txt").write_text(text)
        print(f"### {label}\n{text}", flush=True)
        failed += done.returncode != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
