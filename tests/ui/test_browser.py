"""The monitor in a real Airflow: `airflow standalone` (scheduler, DAG processor, triggerer and API
server, in its own process group) with two DAGs, a seeded ledger, and Debian's chromium driven
by Playwright. A user logs in, opens the nav page, a window and a run's tab, and every number
checked is computed here from the ledger's rows. Airflow's own Deadline Alert is checked too: a
run's deadline is its window's, and the scheduler and triggerer handle a missed one. Screenshots
go to build/ui/.

Needs /usr/bin/chromium (scripts/ensure_chromium.sh, run by `make test`); costs about 90 s, most of
it Airflow starting.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import httpx
import pytest
from sqlalchemy import select

from airflow_iqp.constants import ExecutionPath, JobKind, WindowStatus
from airflow_iqp.deadlines import ALERT_NAME
from airflow_iqp.demo.standalone import stop_group
from airflow_iqp.learning.cost import LearnedCost
from airflow_iqp.ledger import session_scope, store
from airflow_iqp.ledger.models import DispatchRequest, Window
from tests.ui.seed import (
    GRACE,
    MERGE_COST,
    PLANNED_COSTS,
    SALES_DAG,
    SECRET_BATCH_COST,
    SECRET_DAG,
    WINDOW,
    Seeded,
    seed,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from playwright.sync_api import Page

T = TypeVar("T")
CHROMIUM = Path("/usr/bin/chromium")
AIRFLOW = str(Path(sys.executable).with_name("airflow"))
SCREENSHOTS = Path(__file__).parents[2] / "build" / "ui"
PASSWORDS = {"admin": "admin-pw", "viewer": "viewer-pw"}
COMPONENTS = ("metadatabase", "scheduler", "triggerer", "dag_processor")
# The browser in a closed network: no sandbox as root, no calls home.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# The seeded DAGs, with the Deadline Alert every intermittent_query() DAG declares.
DAG_FILE = """
from datetime import datetime, timedelta, timezone

from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG

from airflow_iqp.deadlines import window_deadline_alert
from airflow_iqp.timetables import WindowTimetable

START = datetime(2026, 1, 1, tzinfo=timezone.utc)
WINDOW, GRACE = timedelta(seconds={window}), timedelta(seconds={grace})
for dag_id in {dags!r}:
    with DAG(
        dag_id,
        schedule=WindowTimetable(WINDOW),
        start_date=START,
        deadline=window_deadline_alert(WINDOW, GRACE),
    ):
        EmptyOperator(task_id="plan")
"""

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="no /usr/bin/chromium: run scripts/ensure_chromium.sh (apt-get install chromium)"
)


# -- how the page writes numbers (airflow_iqp/ui/www/src/format.ts) ----------------------------


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    sign, size = ("-" if seconds < 0 else ""), abs(seconds)
    if size < 100:
        return f"{sign}{size:.1f} s"
    total = round(size)
    hours, minutes, rest = total // 3600, total % 3600 // 60, total % 60
    return f"{sign}{hours}h {minutes:02d}m" if hours else f"{sign}{minutes}m {rest:02d}s"


def clock(at: datetime | None) -> str:
    return "—" if at is None else at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


# -- a running Airflow ------------------------------------------------------------------------


@dataclass(frozen=True)
class Server:
    url: str
    home: Path
    seeded: Seeded
    run_id: str  # a DAG run of iqp_sales for its open window
    late_run_id: str  # a DAG run of iqp_sales for the window that missed its deadline

    def get(self, path: str, user: str = "admin") -> Any:
        token = _token(self.url, user)
        response = httpx.get(f"{self.url}{path}", headers={"Authorization": f"Bearer {token}"}, timeout=30)
        response.raise_for_status()
        return response.json()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _token(url: str, user: str) -> str:
    response = httpx.post(f"{url}/auth/token", json={"username": user, "password": PASSWORDS[user]}, timeout=30)
    response.raise_for_status()
    found: str = response.json()["access_token"]
    return found


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """`airflow standalone` with the plugins, the two DAGs and a seeded ledger; a run of
    iqp_sales for its open window and one for the window that missed its deadline.
    """
    home = tmp_path_factory.mktemp("airflow_home")
    (home / "dags").mkdir()
    dags = DAG_FILE.format(dags=(SALES_DAG, SECRET_DAG), window=WINDOW.total_seconds(), grace=GRACE.total_seconds())
    (home / "dags" / "iqp_dags.py").write_text(dags)
    (home / "passwords.json").write_text(json.dumps(PASSWORDS))
    ledger = f"sqlite:///{home / 'iqp_ledger.db'}"
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "PATH": f"{Path(AIRFLOW).parent}{os.pathsep}{os.environ.get('PATH', '')}",  # standalone runs `airflow ...`
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        # a machine shared with other work: few processes; no task runs here (the DAGs stay paused)
        "AIRFLOW__CORE__PARALLELISM": "2",
        "AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES": "1",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",  # the runs stay queued: only their deadlines matter
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{url}/execution/",
        # named users with our own passwords (not all_admins, which would let every request in)
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin,viewer:viewer",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / "passwords.json"),
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__WORKERS": "1",
        "AIRFLOW__API_AUTH__JWT_SECRET": "iqp-browser-test-" + "0" * 64,
        # the API server reaches the ledger as a task does: through the connection iqp_default
        "AIRFLOW_CONN_IQP_DEFAULT": json.dumps({"conn_type": "iqp", "host": ledger}),
        # a grant naming no cores runs on the Spark connection's default, which the capacity view shows
        "AIRFLOW_CONN_IQP_SPARK": json.dumps({"conn_type": "spark", "host": "local", "extra": {"cores": 2}}),
    }
    log = home / "standalone.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [AIRFLOW, "standalone"],  # migrates its database, then starts every component
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # its own process group: stopped whole, every component included
        )
    try:
        _wait_healthy(url, process, log)
        admin = {"Authorization": f"Bearer {_token(url, 'admin')}"}
        for dag_id in (SALES_DAG, SECRET_DAG):  # parsed by the DAG processor once it started
            wait_for(partial(_dag_known, url, admin, dag_id), within=60, what=f"DAG {dag_id} in the API server")
        # seeded now: the forecasts checked below hold for minutes from here
        seeded = seed(ledger, datetime.now(UTC).replace(microsecond=0))
        runs = []
        for window_id in (seeded.at_risk, seeded.late):
            with session_scope(ledger, read_only=True) as s:
                summary = store.window_summary(s, window_id)
            assert summary.run_id is not None  # the run that planned it, as the plan task records it
            triggered = httpx.post(
                f"{url}/api/v2/dags/{SALES_DAG}/dagRuns",
                json={"dag_run_id": summary.run_id, "logical_date": summary.window_start.isoformat()},
                headers=admin,
                timeout=30,
            )
            assert triggered.status_code == 200, triggered.text
            runs.append(summary.run_id)
        yield Server(url, home, seeded, *runs)
    finally:
        stop_group(process)


def _dag_known(url: str, headers: dict[str, str], dag_id: str) -> bool | None:
    return httpx.get(f"{url}/api/v2/dags/{dag_id}", headers=headers, timeout=30).is_success or None


def _wait_healthy(url: str, process: subprocess.Popen[bytes], log: Path, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    status: dict[str, str] = {}
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"airflow standalone exited ({process.returncode}):\n{log.read_text()[-3000:]}")
        try:
            body = httpx.get(f"{url}/api/v2/monitor/health", timeout=5).json()
            status = {name: body.get(name, {}).get("status", "unknown") for name in COMPONENTS}
            if all(state == "healthy" for state in status.values()):
                return
        except (httpx.TransportError, ValueError):
            pass
        time.sleep(0.5)
    pytest.fail(f"airflow standalone not healthy within {timeout} s ({status}):\n{log.read_text()[-3000:]}")


# -- what the ledger says ---------------------------------------------------------------------


@dataclass(frozen=True)
class LedgerWindow:
    summary: store.WindowRow
    merge_granted: datetime | None

    @property
    def cost(self) -> float:
        done = sum(b.actual_cost or 0.0 for b in self.summary.batches)
        if self.summary.actual_finish is None or self.merge_granted is None:
            return done
        return done + (self.summary.actual_finish - self.merge_granted).total_seconds()


def ledger_window(seeded: Seeded, window_id: int) -> LedgerWindow:
    with session_scope(seeded.url, read_only=True) as s:
        merge = s.scalar(
            select(DispatchRequest.granted_at).where(
                DispatchRequest.window_id == window_id, DispatchRequest.kind == JobKind.MERGE
            )
        )
        return LedgerWindow(store.window_summary(s, window_id), merge)


def sales_laxities(seeded: Seeded) -> list[float]:
    with session_scope(seeded.url, read_only=True) as s:
        rows = s.execute(
            select(Window.deadline, Window.actual_finish).where(Window.status == WindowStatus.MERGED)
        ).all()
    return [(deadline - finish).total_seconds() for deadline, finish in rows if finish is not None]


def secret_frees(seeded: Seeded) -> datetime:
    """When iqp_secret's long batch, which holds the resource, is predicted to end."""
    with session_scope(seeded.url, read_only=True) as s:
        granted = s.scalar(select(DispatchRequest.granted_at).where(DispatchRequest.window_id == seeded.secret_running))
    assert granted is not None
    return granted + timedelta(seconds=SECRET_BATCH_COST)


def single_batch_cost(seeded: Seeded, rows: int) -> float:
    """One batch over `rows` rows and its merge, by the model stored for iqp_sales' jobs."""
    with session_scope(seeded.url, read_only=True) as s:
        document = store.latest_cost_model(s, SALES_DAG, ExecutionPath.SPARK_SUBMIT)
    assert document is not None
    model = LearnedCost.from_dict(document)
    return model.partial_seconds(rows) + model.merge_seconds(1)


# -- the tests --------------------------------------------------------------------------------


def test_the_api_needs_a_session_in_the_api_server(server: Server) -> None:
    queries = f"{server.url}/iqp/api/v1/queries"
    assert httpx.get(queries, timeout=30).status_code == 401
    assert httpx.get(queries, cookies={"_token": "forged"}, timeout=30).status_code == 403
    response = httpx.get(queries, cookies={"_token": _token(server.url, "viewer")}, timeout=30)
    assert response.status_code == 200
    assert [q["dag_id"] for q in response.json()["queries"]] == [SALES_DAG, SECRET_DAG]
    bundle = httpx.get(f"{server.url}/iqp/static/iqp.umd.js", timeout=30)
    assert bundle.status_code == 200
    assert bundle.headers["content-type"].startswith("text/javascript")


@pytest.fixture
def page(server: Server) -> Iterator[Page]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1400, "height": 1000}, timezone_id="UTC", locale="en-US")
        found = context.new_page()
        found.set_default_timeout(30_000)
        failures: list[str] = []
        found.on("console", lambda m: failures.append(m.text) if "failed to load" in m.text.lower() else None)
        found.on("pageerror", lambda error: failures.append(str(error)))
        yield found
        browser.close()
        assert not [f for f in failures if "status of 401" not in f], failures  # 401: before logging in


def log_in(page: Page, url: str, then: str) -> None:
    page.goto(f"{url}/auth/login?next={then}")
    page.locator("input[name=username]").fill("viewer")
    page.locator("input[name=password]").fill(PASSWORDS["viewer"])
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"**{then}")


def text(page: Page, test_id: str, within: str | None = None) -> str:
    scope = page.get_by_test_id(within) if within else page
    return scope.get_by_test_id(test_id).first.inner_text().strip()


def test_nav_page_window_and_run_tab_show_the_ledgers_numbers(page: Page, server: Server) -> None:
    seeded = server.seeded
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    log_in(page, server.url, "/plugin/iqp")

    # the query list: outcomes and medians of iqp_sales' windows
    sales_row = page.locator(f"[data-testid=iqp-query][data-dag-id={SALES_DAG}]")
    sales_row.wait_for()
    assert sales_row.get_by_test_id("iqp-met").inner_text() == "1"
    assert sales_row.get_by_test_id("iqp-missed").inner_text() == "1"
    assert sales_row.get_by_test_id("iqp-at-risk").inner_text() == "1"
    assert sales_row.get_by_test_id("iqp-median-laxity").inner_text() == duration(
        statistics.median(sales_laxities(seeded))
    )

    # one window that met its deadline: its figures, its chart, its batches
    met = ledger_window(seeded, seeded.met)
    sales_row.click()
    page.locator(f"[data-testid=iqp-window-row][data-window-id='{seeded.met}']").click()
    shown = page.locator(f"[data-testid=iqp-window][data-window-id='{seeded.met}']")
    shown.get_by_test_id("iqp-gantt").wait_for()
    single = single_batch_cost(seeded, met.summary.actual_tuples or 0)
    assert text(page, "iqp-deadline") == clock(met.summary.deadline)
    assert text(page, "iqp-finish") == clock(met.summary.actual_finish)
    assert met.summary.actual_finish is not None
    assert text(page, "iqp-laxity") == duration((met.summary.deadline - met.summary.actual_finish).total_seconds())
    assert text(page, "iqp-cost") == duration(met.cost)
    assert text(page, "iqp-single") == duration(single)
    assert text(page, "iqp-ratio") == f"×{met.cost / single:.2f}"
    assert sales_row.get_by_test_id("iqp-median-ratio").inner_text() == f"×{met.cost / single:.2f}"  # both alike
    batches = shown.get_by_test_id("iqp-batch")
    assert batches.count() == len(met.summary.batches) + 1  # and the merge
    for row, batch in zip(batches.all(), met.summary.batches):
        assert row.get_by_test_id("iqp-batch-cost").inner_text() == duration(batch.actual_cost)
        assert row.get_by_test_id("iqp-batch-tuples").inner_text() == str(batch.actual_tuples)
        assert row.get_by_test_id("iqp-batch-files").inner_text() == str(sum(map(len, (batch.files or {}).values())))
    assert shown.get_by_test_id("iqp-bar-actual").count() == len(met.summary.batches) + 1
    page.screenshot(path=str(SCREENSHOTS / "nav-window.png"), full_page=True)

    # the dispatcher: iqp_sales' batch waits behind iqp_secret's job, in EDF order
    dispatcher = page.get_by_test_id("iqp-dispatcher")
    assert dispatcher.get_by_test_id("iqp-queue-entry").count() == 2
    assert SECRET_DAG in dispatcher.get_by_test_id("iqp-resource").inner_text()

    # the capacity beside it: the grants on the connection's default, the plan for the recorded demands
    capacity = page.get_by_test_id("iqp-capacity")
    capacity.get_by_test_id("iqp-capacity-1h").click()  # the seeded grants are all within the last hour
    capacity.locator("[data-testid=iqp-capacity-chart][data-span-s='3600']").wait_for()
    for series in ("used", "planned", "leased"):
        assert capacity.get_by_test_id(f"iqp-capacity-{series}").count() == 1, series
    assert text(page, "iqp-plan-cores", within="iqp-capacity") == "1 / 2 cores"
    ticks = capacity.get_by_test_id("iqp-capacity-tick").all_text_contents()  # SVG text has no innerText
    assert len(ticks) >= 6, ticks
    assert all(t.endswith("0") for t in ticks), ticks  # every ten minutes on the clock
    grants = len(server.get("/iqp/api/v1/dispatcher")["grants"])
    legend = text(page, "iqp-capacity-legend", within="iqp-capacity")
    assert f"({grants} grants; {grants} named no cores: drawn at the connection's default, 2)" in legend
    capacity.screenshot(path=str(SCREENSHOTS / "capacity.png"))

    # the run's tab: the open window, at risk, with the deadline line where the ledger has it
    page.goto(f"{server.url}/dags/{SALES_DAG}/runs/{server.run_id}/plugin/iqp-window")
    tab = page.get_by_test_id("iqp-window")
    tab.get_by_test_id("iqp-gantt").wait_for()
    open_window = ledger_window(seeded, seeded.at_risk).summary
    assert tab.get_attribute("data-window-id") == str(seeded.at_risk)
    assert text(page, "iqp-outcome", within="iqp-window") == "at risk"
    assert text(page, "iqp-deadline") == clock(open_window.deadline)
    deadline = tab.get_by_test_id("iqp-mark-deadline").get_attribute("data-seconds")
    assert deadline is not None
    assert float(deadline) == (open_window.deadline - open_window.window_start).total_seconds()
    # its forecast: iqp_secret's long batch (granted before) ends, then batch 1 and the merge
    predicted = secret_frees(seeded) + timedelta(seconds=PLANNED_COSTS[1] + MERGE_COST)
    assert text(page, "iqp-predicted") == clock(predicted)
    assert text(page, "iqp-predicted-late") == duration((predicted - open_window.deadline).total_seconds())
    first = open_window.batches[0]
    assert tab.get_by_test_id("iqp-batch-cost").first.inner_text() == duration(first.actual_cost)
    assert tab.get_by_test_id("iqp-wait").count() >= 2  # batch 0's short wait, batch 1 still waiting
    page.screenshot(path=str(SCREENSHOTS / "run-tab.png"), full_page=True)

    # the dashboard card on the home page
    page.goto(f"{server.url}/")
    card = page.get_by_test_id("iqp-deadlines")
    card.get_by_test_id("iqp-missed-count").wait_for()
    assert text(page, "iqp-missed-count") == "1"
    # iqp_sales' open window, and iqp_secret's whose own long batch ends after its deadline
    assert text(page, "iqp-at-risk-count") == "2"
    card.screenshot(path=str(SCREENSHOTS / "dashboard-card.png"))


def test_airflow_holds_each_runs_window_deadline_and_handles_a_miss(server: Server) -> None:
    seeded = server.seeded

    def deadlines(run_id: str) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = server.get(f"/ui/dags/{SALES_DAG}/dagRuns/{run_id}/deadlines")["deadlines"]
        return found

    # the open window's run: due when the ledger says its window is
    (due,) = deadlines(server.run_id)
    assert datetime.fromisoformat(due["deadline_time"]) == ledger_window(seeded, seeded.at_risk).summary.deadline
    assert (due["missed"], due["alert_name"]) == (False, ALERT_NAME)
    # the late window's run was created after its deadline: the scheduler marks it missed, and the
    # triggerer runs the DAG's callback
    late_deadline = ledger_window(seeded, seeded.late).summary.deadline
    missed, callback = wait_for(
        lambda: _missed(deadlines(server.late_run_id), server.home), within=60, what="the missed deadline's callback"
    )
    assert datetime.fromisoformat(missed["deadline_time"]) == late_deadline
    assert callback == ("airflow_iqp.deadlines.log_missed_window", "success")
    said = (server.home / "standalone.log").read_text()
    assert f"of {SALES_DAG} (run {server.late_run_id}) missed its deadline" in said  # in the triggerer's log


def _missed(due: list[dict[str, Any]], home: Path) -> tuple[dict[str, Any], tuple[str, str]] | None:
    """The missed deadline, and its callback (path, state) once the triggerer ran it."""
    if not due or not due[0]["missed"]:
        return None
    with sqlite3.connect(home / "airflow.db") as db:  # the throwaway Airflow's metadata database
        row = db.execute(
            "SELECT c.data, c.state FROM deadline d JOIN callback c ON c.id = d.callback_id WHERE d.id = ?",
            (due[0]["id"].replace("-", ""),),
        ).fetchone()
    if row is None or row[1] not in ("success", "failed"):
        return None
    return due[0], (json.loads(row[0])["__var"]["path"], row[1])


def wait_for(check: Callable[[], T | None], within: float, what: str) -> T:
    """What `check` finds, polled until it finds something."""
    deadline = time.monotonic() + within
    while (found := check()) is None:
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not seen within {within} s")
        time.sleep(0.5)
    return found
