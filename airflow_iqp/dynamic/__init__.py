"""The pure core of the multi-query dynamic mode (Section 4): state, laxity, eligibility, and
the ranking of waiting jobs.

No Airflow or Spark import: the simulator and the live dispatcher share it.
"""

from __future__ import annotations

from airflow_iqp.dynamic.dispatch import Candidate, IdleTime, Upcoming, best_first, inserted_idle
from airflow_iqp.dynamic.eligibility import Job, batch_reason, next_ready_time, ready_job, ready_since
from airflow_iqp.dynamic.estimate import estimate_total, expected_time_of
from airflow_iqp.dynamic.laxity import laxity, remaining_cost, window_remaining, work_left
from airflow_iqp.dynamic.policies import check_policy, rank
from airflow_iqp.dynamic.state import QueryState

__all__ = [
    "Candidate",
    "IdleTime",
    "Job",
    "QueryState",
    "Upcoming",
    "batch_reason",
    "best_first",
    "check_policy",
    "estimate_total",
    "expected_time_of",
    "inserted_idle",
    "laxity",
    "next_ready_time",
    "rank",
    "ready_job",
    "ready_since",
    "remaining_cost",
    "window_remaining",
    "work_left",
]
