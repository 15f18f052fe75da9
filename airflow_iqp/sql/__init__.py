"""Splitting aggregate queries into per-batch partial aggregates and one exact final merge."""

from __future__ import annotations

from airflow_iqp.sql.decompose import PARTIALS_VIEW, Decomposition, decompose
from airflow_iqp.sql.parsing import parse_query, table_names

__all__ = ["PARTIALS_VIEW", "Decomposition", "decompose", "parse_query", "table_names"]
