"""The monitor in a real Airflow: an API server (its own process group) over a migrated metadata
database with two DAGs and a run, a seeded ledger, and Debian's chromium driven by Playwright.
A user logs in, opens the nav page, a window and a run's tab, and every number checked is
computed here from the ledger's rows. Screenshots go to build/ui/.

Needs /usr/bin/chromium (scripts/ensure_chromium.sh, run by `make test`); costs about a minute.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest
from sqlalchemy import select

from airflow_iqp.constants import JobKind, WindowStatus
from airflow_iqp.learning.cost import Observation, fit_cost
from airflow_iqp.ledger import session_scope, store
from airflow_iqp.ledger.models import CostObservation, DispatchRequest, Window
from tests.ui.seed import SALES_DAG, SECRET_DAG, Seeded, seed

if TYPE_CHECKING:
    from collections.abc import Iterator

    from playwright.sync_api import Page

CHROMIUM = Path("/usr/bin/chromium")
AIRFLOW = str(Path(sys.executable).with_name("airflow"))
SCREENSHOTS = Path(__file__).parents[2] / "build" / "ui"
PASSWORDS = {"admin": "admin-pw", "viewer": "viewer-pw"}
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
DAG_FILE = """
from datetime import datetime, timedelta, timezone

from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG

from airflow_iqp.timetables import WindowTimetable

START = datetime(2026, 1, 1, tzinfo=timezone.utc)
for dag_id in {dags!r}:
    with DAG(dag_id, schedule=WindowTimetable(timedelta(minutes=10)), start_date=START):
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
    seeded: Seeded
    run_id: str  # a DAG run of iqp_sales for its open window


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
    home = tmp_path_factory.mktemp("airflow_home")
    (home / "dags").mkdir()
    (home / "dags" / "iqp_dags.py").write_text(DAG_FILE.format(dags=(SALES_DAG, SECRET_DAG)))
    (home / "passwords.json").write_text(json.dumps(PASSWORDS))
    ledger = f"sqlite:///{home / 'iqp_ledger.db'}"
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin,viewer:viewer",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / "passwords.json"),
        "AIRFLOW__API_AUTH__JWT_SECRET": "iqp-browser-test-" + "0" * 64,
        # the API server reaches the ledger as a task does: through the connection iqp_default
        "AIRFLOW_CONN_IQP_DEFAULT": json.dumps({"conn_type": "iqp", "host": ledger}),
    }
    setup = subprocess.run(
        ["sh", "-ec", f"{AIRFLOW} db migrate >/dev/null && {AIRFLOW} dags reserialize >/dev/null"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert setup.returncode == 0, setup.stderr[-3000:]
    seeded = seed(ledger, datetime.now(UTC).replace(microsecond=0))
    port = _free_port()
    log = home / "api-server.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [AIRFLOW, "api-server", "-H", "127.0.0.1", "-p", str(port), "--apps", "core", "-w", "1"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stopped whole, workers included
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, process, log)
        with session_scope(ledger, read_only=True) as s:
            start = store.window_summary(s, seeded.at_risk).window_start
        run_id = seeded.run_id(start)
        triggered = httpx.post(
            f"{url}/api/v2/dags/{SALES_DAG}/dagRuns",
            json={"dag_run_id": run_id, "logical_date": start.isoformat()},
            headers={"Authorization": f"Bearer {_token(url, 'admin')}"},
            timeout=30,
        )
        assert triggered.status_code == 200, triggered.text
        yield Server(url, seeded, run_id)
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _wait_healthy(url: str, process: subprocess.Popen[bytes], log: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"the API server exited ({process.returncode}):\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(f"{url}/api/v2/monitor/health", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    pytest.fail(f"the API server did not answer within {timeout} s:\n{log.read_text()[-3000:]}")


# -- what the ledger says ---------------------------------------------------------------------


@dataclass(frozen=True)
class LedgerWindow:
    summary: store.WindowSummary
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


def single_batch_cost(seeded: Seeded, rows: int) -> float:
    with session_scope(seeded.url, read_only=True) as s:
        observed = [
            Observation(JobKind(o.kind), o.size, o.seconds, o.observed_at)
            for o in s.scalars(select(CostObservation).where(CostObservation.query_id == 1))
        ]
    model = fit_cost(observed, "spark_submit")
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
    first = open_window.batches[0]
    assert tab.get_by_test_id("iqp-batch-cost").first.inner_text() == duration(first.actual_cost)
    assert tab.get_by_test_id("iqp-wait").count() >= 2  # batch 0's short wait, batch 1 still waiting
    page.screenshot(path=str(SCREENSHOTS / "run-tab.png"), full_page=True)

    # the dashboard card on the home page
    page.goto(f"{server.url}/")
    card = page.get_by_test_id("iqp-deadlines")
    card.get_by_test_id("iqp-missed-count").wait_for()
    assert text(page, "iqp-missed-count") == "1"
    assert text(page, "iqp-at-risk-count") == "1"
    card.screenshot(path=str(SCREENSHOTS / "dashboard-card.png"))
