"""The benchmark's tables and figure: each configuration's CPU-seconds divided by ours, per query
and in total (median over repeats; invalid, refused and failed runs count for nothing). The same
ratios in busy seconds (the paper's cost: the time the jobs or micro-batches ran) are the
paper-style view of the same runs.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from benchmarks.ssbench.harness import RunRow

Metric = Literal["cpu_s", "busy_s"]
PAPER_RATIOS = {"default trigger": 60.0, "10-minute trigger": 12.0}  # multi-query, against dynamic LLF


@dataclass(frozen=True)
class Cell:
    """One configuration on one query: the median cost of its valid runs, or why there is none."""

    value: float | None
    runs: int
    note: str  # "" or the status of the runs when none was valid (refused, invalid, failed)


def cells(rows: Sequence[RunRow], metric: Metric = "cpu_s") -> dict[tuple[str, str], Cell]:
    """(query, config) -> Cell of `metric`."""
    grouped: dict[tuple[str, str], list[RunRow]] = {}
    for row in rows:
        grouped.setdefault((row.query, row.config), []).append(row)
    found = {}
    for key, runs in grouped.items():
        costs = [getattr(r, metric) for r in runs if r.status == "ok"]
        valid = [c for c in costs if c is not None]
        note = "" if valid else "/".join(sorted({r.status for r in runs}))
        found[key] = Cell(statistics.median(valid) if valid else None, len(runs), note)
    return found


def ratios(rows: Sequence[RunRow], baseline: str, metric: Metric = "cpu_s") -> dict[str, dict[str, float | None]]:
    """Query (and "total") -> config -> cost / the baseline's; the total sums the queries on
    which both the configuration and the baseline have a valid run.
    """
    table = cells(rows, metric)
    queries = list(dict.fromkeys(r.query for r in rows))
    configs = list(dict.fromkeys(r.config for r in rows))
    out: dict[str, dict[str, float | None]] = {}
    sums: dict[str, tuple[float, float]] = {}
    for query in queries:
        base = table.get((query, baseline), Cell(None, 0, "")).value
        out[query] = {}
        for config in configs:
            cell = table.get((query, config))
            cost = None if cell is None else cell.value
            out[query][config] = None if cost is None or not base else cost / base
            if cost is not None and base:
                num, den = sums.get(config, (0.0, 0.0))
                sums[config] = (num + cost, den + base)
    out["total"] = {c: (sums[c][0] / sums[c][1] if c in sums else None) for c in configs}
    return out


def format_table(rows: Sequence[RunRow], baseline: str) -> str:
    """Text table: per query, each configuration as `ratio (CPU-s)`, then the total row."""
    table = cells(rows)
    by_query = ratios(rows, baseline)
    configs = list(dict.fromkeys(r.config for r in rows))
    files = {r.query: r.files for r in rows}
    header = ["query", "files", *configs]
    lines = [header]
    for query, per_config in by_query.items():
        line = [query, str(files.get(query, sum(files.values())))]
        for config in configs:
            cell = table.get((query, config))
            ratio = per_config[config]
            if query == "total":
                line.append("-" if ratio is None else f"{ratio:.2f}x")
            elif cell is None:
                line.append("-")
            elif cell.value is None:
                line.append(cell.note)
            else:
                line.append(f"{'?' if ratio is None else f'{ratio:.2f}x'} ({cell.value:.1f} s)")
        lines.append(line)
    return _grid(lines) + f"\n(ratio = CPU-seconds of the Spark side over the span / {baseline}'s; median of repeats)"


def _grid(lines: list[list[str]]) -> str:
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    text = ["  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip() for line in lines]
    text.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(text)


def _number(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def format_runs(rows: Sequence[RunRow]) -> str:
    """One line per run: the cost and everything that qualifies it."""
    header = [
        "query",
        "config",
        "#",
        "status",
        "CPU-s",
        "busy-s",
        "batches",
        "peak-MiB",
        "ready",
        "deadline",
        "loop-CPU-s",
        "Airflow-CPU-s",
        "JVM-start-CPU-s",
        "load-1m",
        "check",
    ]
    lines = [header]
    for r in rows:
        ready = "-" if r.ready_after_close_s is None else f"close{r.ready_after_close_s:+.1f}s"
        deadline = "-" if r.deadline_met is None else ("met" if r.deadline_met else "MISSED")
        lines.append(
            [
                r.query,
                r.config,
                str(r.repeat),
                r.status,
                _number(r.cpu_s),
                _number(r.busy_s),
                "-" if r.batches is None else str(r.batches),
                "-" if r.peak_rss is None else str(round(r.peak_rss / 2**20)),
                ready,
                deadline,
                _number(r.loop_cpu_s, 2),
                _number(r.airflow_cpu_s),
                _number(r.startup_cpu_s),
                f"{r.load_1m:.2f}",
                "ok" if r.error is None else r.error[:80],
            ]
        )
    return _grid(lines)


def is_streaming(config: str) -> bool:
    return config.startswith("SS-")


def format_totals(rows: Sequence[RunRow], metric: Metric = "cpu_s") -> str:
    """Each streaming configuration's total cost over each of ours', over the queries both ran."""
    configs = list(dict.fromkeys(r.config for r in rows))
    streaming = [c for c in configs if is_streaming(c)]
    mine = [c for c in configs if not is_streaming(c)]
    lines = [[f"streaming / ours, total {'CPU-seconds' if metric == 'cpu_s' else 'busy seconds'}", *mine]]
    for config in streaming:
        line = [config]
        for base in mine:
            total = ratios(rows, base, metric)["total"][config]
            line.append("-" if total is None else f"{total:.2f}x")
        lines.append(line)
    return _grid(lines)


def plot(rows: Sequence[RunRow], path: Path) -> None:
    """Left: each configuration's CPU-seconds per query. Right: each streaming configuration's
    total over each of ours', with the paper's multi-query ratios for reference. Log scales.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    table = cells(rows)
    queries = list(dict.fromkeys(r.query for r in rows))
    configs = list(dict.fromkeys(r.config for r in rows))
    streaming = [c for c in configs if is_streaming(c)]
    mine = [c for c in configs if not is_streaming(c)]
    fig, (costs, ratio) = plt.subplots(1, 2, figsize=(4 + 1.2 * len(queries) + 1.2 * len(mine), 4.8))
    width = 0.8 / max(len(configs), 1)
    least = min((c.value for c in table.values() if c.value), default=1.0)
    for i, config in enumerate(configs):
        xs = [q + i * width for q in range(len(queries))]
        values = [(table.get((query, config)) or Cell(None, 0, "")).value or 0.0 for query in queries]
        costs.bar(xs, values, width, label=config, hatch="" if is_streaming(config) else "//")
    costs.set_ylim(bottom=least / 3)  # log bars start at the axis: give the cheapest some height
    costs.set_xticks([q + width * (len(configs) - 1) / 2 for q in range(len(queries))], queries)
    costs.set_yscale("log")
    costs.set_ylabel("Spark-side CPU-seconds over the span")
    costs.set_title("Cost per query (median run)", fontsize=10)
    costs.legend(fontsize=7, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.08))
    width = 0.8 / max(len(streaming), 1)
    for i, config in enumerate(streaming):
        xs = [m + i * width for m in range(len(mine))]
        ratio.bar(xs, [ratios(rows, base)["total"][config] or 0.0 for base in mine], width, label=config)
    for label, value in PAPER_RATIOS.items():
        ratio.axhline(value, linestyle="--", linewidth=0.8, color="grey")
        ratio.text(0.01, value, f"paper, {label}: {value:.0f}x", transform=ratio.get_yaxis_transform(), fontsize=7)
    ratio.axhline(1.0, color="black", linewidth=0.8)
    ratio.set_xticks([m + width * (len(streaming) - 1) / 2 for m in range(len(mine))], mine, fontsize=8)
    ratio.set_yscale("log")
    ratio.set_ylabel("streaming CPU-seconds / ours (all queries)")
    ratio.set_title("Structured Streaming over ours", fontsize=10)
    ratio.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
