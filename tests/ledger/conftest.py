"""Every ledger test runs twice: on a SQLite file and on a throwaway PostgreSQL cluster."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

import pytest

from airflow_iqp.ledger import engine
from tests.postgres import create_database

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


_databases = itertools.count()


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger_db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A URL of an empty ledger database (not migrated yet) on each backend."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'ledger.db'}"
    else:
        url = create_database(request.getfixturevalue("postgres_server"), f"ledger_{next(_databases)}")
    yield url
    engine(url).dispose()
