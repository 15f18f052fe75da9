"""A fresh SQLite ledger, and the UI's seeded one (tests/ui/seed.py): forecasts are kept over the
same windows the monitor shows."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from airflow_iqp.ledger.engine import engine, migrate
from tests.ui.conftest import seeded

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

__all__ = ["ledger", "seeded"]


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[str]:
    """A migrated SQLite ledger's URL; its engines disposed after the test."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    migrate(url)
    yield url
    engine(url).dispose()
    engine(url, read_only=True).dispose()
