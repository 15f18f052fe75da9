"""Tier M's tables: each system's CPU-seconds over the span against ours (Airflow's share shown),
and per query its ready time against the tight and the loose deadline.

Every system runs all queries in shared processes (one streaming application, one Connect server
and one Airflow), so CPU is measured per system, not per query; per query the tables give the
ready time and the busy seconds (the paper's cost: what the query's micro-batches or jobs took).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from benchmarks.tierm.run import SystemRun

OURS = {"tight": "ours-tight", "loose": "ours-loose"}
GIB = 1024**3


def _ratio(value: float, base: float | None) -> str:
    return "-" if not base else f"{value / base:.2f}x"


def _met(run: SystemRun, offsets: Mapping[str, float]) -> str:
    marks = [run.met(q, d) for q, d in offsets.items()]
    return f"{sum(m is True for m in marks)}/{sum(m is not None for m in marks)}"


def totals(runs: Sequence[SystemRun], deadlines: Mapping[str, Mapping[str, float]]) -> str:
    """One line per system: CPU-s by part and in total, the ratio to ours, memory, deadlines met."""
    by_config = {r.config: r for r in runs}
    base = {delta: by_config[c].total if c in by_config else None for delta, c in OURS.items()}
    head = (
        "| system | CPU-s | Spark | Airflow | ledger DB | Airflow share | / ours-tight | / ours-loose "
        "| peak GiB | met tight | met loose | span s |"
    )
    lines = [head, "|" + "---|" * 12]
    for run in runs:
        ledger = run.cpu.get("ledger-db")
        met = {
            d: "-" if run.config == OURS[o] else _met(run, deadlines[d])
            for d, o in (("tight", "loose"), ("loose", "tight"))
        }
        lines.append(
            f"| {run.config} | {run.total:.1f} | {run.cpu.get('spark', 0.0):.1f} | "
            f"{run.airflow:.1f} | {'-' if ledger is None else f'{ledger:.1f}'} | "
            f"{run.airflow / run.total:.0%} | {_ratio(run.total, base['tight'])} | "
            f"{_ratio(run.total, base['loose'])} | "
            f"{run.peak_rss / GIB:.2f} | {met['tight']} | {met['loose']} | {run.span_s:.0f} |"
        )
    return "\n".join(lines)


def per_query(
    runs: Sequence[SystemRun], deadlines: Mapping[str, Mapping[str, float]], costs: Mapping[str, float]
) -> str:
    """Per query: its single-batch cost, deadlines, and each system's ready time (seconds after
    the close; T/L when it met the tight/loose deadline, t/l when it missed it, x for a wrong or
    missing result) and busy seconds against ours-loose's.
    """
    names = [r.config for r in runs]
    lines = [
        "| query | 1-batch s | due tight/loose | "
        + " | ".join(f"{n} ready" for n in names)
        + " | "
        + " | ".join(f"{n} busy" for n in names)
        + " |",
        "|" + "---|" * (3 + 2 * len(names)),
    ]
    base = next((r for r in runs if r.config == OURS["loose"]), None)
    for query, cost in costs.items():
        tight, loose = deadlines["tight"][query], deadlines["loose"][query]
        cells, busy = [], []
        for run in runs:
            result = run.queries.get(query)
            if query in run.refused:
                cells.append("refused")
                busy.append("-")
                continue
            if result is None or result.ready_after_close is None:
                cells.append("x")
                busy.append("-")
                continue
            marks = ""
            for delta, due, letter in (("tight", tight, "t"), ("loose", loose, "l")):
                if run.config == OURS["loose" if delta == "tight" else "tight"]:
                    continue
                marks += letter.upper() if result.ready_after_close <= due else letter
            cells.append(f"{result.ready_after_close:.1f} {marks if result.exact else 'x'}")
            mine = None if base is None else base.queries.get(query)
            ratio = (
                ""
                if mine is None or not mine.busy_s or result.busy_s is None
                else f" ({result.busy_s / mine.busy_s:.1f}x)"
            )
            busy.append("-" if result.busy_s is None else f"{result.busy_s:.1f}{ratio}")
        lines.append(f"| {query} | {cost:.1f} | {tight:.0f}/{loose:.0f} | " + " | ".join(cells + busy) + " |")
    return "\n".join(lines)


def airflow_per_task(runs: Sequence[SystemRun]) -> str:
    """Airflow's CPU per task instance, for the systems Airflow drives."""
    lines = [
        "| system | task instances | tries | task-process CPU-s | per task | all of Airflow per task |",
        "|" + "---|" * 6,
    ]
    for run in runs:
        if not run.task_instances:
            continue
        tasks = run.cpu.get("tasks", 0.0)
        lines.append(
            f"| {run.config} | {run.task_instances} | {run.task_attempts} | {tasks:.1f} | "
            f"{tasks / run.task_instances:.2f} | {run.airflow / run.task_instances:.2f} |"
        )
    return "\n".join(lines)


def parts(runs: Sequence[SystemRun]) -> str:
    """Each run's CPU-seconds by process, as measured."""
    return "\n".join(f"{r.config}: " + ", ".join(f"{k} {v:.1f}" for k, v in r.cpu.items()) for r in runs)
