"""airflow-iqp: deadline-bound intermittent queries on Spark, scheduled by Airflow.

    from airflow_iqp import ArrivalRate, FileStream, intermittent_query

The three names are imported when first used, so importing the pure core
(`airflow_iqp.planning`, ...) does not import Airflow.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_iqp.dag import intermittent_query
    from airflow_iqp.declaration import ArrivalRate
    from airflow_iqp.streams.spec import FileStream

__version__ = "0.2.0"
__all__ = ["ArrivalRate", "FileStream", "intermittent_query"]

_EXPORTS = {
    "ArrivalRate": "airflow_iqp.declaration",
    "FileStream": "airflow_iqp.streams.spec",
    "intermittent_query": "airflow_iqp.dag",
}


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'airflow_iqp' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
