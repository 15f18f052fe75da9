"""The pure core of the multi-query dynamic mode (Section 4): state, laxity, eligibility, policies.

No Airflow or Spark import: the simulator and the live scheduler share it.
"""

from __future__ import annotations

from airflow_iqp.dynamic.eligibility import Job, batch_reason, next_ready_time, ready_job
from airflow_iqp.dynamic.estimate import estimate_total, expected_time_of
from airflow_iqp.dynamic.laxity import laxity, remaining_cost, work_left
from airflow_iqp.dynamic.policies import POLICIES, check_policy, make_policy, rank
from airflow_iqp.dynamic.state import QueryState

__all__ = [
    "POLICIES",
    "Job",
    "QueryState",
    "batch_reason",
    "check_policy",
    "estimate_total",
    "expected_time_of",
    "laxity",
    "make_policy",
    "next_ready_time",
    "rank",
    "ready_job",
    "remaining_cost",
    "work_left",
]
