"""What a DAG's past jobs and windows teach `airflow_iqp.learning`: cost observations, the cost
models fitted from them, and the input its finished windows received. The callers are
`ledger.store`'s, which re-exports these functions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from airflow_iqp.constants import CostSource, ExecutionPath, JobKind, WindowStatus
from airflow_iqp.learning.cost import RECENT, Observation
from airflow_iqp.learning.rate import RECENT_WINDOWS, WindowInput
from airflow_iqp.ledger import lookup
from airflow_iqp.ledger.models import Batch, CostModel, CostObservation, Window, utcnow
from airflow_iqp.validation import whole_number

if TYPE_CHECKING:
    from collections.abc import Mapping
    from datetime import datetime

    from sqlalchemy.orm import Session


def record_cost_observation(
    session: Session,
    dag_id: str,
    path: ExecutionPath,
    kind: JobKind,
    size: int,
    seconds: float,
    observed_at: datetime | None = None,
) -> int:
    """One measured run: `size` is rows for a partial, partials for a merge."""
    obs = CostObservation(
        query_id=lookup.query_id(session, dag_id),
        path=path,
        kind=kind,
        size=size,
        seconds=seconds,
        observed_at=observed_at or utcnow(),
    )
    session.add(obs)
    session.flush()
    return obs.id


def cost_observations(session: Session, dag_id: str, path: ExecutionPath, limit: int = RECENT) -> list[Observation]:
    """The DAG's newest `limit` partials and newest `limit` merges on `path`, newest first.

    Limited per kind, as `learning.fit_cost` fits them: a window runs several partials and one
    merge, so one limit over both would crowd the merges out.
    """
    query_id = lookup.query_id(session, dag_id)
    found: list[tuple[int, Observation]] = []
    for kind in JobKind:
        rows = session.execute(
            select(CostObservation.id, CostObservation.size, CostObservation.seconds, CostObservation.observed_at)
            .where(
                CostObservation.query_id == query_id,
                CostObservation.path == ExecutionPath(path),
                CostObservation.kind == kind,
            )
            .order_by(CostObservation.observed_at.desc(), CostObservation.id.desc())
            .limit(whole_number(limit, "limit", minimum=1))
        )
        found += [(r.id, Observation(kind, r.size, r.seconds, r.observed_at)) for r in rows]
    found.sort(key=lambda pair: (pair[1].observed_at, pair[0]), reverse=True)
    return [obs for _, obs in found]


def save_cost_model(
    session: Session,
    dag_id: str,
    path: ExecutionPath,
    document: Mapping[str, Any],
    source: CostSource | str,
    fitted_at: datetime | None = None,
) -> int:
    """Store a model fitted for the DAG on `path`; the newest is the one `latest_cost_model` gives.

    `document` is `LearnedCost.to_dict()` (its `observations` is kept in a column of its own;
    a model file's document may have none: 0).
    """
    model = CostModel(
        query_id=lookup.query_id(session, dag_id),
        path=ExecutionPath(path),
        fitted_at=fitted_at or utcnow(),
        observations=whole_number(document.get("observations", 0), "the model's observations"),
        source=CostSource(source),
        document=dict(document),
    )
    session.add(model)
    session.flush()
    return model.id


def latest_cost_model(session: Session, dag_id: str, path: ExecutionPath) -> dict[str, Any] | None:
    """The document of the DAG's newest model on `path`, or None before the first fit."""
    return session.scalar(
        select(CostModel.document)
        .where(CostModel.query_id == lookup.query_id(session, dag_id), CostModel.path == ExecutionPath(path))
        .order_by(CostModel.fitted_at.desc(), CostModel.id.desc())
        .limit(1)
    )


def window_inputs(session: Session, dag_id: str, limit: int = RECENT_WINDOWS) -> list[WindowInput]:
    """What the DAG's newest `limit` merged windows processed, newest first: files and rows.

    Files are the units of input: the frozen files of the stream with the most (streams aligned
    by path hold one file per unit each; one stream's unit is a file), quarantined ones left
    out. Rows are the window's current result's input rows; a window merged without a row
    count is left out.
    """
    windows = session.execute(
        select(Window.id, Window.window_start, Window.window_end, Window.actual_tuples)
        .where(
            Window.query_id == lookup.query_id(session, dag_id),
            Window.status == WindowStatus.MERGED,
            Window.actual_tuples.is_not(None),
        )
        .order_by(Window.window_start.desc())
        .limit(whole_number(limit, "limit", minimum=1))
    ).all()
    files: dict[int, dict[str, int]] = {w.id: {} for w in windows}
    batches = session.execute(
        select(Batch.window_id, Batch.files).where(Batch.window_id.in_(files), Batch.files.is_not(None))
    )
    for window_id, frozen in batches:
        for stream, uris in frozen.items():
            files[window_id][stream] = files[window_id].get(stream, 0) + len(uris)
    return [
        WindowInput(w.window_start, w.window_end, max(files[w.id].values(), default=0), w.actual_tuples)
        for w in windows
    ]
