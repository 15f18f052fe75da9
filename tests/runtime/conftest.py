"""The UI's seeded ledger (tests/ui/seed.py): forecasts are kept over the same windows the monitor shows."""

from __future__ import annotations

from tests.ui.conftest import seeded

__all__ = ["seeded"]
