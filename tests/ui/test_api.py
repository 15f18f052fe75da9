"""The monitor's API in process: authentication, per-DAG authorization, filtering, redaction.

Airflow's SimpleAuthManager lets every viewer read every DAG, so the auth manager here is
SimpleAuthManager with one DAG hidden from viewers, the kind of rule FAB or Keycloak express.
Lists ask it through the same `get_authorized_dag_ids` the API server's own routes use.

Three lookups in Airflow's metadata database are answered here instead, since this process has
none: the DAGs there are (a fixed set), each DAG's team (none) and revoked tokens (none). The
browser test (test_browser.py) runs the same routes in a real API server with its database.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest
from airflow.api_fastapi.app import _AuthManagerState
from airflow.api_fastapi.auth.managers.models.resource_details import DagDetails
from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager
from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
from airflow.models.dag import DagModel
from airflow.models.revoked_token import RevokedToken
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from sqlalchemy import select

from airflow_iqp.ledger import session_scope
from airflow_iqp.ledger.models import DispatchRequest
from airflow_iqp.ui.api import create_app
from airflow_iqp.ui.models import (
    CapacityView,
    DispatcherView,
    MissesView,
    QueriesResponse,
    WindowDetail,
    WindowsResponse,
)
from tests.ui.seed import SALES_DAG, SECRET_DAG, Seeded

if TYPE_CHECKING:
    from collections.abc import Iterator

    from fastapi.dependencies.models import Dependant

DAGS = {SALES_DAG, SECRET_DAG}


class HidesSecretFromViewers(SimpleAuthManager):
    """Viewers may not read iqp_secret; admins may read everything."""

    def is_authorized_dag(self, *, method: Any, user: Any, access_entity: Any = None, details: Any = None) -> bool:
        hidden = details is not None and details.id == SECRET_DAG and user.role == "viewer"
        return not hidden and super().is_authorized_dag(
            method=method, user=user, access_entity=access_entity, details=details
        )

    def get_authorized_dag_ids(self, *, user: Any, method: Any = "GET", session: Any = None) -> set[str]:
        return {d for d in DAGS if self.is_authorized_dag(method=method, user=user, details=DagDetails(id=d))}


@pytest.fixture
def manager(monkeypatch: pytest.MonkeyPatch) -> HidesSecretFromViewers:
    monkeypatch.setenv("AIRFLOW__API_AUTH__JWT_SECRET", "monitor-tests-" + "0" * 64)
    found = HidesSecretFromViewers()
    monkeypatch.setattr(_AuthManagerState, "instance", found)
    monkeypatch.setattr(DagModel, "get_team_name", staticmethod(lambda dag_id, **_: None))
    monkeypatch.setattr(RevokedToken, "is_revoked", classmethod(lambda cls, jti, **_: False))
    return found


@pytest.fixture
def client(seeded: Seeded, manager: HidesSecretFromViewers, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    monkeypatch.setenv("AIRFLOW_CONN_IQP_DEFAULT", seeded.url)
    with TestClient(create_app(), base_url="http://testserver/") as found:
        yield found


def token(manager: SimpleAuthManager, role: str) -> dict[str, str]:
    """The session cookie the Airflow UI's login sets, as the browser sends it."""
    return {"Cookie": f"_token={manager.generate_jwt(SimpleAuthManagerUser(username=role, role=role))}"}


ROUTES = [
    "/api/v1/queries",
    f"/api/v1/dags/{SALES_DAG}/windows",
    f"/api/v1/dags/{SALES_DAG}/windows/1",
    f"/api/v1/dags/{SALES_DAG}/runs/some_run/window",
    "/api/v1/dispatcher",
    "/api/v1/capacity",
    "/api/v1/misses",
]


@pytest.mark.parametrize("route", ROUTES)
def test_every_route_needs_a_user(client: TestClient, route: str) -> None:
    response = client.get(route)
    assert response.status_code == 401
    assert response.json()["detail"] == "Not authenticated"
    assert client.get(route, headers={"Cookie": "_token=forged"}).status_code == 403


def _dependencies(dependant: Dependant) -> list[str]:
    found = []
    for dependency in dependant.dependencies:
        found += [getattr(dependency.call, "__qualname__", ""), *_dependencies(dependency)]
    return found


def test_every_route_carries_airflows_auth_dependencies() -> None:
    """Airflow mounts a plugin's app without authentication: each route must ask for it."""
    routes = create_app().routes
    api = [r for r in routes if isinstance(r, APIRoute)]
    assert {r.path for r in api} == {
        "/api/v1/queries",
        "/api/v1/dags/{dag_id}/windows",
        "/api/v1/dags/{dag_id}/windows/{window_id}",
        "/api/v1/dags/{dag_id}/runs/{run_id}/window",
        "/api/v1/dispatcher",
        "/api/v1/capacity",
        "/api/v1/misses",
    }
    for route in api:
        needs = _dependencies(route.dependant)
        assert "requires_authenticated.<locals>.inner" in needs, route.path
        assert ("requires_access_dag.<locals>.inner" in needs) == ("{dag_id}" in route.path), route.path
    # the rest: only the bundle (code, no data); no schema or docs
    assert [getattr(r, "path", None) for r in routes if not isinstance(r, APIRoute)] == ["/static"]


def test_the_bundle_is_public(client: TestClient) -> None:
    response = client.get("/static/iqp.umd.js")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith(("text/javascript", "application/javascript"))


def test_queries_with_a_session(client: TestClient, manager: SimpleAuthManager, seeded: Seeded) -> None:
    response = client.get("/api/v1/queries", headers=token(manager, "admin"))
    assert response.status_code == 200
    body = QueriesResponse.model_validate(response.json())
    sales = next(q for q in body.queries if q.dag_id == SALES_DAG)
    assert [w.id for w in sales.windows] == [seeded.at_risk, seeded.late, seeded.met]
    assert (sales.met, sales.missed, sales.at_risk) == (1, 1, 1)
    assert {q.dag_id for q in body.queries} == DAGS


def test_lists_keep_only_the_dags_the_user_may_read(client: TestClient, manager: SimpleAuthManager) -> None:
    viewer = token(manager, "viewer")
    queries = QueriesResponse.model_validate(client.get("/api/v1/queries", headers=viewer).json())
    assert [q.dag_id for q in queries.queries] == [SALES_DAG]
    misses = MissesView.model_validate(client.get("/api/v1/misses", headers=viewer).json())
    assert {w.dag_id for w in misses.missed + misses.at_risk} == {SALES_DAG}


@pytest.mark.parametrize(
    "route",
    [
        f"/api/v1/dags/{SECRET_DAG}/windows",
        f"/api/v1/dags/{SECRET_DAG}/windows/1",
        f"/api/v1/dags/{SECRET_DAG}/runs/any/window",
    ],
)
def test_a_dag_the_user_may_not_read_is_refused(client: TestClient, manager: SimpleAuthManager, route: str) -> None:
    assert client.get(route, headers=token(manager, "viewer")).status_code == 403
    assert client.get(route, headers=token(manager, "admin")).status_code in (200, 404)


def test_a_dags_windows_and_one_window(client: TestClient, manager: SimpleAuthManager, seeded: Seeded) -> None:
    viewer = token(manager, "viewer")
    windows = WindowsResponse.model_validate(client.get(f"/api/v1/dags/{SALES_DAG}/windows", headers=viewer).json())
    assert [w.id for w in windows.windows] == [seeded.at_risk, seeded.late, seeded.met]
    detail = WindowDetail.model_validate(
        client.get(f"/api/v1/dags/{SALES_DAG}/windows/{seeded.met}", headers=viewer).json()
    )
    assert detail.window.id == seeded.met
    assert [b.label for b in detail.bars] == ["batch 0", "batch 1", "merge"]
    other = client.get(f"/api/v1/dags/{SALES_DAG}/windows/{seeded.secret_running}", headers=viewer)
    assert other.status_code == 404  # iqp_secret's window is not one of iqp_sales'


def test_a_run_tab_finds_its_window(client: TestClient, manager: SimpleAuthManager, seeded: Seeded) -> None:
    viewer = token(manager, "viewer")
    windows = client.get(f"/api/v1/dags/{SALES_DAG}/windows", headers=viewer).json()["windows"]
    start = next(w["window_start"] for w in windows if w["id"] == seeded.late)
    run_id = seeded.run_id(datetime.fromisoformat(start))
    response = client.get(f"/api/v1/dags/{SALES_DAG}/runs/{run_id}/window", headers=viewer)
    assert response.status_code == 200
    assert response.json()["window"]["id"] == seeded.late
    missing = client.get(f"/api/v1/dags/{SALES_DAG}/runs/manual__not_a_window/window", headers=viewer)
    assert missing.status_code == 404
    unknown = client.get("/api/v1/dags/iqp_unknown/windows", headers=viewer)
    assert unknown.status_code == 404
    assert "no intermittent query" in unknown.json()["detail"]


def test_the_dispatcher_redacts_requests_of_unreadable_dags(client: TestClient, manager: SimpleAuthManager) -> None:
    viewer = DispatcherView.model_validate(client.get("/api/v1/dispatcher", headers=token(manager, "viewer")).json())
    admin = DispatcherView.model_validate(client.get("/api/v1/dispatcher", headers=token(manager, "admin")).json())
    assert [q.dag_id for q in admin.queue] == [SALES_DAG, SECRET_DAG]
    assert [(q.dag_id, q.redacted) for q in viewer.queue] == [(SALES_DAG, False), (None, True)]
    (resource,) = viewer.resources
    assert resource.holder is not None
    assert (resource.holder.redacted, resource.holder.dag_id) == (True, None)
    assert admin.resources[0].holder is not None
    assert admin.resources[0].holder.dag_id == SECRET_DAG
    newest = viewer.grants[0]
    assert (newest.redacted, newest.dag_id) == (True, None)
    assert [(o.dag_id, o.redacted) for o in newest.others] == [(SALES_DAG, False)]


def test_capacity_draws_grants_naming_no_cores_at_the_connections_default(
    client: TestClient, manager: SimpleAuthManager, seeded: Seeded, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_IQP_SPARK", json.dumps({"conn_type": "spark", "extra": {"cores": 3}}))
    monkeypatch.setenv("AIRFLOW__IQP__BILLING_UNIT_SECONDS", "120")
    response = client.get("/api/v1/capacity?hours=2", headers=token(manager, "viewer"))
    assert response.status_code == 200
    view = CapacityView.model_validate(response.json())
    held = seeded_holds(seeded, view.since, view.now)
    assert (view.default_cores, view.grants, view.default_grants) == (3, len(held), len(held))
    assert view.used_core_s == pytest.approx(3 * sum(held))
    assert {s.cores for s in view.used} == {0, 3}  # one job at a time, each on the default
    assert view.plan is not None
    assert (view.plan.queries, view.plan.open_cores, view.plan.closed_cores) == (2, 1, 2)
    # the closed phase's since iqp_secret's open window closed, 50 s before the seeded now
    closed_at = view.since + timedelta(seconds=view.planned[-1].at_s)
    assert (abs((closed_at - seeded.now).total_seconds() + 50) < 0.01, view.planned[-1].cores) == (True, 2)
    assert view.billed_core_s is not None
    assert (view.btu_s, view.btu_source) == (120, "[iqp] billing_unit_seconds")
    assert view.billed_core_s % view.btu_s == 0


def seeded_holds(seeded: Seeded, since: datetime, now: datetime) -> list[float]:
    """Seconds each grant held the resource within [since, now], from the ledger."""
    with session_scope(seeded.url, read_only=True) as s:
        rows = s.execute(select(DispatchRequest.granted_at, DispatchRequest.released_at)).all()
    spans = [(max(g, since), min(r or now, now)) for g, r in rows if g is not None]
    return [(end - start).total_seconds() for start, end in spans if end > start]


def test_bad_parameters_are_refused(client: TestClient, manager: SimpleAuthManager) -> None:
    admin = token(manager, "admin")
    assert client.get("/api/v1/queries?limit=0", headers=admin).status_code == 422
    assert client.get("/api/v1/dispatcher?hours=-1", headers=admin).status_code == 422
    assert client.get("/api/v1/capacity?confidence=1", headers=admin).status_code == 422
