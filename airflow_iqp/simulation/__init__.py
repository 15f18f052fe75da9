"""The multi-query simulator: one non-preemptive shared resource, driven by arrival curves
and fitted cost models instead of Spark (`iqp simulate`, docs/simulation.md).

engine: the discrete-event simulation; queue: its waiting jobs, ranked like the live
dispatcher's; workload: the JSON workload file; protocol: the paper's experiment (Section 7.4);
report: the table and the picture.
"""

from __future__ import annotations

from airflow_iqp.simulation.engine import IdleEntry, LogEntry, Noise, Outcome, SimQuery, SimResult, simulate

__all__ = ["IdleEntry", "LogEntry", "Noise", "Outcome", "SimQuery", "SimResult", "simulate"]
