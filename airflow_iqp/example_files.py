"""Where the TPC-H example queries and their fitted cost models are: one answer for a wheel and
a checkout.

The repository keeps them at its top level (`queries/`, `cost_models/`); the wheel ships them as
package data under `airflow_iqp/examples/`. An editable install (`uv sync`) runs the package from
the checkout, where that folder does not exist, so the top level is the fallback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

_PACKAGE = Path(__file__).resolve().parent


def example_dir(kind: Literal["queries", "cost_models"]) -> Path:
    """The installed wheel's copy if there is one, else the checkout's top-level folder."""
    packaged = _PACKAGE / "examples" / kind
    return packaged if packaged.is_dir() else _PACKAGE.parent / kind
