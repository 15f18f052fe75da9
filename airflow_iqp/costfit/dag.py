"""A declared DAG's query on the user's own files: the source `iqp fit-cost-model --dag` measures.

The DAG file is run as Airflow parses it, so the query, streams and static inputs are the
declaration's own. Every stream is listed once and its files aligned across streams as the
scheduler aligns them (`streams.assign`): a unit is one relative path present in every stream,
and all units of all windows count, in arrival order. Files on an object store are copied into
the work directory once, before anything is timed; the specs are the operators' (`partial_spec`,
`merge_spec`), so the jobs measured are the jobs a window runs.
"""

from __future__ import annotations

import runpy
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from airflow_iqp.operators.window import merge_spec, partial_spec
from airflow_iqp.runtime.inputs import InputSpec
from airflow_iqp.streams.assign import ORIGIN, window_start
from airflow_iqp.streams.fetch import local_path

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from airflow_iqp.declaration import Declaration
    from airflow_iqp.spark.jobs.spec import MergeSpec, PartialSpec
    from airflow_iqp.streams.assign import InputUnit, WindowSelection


def load_declaration(dag_file: Path, dag_id: str | None = None) -> Declaration:
    """The intermittent query the DAG file declares (the one named `dag_id` if it declares several)."""
    from airflow.sdk import DAG

    from airflow_iqp.operators.plan import PlanWindowOperator

    if not dag_file.is_file():
        raise ValueError(f"DAG file {dag_file} does not exist")
    namespace = runpy.run_path(str(dag_file))
    found: dict[str, Declaration] = {}
    for dag in (value for value in namespace.values() if isinstance(value, DAG)):
        plan = dag.task_dict.get("plan")
        if isinstance(plan, PlanWindowOperator):
            found[dag.dag_id] = plan.declaration
    if dag_id is not None:
        if dag_id not in found:
            raise ValueError(f"{dag_file} declares no intermittent query {dag_id!r}; it declares {sorted(found)}")
        return found[dag_id]
    if not found:
        raise ValueError(f"{dag_file} declares no intermittent query (no DAG built by intermittent_query)")
    if len(found) > 1:
        raise ValueError(
            f"{dag_file} declares {len(found)} intermittent queries ({', '.join(sorted(found))}); "
            "name one with --dag-id"
        )
    return next(iter(found.values()))


def all_units(declaration: Declaration, now: datetime | None = None) -> tuple[list[InputUnit], WindowSelection]:
    """Every unit of the declaration's streams in every window, in arrival order, and the
    selection they came from (its `unmatched` and `unassigned` files are left out).
    """
    now = now or datetime.now(UTC)
    current = window_start(now, declaration.window, ORIGIN)
    selection = InputSpec.of(declaration.streams, current, declaration.window).look(now)
    units = [*selection.earlier, *selection.units, *selection.later]
    units.sort(key=lambda unit: (unit.arrived, unit.relative))
    return units, selection


@dataclass(frozen=True)
class DagSource:
    """A declaration's query over `files` (per unit, each stream's local path)."""

    declaration: Declaration
    files: tuple[dict[str, str], ...]

    @classmethod
    def fetch(cls, declaration: Declaration, units: Sequence[InputUnit], cache: Path) -> DagSource:
        """The source over `units`, their files local (object-store files copied under `cache`)."""
        streams = declaration.streams
        return cls(
            declaration,
            tuple(
                {f.stream: local_path(f.uri, streams[f.stream].conn_id, cache) for f in unit.files} for unit in units
            ),
        )

    @property
    def name(self) -> str:
        """The query's name."""
        return self.declaration.name

    @property
    def units(self) -> int:
        """Units of input to cut."""
        return len(self.files)

    def partial_spec(self, units: range, output: Path) -> PartialSpec:
        """The partial job over `units`, as the operators build it."""
        chosen = [self.files[i] for i in units]
        by_stream = {name: [unit[name] for unit in chosen] for name in self.declaration.streams}
        return partial_spec(self.declaration, by_stream, output, schema_files={})

    def merge_spec(self, partials: Sequence[Path], output: Path) -> MergeSpec:
        """The merge job over `partials`."""
        return merge_spec(self.declaration, [str(p) for p in partials], output)
