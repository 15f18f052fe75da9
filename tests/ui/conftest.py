"""A seeded SQLite ledger (tests/ui/seed.py) for the read model and the API."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

import pytest

from airflow_iqp.ledger import engine
from tests.ui.seed import Seeded, seed

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


@pytest.fixture
def seeded(tmp_path: Path) -> Iterator[Seeded]:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    yield seed(url, datetime.now(UTC).replace(microsecond=0))
    engine(url).dispose()
    engine(url, read_only=True).dispose()
