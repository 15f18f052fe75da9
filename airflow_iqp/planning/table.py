"""A plan as a plain-text table, for the CLI and the demo."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from airflow_iqp.planning.plan import Plan


def format_plan(plan: Plan, title: str = "") -> str:
    """One row per batch and the merge, then whether the deadline holds and why not."""
    rows = [("batch", "tuples", "first..last", "release", "start", "end", "cost s")]
    for i, b in enumerate(plan.batches, 1):
        rows.append(
            (
                str(i),
                f"{b.size:,}",
                f"{b.first:,}..{b.last:,}",
                f"{b.release:.3f}",
                f"{b.start:.3f}",
                f"{b.end:.3f}",
                f"{b.cost:.3f}",
            )
        )
    if plan.merge:
        m = plan.merge
        rows.append(("merge", f"{m.partials} parts", "", "", f"{m.start:.3f}", f"{m.end:.3f}", f"{m.cost:.3f}"))
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    lines = [title] if title else []
    for n, row in enumerate(rows):
        lines.append("  ".join(cell.rjust(w) for cell, w in zip(row, widths)))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    status = "meets" if plan.feasible else "MISSES"
    lines.append(
        f"{status} deadline {plan.deadline:.3f}: finish {plan.finish:.3f}, total cost {plan.total_cost:.3f} s"
        f" ({plan.method})"
    )
    if plan.reason:
        lines.append(plan.reason)
    return "\n".join(lines)
