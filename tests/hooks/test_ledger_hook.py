"""LedgerHook reads the ledger's URL from an `iqp` connection, as a worker would get it."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest
from sqlalchemy import func, select

from airflow_iqp.constants import Mode
from airflow_iqp.exceptions import InvalidSetting
from airflow_iqp.hooks import LedgerHook
from airflow_iqp.ledger import engine, ledger_url, store
from airflow_iqp.ledger.models import Query

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


@pytest.fixture
def ledger_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """An `iqp` connection in Airflow's JSON env form, pointing at a fresh SQLite ledger."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    monkeypatch.setenv("AIRFLOW_CONN_IQP_DEFAULT", json.dumps({"conn_type": "iqp", "host": url}))
    yield url
    engine(url).dispose()


def test_url_is_the_connection_host(ledger_file: str) -> None:
    assert LedgerHook().get_url() == ledger_file


def test_extra_sqlalchemy_url_overrides_host(monkeypatch: pytest.MonkeyPatch) -> None:
    conn = {"conn_type": "iqp", "host": "sqlite:////ignored.db", "extra": {"sqlalchemy_url": "postgres://u@h/d"}}
    monkeypatch.setenv("AIRFLOW_CONN_IQP_OTHER", json.dumps(conn))
    assert LedgerHook("iqp_other").get_url() == "postgresql+psycopg://u@h/d"


def test_an_iqp_connection_without_url_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_IQP_EMPTY", json.dumps({"conn_type": "iqp"}))
    with pytest.raises(InvalidSetting, match="no SQLAlchemy URL: set its host or its extra `sqlalchemy_url`"):
        LedgerHook("iqp_empty").get_url()


def test_the_ledger_package_understands_the_same_connection(ledger_file: str) -> None:
    assert ledger_url() == ledger_file


def test_sessions_reach_the_ledger_on_sqlite(ledger_file: str) -> None:
    hook = LedgerHook()
    assert hook.get_conn() is engine(ledger_file)
    with hook.session_scope() as session:
        store.register_query(session, dag_id="iqp_q1", name="q1", sql="SELECT 1", mode=Mode.STATIC, params={})
    with hook.session_scope() as session:
        assert session.scalar(select(func.count()).select_from(Query)) == 1
