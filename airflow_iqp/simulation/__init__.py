"""The multi-query simulator: one non-preemptive shared resource, driven by arrival curves
and fitted cost models instead of Spark (`iqp simulate`, docs/simulation.md)."""

from __future__ import annotations

from airflow_iqp.simulation.engine import LogEntry, Outcome, SimQuery, SimResult, simulate

__all__ = ["LogEntry", "Outcome", "SimQuery", "SimResult", "simulate"]
