"""Tier M's span sweep: Q6 alone, the same files replayed over longer and longer windows.

Run (one heavy job at a time on this machine):
    flock /tmp/iqp-heavy.lock uv run python benchmarks/span_sweep.py --spans 60,300,1200

Each span is one `benchmarks/tier_m.py` run with `--queries q6` and the same `--files`, so only
the span changes: streaming pays per trigger over the span, ours and the one-shot job per file.
A system already recorded for a span in `--out` is not run again (a sweep that stopped resumes).
Prints and writes `sweep.txt` (CPU-seconds by system and span) and `sweep.png`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benchmarks import tier_m
from benchmarks.tierm.run import SystemRun, load_runs


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--spans", default="60,300,1200", help="comma-separated window spans, in seconds")
    parser.add_argument("--files", type=int, default=60, help="files per stream, the same at every span")
    parser.add_argument(
        "--systems", default="one-shot,ours-loose,SS-default,SS-pt,SS-once", help="as tier_m.py's --systems"
    )
    parser.add_argument("--out", type=Path, default=Path("data/tier-m/span-sweep"), help="results directory")
    return parser.parse_args(argv)


def table(by_span: dict[float, list[SystemRun]]) -> str:
    """CPU-seconds (Spark + Airflow + ledger) by system and span, and each cost per minute of span."""
    spans = sorted(by_span)
    systems = list(dict.fromkeys(r.config for s in spans for r in by_span[s]))
    lines = [
        "| system | " + " | ".join(f"{s:g} s: CPU-s (Airflow)" for s in spans) + " | last / first |",
        "|" + "---|" * (len(spans) + 2),
    ]
    for system in systems:
        found = {s: next((r for r in by_span[s] if r.config == system), None) for s in spans}
        cells = ["-" if r is None else f"{r.total:.1f} ({r.airflow:.1f})" for r in found.values()]
        first, last = found[spans[0]], found[spans[-1]]
        growth = "-" if first is None or last is None or not first.total else f"{last.total / first.total:.2f}x"
        lines.append(f"| {system} | " + " | ".join(cells) + f" | {growth} |")
    return "\n".join(lines)


def plot(by_span: dict[float, list[SystemRun]], path: Path) -> None:
    """CPU-seconds against the span, one line per system (log-log)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    spans = sorted(by_span)
    systems = list(dict.fromkeys(r.config for s in spans for r in by_span[s]))
    fig, ax = plt.subplots(figsize=(6.4, 4.8))
    for system in systems:
        points = [(s, r.total) for s in spans for r in by_span[s] if r.config == system]
        ax.plot([s / 60 for s, _ in points], [c for _, c in points], marker="o", label=system)
    ax.set(xscale="log", yscale="log", xlabel="span (minutes)", ylabel="CPU-seconds", title="Q6 alone: cost by span")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    by_span: dict[float, list[SystemRun]] = {}
    for span in (float(s) for s in args.spans.split(",")):
        out = args.out / f"span-{span:g}"
        tier_m.main(
            ["--queries=q6", f"--span={span:g}", f"--files={args.files}", f"--systems={args.systems}", f"--out={out}"]
        )
        by_span[span] = load_runs(out / "runs.jsonl")
    text = table(by_span)
    (args.out / "sweep.txt").write_text(text + "\n")
    plot(by_span, args.out / "sweep.png")
    print(text)
    print(f"plot: {args.out / 'sweep.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
