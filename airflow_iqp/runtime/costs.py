"""The cost model and arrival rate a window is planned with, and learning from every job.

A declaration gives a fitted model file, or "learn": then the model is the newest one the
ledger holds for the DAG and execution path, refit after every batch and merge from the DAG's
own observations (airflow_iqp.learning). Before there is one, the window runs the calibration
plan (see `operators.plan`): a one-unit partial as soon as one unit has landed, the rest as one
batch once the input is final, then the merge — two partial sizes and a merge, which is what
`learning.fit_cost` needs for a first model.

A learned model starts from a prior when there is one (`prior_model`: for a packaged query,
the packaged cost_models/<query>.json's section for the path, or one fitted on this machine in
`[iqp] prior_models`): it keeps the prior's shape and
learns its scale and intercept (`learning.prior`), instead of inventing a slope from batches
of about one size. `planning_model` refits from the ledger's observations with that prior,
the same fit `observe` saves after every job for the UI.

A declared rate is used as given; "learn" takes the rate of the DAG's last windows, and with no
history yet the window runs as one batch once its input is final.

A refit learned model is planned with a safety margin from its own residuals: every prediction
times 1 + mean + MARGIN_K standard deviations of its relative residuals, per kind (pessimistic
estimates as in Mayer et al.'s latency models, which bias the mean by a multiple of the
spread). Jobs in the environment where they really run then overrun their plan rarely, at the
price of more batches. A calibration's spread rests on two or three timings and means nothing
yet, and a fitted file has none, so both are planned with as they are.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_iqp.constants import CostSource, JobKind
from airflow_iqp.declaration import EXAMPLE_COST_MODELS, ArrivalRate
from airflow_iqp.exceptions import LedgerLookupError
from airflow_iqp.learning import LearnedCost, NotEnoughObservations, Spread, fit_cost, learned_rate
from airflow_iqp.learning.prior import SPREAD_RATIO
from airflow_iqp.ledger import store
from airflow_iqp.planning.cost_model_file import FittedCostModel, fitted_paths, load_cost_model
from airflow_iqp.queries import EXAMPLE_QUERIES
from airflow_iqp.runtime.sizing import file_costs
from airflow_iqp.settings import prior_models

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from airflow_iqp.constants import ExecutionPath
    from airflow_iqp.declaration import CostModel, Declaration
    from airflow_iqp.planning.record import PlanRecord

MARGIN_K = 2.0  # standard deviations of the residuals a refit model's plans allow for


def prior_model(declaration: Declaration, path: ExecutionPath) -> FittedCostModel | None:
    """What a learned model on `path` starts from: for a packaged query (named, not a file of
    the user's) its section for the path in `[iqp] prior_models` (fitted on this machine) if that
    has one, else the packaged model's; None otherwise. (A DAG that declares a fitted file plans
    with it as it is and learns nothing.)
    """
    if declaration.query.path.resolve() != (EXAMPLE_QUERIES / f"{declaration.name}.sql").resolve():
        return None
    fitted = [d / f"{declaration.name}.json" for d in (prior_models(), EXAMPLE_COST_MODELS) if d is not None]
    found = next((f for f in fitted if path in fitted_paths(f)), None)
    return None if found is None else load_cost_model(found, path)


def learned_model(session: Session, declaration: Declaration, path: ExecutionPath) -> LearnedCost | None:
    """The learning DAG's model fitted from its observations on `path` with its prior, or None
    (not learning, or nothing to fit yet).
    """
    if not declaration.learns_cost:
        return None
    try:
        return fit_cost(
            store.cost_observations(session, declaration.dag_id, path), path, prior_model(declaration, path)
        )
    except NotEnoughObservations:
        return None


def expected_model(session: Session, declaration: Declaration, path: ExecutionPath) -> CostModel | None:
    """What the DAG's jobs on `path` are expected to take, no margin added: the fitted file's
    model, the learned one; before the DAG's first job a packaged query's prior (the packaged
    model its learning starts from), any other query's None (calibrate).
    """
    if not declaration.learns_cost:
        return declaration.fitted_model(path)
    learned = stored_model(session, declaration.dag_id, path)
    return prior_model(declaration, path) if learned is None else learned


def planning_model(session: Session, declaration: Declaration, path: ExecutionPath) -> CostModel | None:
    """The model to plan with on `path`: `expected_model`, with its margin once refit."""
    model = expected_model(session, declaration, path)
    if isinstance(model, LearnedCost) and model.source is CostSource.REFIT:
        return model.with_margin(k=MARGIN_K)
    return model


def cut_cost(
    session: Session, declaration: Declaration, path: ExecutionPath, plan: PlanRecord, units: int
) -> float | None:
    """What a batch of `units` (files, or paths across aligned streams) is predicted to take when
    it is cut to run, planned or dynamic: `expected_model` now, refit after every job, times the
    margin the window's plan recorded (taking it out again gives what the model expects,
    `demo.summary.expected_cost`). A window is planned at its start, before the previous window's
    last jobs ran; its batches are priced with what those jobs taught. None without a model or a
    rate in files (a calibration): the plan's cost stays.
    """
    model = expected_model(session, declaration, path)
    if model is None or plan.rows_per_file is None:
        return None
    margin = (plan.margin or {}).get("partial", 0.0)
    return file_costs(model, plan.rows_per_file).cost(units) * (1 + margin)


def measures_intercept(session: Session, declaration: Declaration, path: ExecutionPath) -> bool:
    """Whether a dynamic window's first batch is one unit: the DAG learns its model and its
    recent partials all have about one size (dynamic batches do), so the fit has learned only a
    scale and its per-job cost (the intercept) is the prior's, measured on other sizes, often
    another machine. MinBatch rests on that cost (a batch's overhead against its data), and so
    do predictions of any other size. One small batch gives the fit two sizes to learn the
    intercept from (`learning.prior`), as a calibration's first job does.
    """
    if not declaration.learns_cost:
        return False
    observed = store.cost_observations(session, declaration.dag_id, path)
    sizes = [o.size for o in observed if o.kind is JobKind.PARTIAL]
    return not sizes or max(sizes) < SPREAD_RATIO * max(min(sizes), 1)


def planning_margin(session: Session, declaration: Declaration, path: ExecutionPath) -> dict[str, float] | None:
    """The relative margins `planning_model` adds per kind (what the safety costs: every
    prediction is that much longer), or None when it adds none.
    """
    learned = stored_model(session, declaration.dag_id, path) if declaration.learns_cost else None
    if learned is None or learned.source is not CostSource.REFIT:
        return None
    return {
        "k": MARGIN_K,
        "partial": learned.partial_spread.margin(k=MARGIN_K),
        "merge": learned.merge_spread.margin(k=MARGIN_K),
    }


def stored_model(session: Session, dag_id: str, path: ExecutionPath) -> LearnedCost | None:
    """The DAG's newest learned model on `path` as `observe` stored it, or None before the first
    fit (or before its first plan registered the DAG: another DAG's plan may price it).
    """
    try:
        document = store.latest_cost_model(session, dag_id, path)
    except LedgerLookupError:
        return None
    return None if document is None else LearnedCost.from_dict(document)


def planning_rate(session: Session, declaration: Declaration) -> ArrivalRate | None:
    """The rate to plan with: declared, else learned from the last windows (None: no history)."""
    if isinstance(declaration.rate, ArrivalRate):
        return declaration.rate
    try:
        learned = learned_rate(store.window_inputs(session, declaration.dag_id))
    except LedgerLookupError:  # not registered yet: no history
        return None
    return None if learned is None else ArrivalRate(learned.files_per_second, learned.rows_per_file)


def observe(
    session: Session,
    declaration: Declaration,
    path: ExecutionPath,
    kind: JobKind,
    size: int,
    seconds: float,
) -> LearnedCost | None:
    """Record one job's cost; a learning DAG's model is refit and saved at once, so the next
    plan (or replan) uses it. A DAG with a fitted file stores that file's model once, so the
    monitor and the forecasts read the model the plan uses from the ledger either way.
    Returns the refit model, or None when nothing was refit.
    """
    store.record_cost_observation(session, declaration.dag_id, path, kind, size, seconds)
    if not declaration.learns_cost:
        stored = file_model(declaration, path).to_dict()
        if store.latest_cost_model(session, declaration.dag_id, path) != stored:
            store.save_cost_model(session, declaration.dag_id, path, stored, CostSource.FILE)
        return None
    model = learned_model(session, declaration, path)
    if model is None:
        return None
    store.save_cost_model(session, declaration.dag_id, path, model.to_dict(), model.source)
    return model


def file_model(declaration: Declaration, path: ExecutionPath) -> LearnedCost:
    """The declared fitted file's model on `path` as the ledger stores models: it has no
    residuals of this DAG's jobs, so its spread is none (count 0).
    """
    fitted = declaration.fitted_model(path)
    none = Spread(mean=0.0, std=0.0, p90=0.0, p95=0.0, count=0)
    return LearnedCost(path, CostSource.FILE, fitted.partial, fitted.merge, none, none)
