"""What `iqp simulate` shows: the experiment's setting, the table of Fig. 7, and its picture."""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_iqp.simulation.protocol import DELTAS, min_batch_summary

if TYPE_CHECKING:
    from pathlib import Path

    from matplotlib.figure import Figure

    from airflow_iqp.planning.capacity import Capacity
    from airflow_iqp.simulation.capacity import Run
    from airflow_iqp.simulation.protocol import Experiment, Table

CELL = 16  # characters per column of the table


def setting(experiment: Experiment, source: str, order: str, files: int | None) -> list[str]:
    """What was simulated: the queries' source, MinBatch's parameters, the deadline order, the
    load, and each query's MinBatch (in files of the stream if `files` is given).
    """
    queries, window_end, last = experiment.queries, experiment.window_end, experiment.workload(DELTAS[-1])
    work = experiment.single_batch_cost
    return [
        f"{len(queries)} queries from {source}",
        f"alpha {experiment.alpha:g}, tau_max {experiment.tau_max:g} s, window end {window_end:g} s, "
        f"deadlines staggered in {order}: {' < '.join(experiment.order)}",
        f"sum of single-batch costs {work:.1f} s ({work / window_end:.3f}x the window); "
        f"largest deadline at delta {DELTAS[-1]:g}: {max(q.deadline for q in last):.1f} s",
        min_batch_summary(queries, experiment.alpha, experiment.tau_max, files),
    ]


def table_lines(table: Table) -> list[str]:
    """The table: one row per delta, one cell (deadlines met / queries, normalized cost) per column."""
    lines = [
        "cells: deadlines met / queries, normalized cost (total over the sum of single-batch costs)",
        f"{'delta':>6}" + "".join(f"{c.name:>{CELL}}" for c in table.columns),
    ]
    for delta, row in table.rows.items():
        cells = "".join(f"{f'{r.met_count}/{table.queries} {r.normalized_cost:.2f}x':>{CELL}}" for r in row)
        lines.append(f"{delta:>6.1f}{cells}")
    return lines


def capacity_lines(rows: dict[float, tuple[Capacity, list[Run]]], queries: int, btu: float) -> list[str]:
    """The elastic-capacity table: per delta, the plan (cores while the windows are open and
    after they close) and per controller the deadlines met and the billed core-seconds.
    """
    first = next(iter(rows.values()))[0]
    controllers = [r.controller for r in next((runs for _, runs in rows.values() if runs), [])]
    lines = [
        f"speedup: {first.speedup.source}; capacity at confidence {first.confidence:g}; BTU {btu:g} s",
        "plan: cores while the windows are open / after they close (who needs the peak); "
        "cells: deadlines met / queries, billed core-seconds (most cores held)",
        f"{'delta':>6} {'plan':>28}" + "".join(f"{name:>{CELL + 6}}" for name in controllers),
    ]
    for delta, (model, runs) in rows.items():
        cores = "/".join("-" if p.cores is None else str(p.cores) for p in (model.open, model.closed))
        plan = f"{cores} ({model.peak.needed_by})"
        if not runs:
            lines.append(
                f"{delta:>6.1f} {plan:>28}  no capacity up to {model.speedup.max_cores} cores meets every deadline"
            )
            continue
        cells = "".join(f"{f'{r.result.met_count}/{queries} {r.billed:.0f} ({r.peak})':>{CELL + 6}}" for r in runs)
        lines.append(f"{delta:>6.1f} {plan:>28}{cells}")
    return lines


def _cost_label(value: float) -> str:
    """As in the table, without its 'x'; whole numbers from 10 on."""
    return f"{value:.2f}" if value < 10 else f"{value:.0f}"


def figure(table: Table, title: str) -> Figure:
    """Two panels over delta, one labelled bar per column: deadlines met (top) and normalized
    cost (bottom, on a log scale when it spans more than a decade, with 1 + alpha marked).
    A traditional baseline is hatched in the colour of its policy, an idling column dotted.
    """
    # Imported here: matplotlib takes seconds to import, and only --png needs it.
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    deltas = list(table.rows)
    colours = {policy: f"C{i}" for i, policy in enumerate(dict.fromkeys(c.policy for c in table.columns))}
    width = 0.8 / len(table.columns)
    fig = Figure(figsize=(11, 8), dpi=100, layout="constrained")
    met, cost = fig.subplots(2, 1, sharex=True)
    for j, column in enumerate(table.columns):
        where = [i + (j - (len(table.columns) - 1) / 2) * width for i in range(len(deltas))]
        colour = colours[column.policy]
        style = {
            "width": width,
            "label": column.name if column.min_batch else f"{column.name} (no MinBatch)",
            "color": colour if column.min_batch and not column.idle else "white",
            "edgecolor": colour,
            "hatch": "..." if column.idle else None if column.min_batch else "///",
        }
        bars = met.bar(where, [row[j].met_count for row in table.rows.values()], **style)
        met.bar_label(bars, fontsize=7)
        bars = cost.bar(where, [row[j].normalized_cost for row in table.rows.values()], **style)
        cost.bar_label(bars, fmt=_cost_label, fontsize=7, rotation=90, padding=2)
    met.set_ylim(0, table.queries * 1.15)
    met.set_ylabel(f"deadlines met (of {table.queries})")
    met.set_title("Deadlines met (higher is better)")
    costs = [r.normalized_cost for row in table.rows.values() for r in row]
    if max(costs) > 10 * min(costs):
        cost.set_yscale("log")
        cost.set_ylim(min(costs) / 2, max(costs) * 4)
        cost.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    else:
        cost.set_ylim(0, max(costs) * 1.25)
    limit = f"1 + alpha = {1 + table.alpha:g}"
    cost.axhline(1 + table.alpha, color="grey", linestyle="--", linewidth=1, label=limit)
    cost.set_ylabel("normalized cost\n(total / sum of single-batch costs)")
    cost.set_title("Cost (lower is better)")
    cost.set_xlabel("delta: deadline of the i-th query = window end + delta x (single-batch costs of queries 1..i)")
    cost.set_xticks(range(len(deltas)), [f"{d:.1f}" for d in deltas])
    for axes in (met, cost):
        axes.grid(axis="y", alpha=0.4)
        axes.set_axisbelow(True)
    handles, labels = cost.get_legend_handles_labels()
    line = labels.index(limit)  # the 1 + alpha line goes after the policies
    handles.append(handles.pop(line))
    labels.append(labels.pop(line))
    fig.legend(handles, labels, loc="outside lower center", ncols=len(handles))
    fig.suptitle(title)
    return fig


def draw(table: Table, title: str, path: Path) -> None:
    """Write `figure(table, title)` to `path` as a PNG, with matplotlib's Agg renderer."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = figure(table, title)
    FigureCanvasAgg(fig)
    fig.savefig(path, format="png")
