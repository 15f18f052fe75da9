"""What to measure for one query on one execution path, and measuring it.

A *split* processes all units of the source as k batches: k partial jobs, then one merge of
the k partials. Splits at doubling k give partial timings at halving batch sizes and merge
timings at doubling partial counts, and their totals are the cost-by-batches curve (the
paper's Fig. 4). A partial's size is the rows its commit marker says it read, summed over
streams: the unit the planner's cost models use.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_iqp.costfit.batches import split
from airflow_iqp.spark.jobs.output import MARKER, read_marker

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from airflow_iqp.costfit.batches import Source
    from airflow_iqp.costfit.runners import Runner


@dataclass(frozen=True)
class Plan:
    """Splits to run (k batches each), then single timed partials of the first n units, for each n."""

    splits: tuple[int, ...]
    single_partials: tuple[int, ...] = ()

    def jobs(self) -> int:
        """How many jobs the plan runs, for the progress bar."""
        return sum(k + 1 for k in self.splits) + len(self.single_partials)


@dataclass
class Measurements:
    """Timed jobs of one query on one execution path."""

    partial: list[dict[str, Any]] = field(default_factory=list)  # {"tuples", "seconds", "batches"}
    merge: list[dict[str, Any]] = field(default_factory=list)  # {"partials", "seconds"}

    def split_totals(self) -> dict[int, float]:
        """Seconds to process all units per number of batches: all partials plus the merge."""
        totals = {m["partials"]: m["seconds"] for m in self.merge}
        for p in self.partial:
            if p["batches"] in totals:
                totals[p["batches"]] += p["seconds"]
        return dict(sorted(totals.items()))


def input_rows(output: Path) -> int:
    """Rows a committed partial read, over all its streams (its marker's `input_rows`)."""
    return sum(read_marker(output)["input_rows"].values())


def measure(
    source: Source,
    runner: Runner,
    plan: Plan,
    workdir: Path,
    step: Callable[[str], None],
    merge_inputs: Runner | None = None,
    warm_up: bool = False,
) -> Measurements:
    """Run `plan` with outputs under `workdir`; `warm_up` first runs an untimed partial and merge,
    so JIT and code generation of the query's first run do not land on the one-batch split.

    With `merge_inputs` (the in-process runner) the splits' partial outputs are made untimed by
    it (or reused from an earlier measurement in the same `workdir`), and only their merges are
    timed by `runner`: on the spark-submit path every job pays ~10 s of start-up, too dear to run
    every partial of every split.
    """
    result = Measurements()
    name = source.name
    if warm_up:
        first = workdir / "warm-up" / "batch-0000"
        runner.partial(source.partial_spec(range(0, 1), first))
        runner.merge(source.merge_spec([first], workdir / "warm-up" / "result"))
    for k in plan.splits:
        outputs = []
        for i, units in enumerate(split(source.units, k)):
            output = workdir / f"split-{k}" / f"batch-{i:04d}"
            if merge_inputs is None:
                seconds = runner.partial(source.partial_spec(units, output))
                result.partial.append({"tuples": input_rows(output), "seconds": seconds, "batches": k})
            elif not (output / MARKER).is_file():  # not left by an earlier path's measurement
                merge_inputs.partial(source.partial_spec(units, output))
            outputs.append(output)
            step(f"{name} partial {i + 1}/{k}")
        seconds = runner.merge(source.merge_spec(outputs, workdir / f"split-{k}" / "result"))
        result.merge.append({"partials": k, "seconds": seconds})
        step(f"{name} merge of {k}")
    for n in plan.single_partials:
        output = workdir / f"single-{n}"
        seconds = runner.partial(source.partial_spec(range(0, n), output))
        result.partial.append({"tuples": input_rows(output), "seconds": seconds, "batches": None})
        step(f"{name} partial of {n} unit(s)")
    return result
