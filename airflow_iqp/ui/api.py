"""The monitor's read-only JSON API and its static bundle, one FastAPI app that the UI plugin
mounts at `/iqp`.

Airflow mounts plugin apps without any authentication, so every route under `/api/v1` needs
an authenticated Airflow user (401 otherwise) and per-DAG routes read access to their
`dag_id`; lists keep only the DAGs the user may read, and the dispatcher redacts the others'
requests. Only `/static` (the bundle: code, no data) is public. The dependencies used here call
`get_auth_manager()` themselves: Airflow's `AuthManagerDep` reads `request.app.state`, which
in a mounted app is this app's state, not the API server's.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated

from airflow.api_fastapi.app import get_auth_manager
from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
from airflow.api_fastapi.core_api.security import GetUserDep, requires_access_dag, requires_authenticated
from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query, status
from fastapi.staticfiles import StaticFiles

from airflow_iqp.exceptions import InvalidSetting
from airflow_iqp.ledger import session_scope
from airflow_iqp.runtime import forecasts
from airflow_iqp.settings import DispatchSettings
from airflow_iqp.spark.paths import submit_cores
from airflow_iqp.ui import STATIC, capacity, cores, read, risk, views
from airflow_iqp.ui.models import (
    CapacityView,
    DispatcherView,
    MissesView,
    QueriesResponse,
    WindowDetail,
    WindowsResponse,
)

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from airflow.api_fastapi.auth.managers.models.base_user import BaseUser
    from sqlalchemy.orm import Session

API_PREFIX = "/api/v1"

ReadsDag = Depends(requires_access_dag("GET", DagAccessEntity.RUN))
SPARK_CONN_ID = "iqp_spark"  # intermittent_query()'s default Spark connection: whose cores a grant naming none gets


def readable_dags(user: BaseUser) -> set[str]:
    """The DAG ids the user may read, as the configured auth manager says."""
    return get_auth_manager().get_authorized_dag_ids(user=user, method="GET")


def create_app() -> FastAPI:
    """The app the plugin mounts: cheap to build (every Airflow process imports plugins)."""
    app = FastAPI(title="airflow-iqp monitor", docs_url=None, redoc_url=None, openapi_url=None)
    app.include_router(router())
    app.mount("/static", StaticFiles(directory=STATIC, check_dir=False), name="static")
    return app


def router() -> APIRouter:
    """The JSON API; see the README's section on the UI for what each route returns."""
    api = APIRouter(prefix=API_PREFIX, dependencies=[Depends(requires_authenticated())])

    @api.get("/queries")
    def queries(
        user: GetUserDep, limit: Annotated[int, Query(ge=1, le=200, description="windows per query")] = 20
    ) -> QueriesResponse:
        """Every query the user may read, with its newest windows."""
        now, readable = _now(), readable_dags(user)
        with _ledger() as session:
            live = _forecasts(session, now)
            overviews = []
            for q in read.queries(session):
                if q.dag_id in readable:
                    model = read.cost_model(session, q.dag_id)
                    rows = [risk.applied(w, live) for w in read.windows(session, q, limit)]
                    overviews.append(views.overview(q, rows, now, model))
        return QueriesResponse(now=now, queries=overviews)

    @api.get("/dags/{dag_id}/windows", dependencies=[ReadsDag])
    def dag_windows(
        dag_id: str,
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
        before: Annotated[datetime | None, Query(description="only windows starting before this time")] = None,
    ) -> WindowsResponse:
        """The DAG's windows, newest first."""
        now = _now()
        with _ledger() as session:
            q = _query(session, dag_id)
            model = read.cost_model(session, q.dag_id)
            live = _forecasts(session, now)
            rows = [risk.applied(w, live) for w in read.windows(session, q, limit, before)]
        return WindowsResponse(dag_id=dag_id, windows=[views.summarize(w, now, model) for w in rows])

    @api.get("/dags/{dag_id}/windows/{window_id}", dependencies=[ReadsDag])
    def dag_window(dag_id: str, window_id: int) -> WindowDetail:
        """One window of the DAG and its chart."""
        with _ledger() as session:
            q = _query(session, dag_id)
            return _detail(session, q, read.window(session, q, window_id), f"window {window_id}")

    @api.get("/dags/{dag_id}/runs/{run_id}/window", dependencies=[ReadsDag])
    def run_window(dag_id: str, run_id: str) -> WindowDetail:
        """The window a DAG run processes, and its chart."""
        with _ledger() as session:
            q = _query(session, dag_id)
            return _detail(session, q, read.window_of_run(session, q, run_id), f"window for run {run_id!r}")

    @api.get("/dispatcher")
    def dispatcher(
        user: GetUserDep, hours: Annotated[float, Query(gt=0, le=24 * 14, description="grants this recent")] = 6
    ) -> DispatcherView:
        """Resources and holders, the waiting queue in policy order, and recent grants."""
        now, readable = _now(), readable_dags(user)
        policy = DispatchSettings.load().policy
        with _ledger() as session:
            rows = read.dispatcher(session, now - timedelta(hours=hours))
        return views.dispatcher(rows, policy, now, readable)

    @api.get("/capacity")
    def capacity_over_time(
        user: GetUserDep,
        hours: Annotated[float, Query(gt=0, le=24 * 14, description="the chart's length, up to now")] = 6,
        confidence: Annotated[float, Query(gt=0, lt=1, description="the plan's probability of every deadline")] = 0.95,
    ) -> CapacityView:
        """The cores over time: used by the grants, planned for the queries' deadlines, leased by the BTU."""
        now, readable = _now(), readable_dags(user)
        since = now - timedelta(hours=hours)
        default = _default_cores()
        with _ledger() as session:
            rows = capacity.capacity_rows(session, since, now)
        return cores.view(
            rows,
            since=since,
            now=now,
            confidence=confidence,
            btu=(DispatchSettings.load().billing_unit_seconds, "[iqp] billing_unit_seconds"),
            default_cores=default,
            readable=readable,
        )

    @api.get("/misses")
    def misses(
        user: GetUserDep, days: Annotated[float, Query(gt=0, le=366, description="misses this recent")] = 7
    ) -> MissesView:
        """Deadline misses and the open windows at risk of one, of the DAGs the user may read."""
        now, readable = _now(), readable_dags(user)
        since = now - timedelta(days=days)
        with _ledger() as session:
            mine = [q for q in read.queries(session) if q.dag_id in readable]
            models = {q.dag_id: read.cost_model(session, q.dag_id) for q in mine}
            live = _forecasts(session, now)
            rows = [risk.applied(w, live) for w in read.watched_windows(session, mine, since)]
        return views.misses(rows, since, now, models)

    return api


def _now() -> datetime:
    return datetime.now(UTC)


def _ledger() -> AbstractContextManager[Session]:
    """A read-only transaction on the ledger (it does not take SQLite's write lock)."""
    return session_scope(read_only=True)


def _forecasts(session: Session, now: datetime) -> dict[int, datetime]:
    """Every open window's predicted finish as of now (the tasks keep the ledger's own current)."""
    settings = DispatchSettings.load()
    return forecasts.forecasts(session, settings.policy, settings.resources, now)


def _default_cores() -> int | None:
    """The cores a grant naming none runs on: the Spark connection's `cores` extra (None: it sets
    none, or there is no such connection).
    """
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        return submit_cores(SPARK_CONN_ID, None)
    except (AirflowNotFoundException, InvalidSetting):
        return None


def _query(session: Session, dag_id: str) -> read.QueryRow:
    found = read.query_of_dag(session, dag_id)
    if found is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"DAG {dag_id!r} has no intermittent query in the ledger")
    return found


def _detail(session: Session, q: read.QueryRow, w: read.WindowRow | None, what: str) -> WindowDetail:
    if w is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"the ledger has no {what} of DAG {q.dag_id!r}")
    now = _now()
    live = risk.applied(w, _forecasts(session, now))
    return views.detail(live, now, read.cost_model(session, q.dag_id))
