"""TPC-H Q1 (pricing summary) over lineitem files as they land: windows of 2 minutes, result due
240 s after each.

Copy this file to declare your own query (see dags/iqp_q6.py for what each argument means).
`make demo` (and docker/, with IQP_WORK_DIR on its shared volume) sets
IQP_LANDING, IQP_RESULTS and the rate through the environment.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta

from airflow_iqp import ArrivalRate, FileStream, intermittent_query

LANDING = os.environ.get("IQP_LANDING", "/tmp/iqp/landing")
last_window = os.environ.get("IQP_LAST_WINDOW")
dag = intermittent_query(
    query="q1",
    window=timedelta(minutes=2),
    deadline=timedelta(seconds=240),
    streams={"lineitem": FileStream(f"{LANDING}/lineitem")},
    output=os.environ.get("IQP_RESULTS", "/tmp/iqp/results") + "/{dag_id}/{window_start}",
    rate=ArrivalRate(
        files_per_second=float(os.environ.get("IQP_FILES_PER_SECOND", "2")),
        rows_per_file=float(os.environ.get("IQP_ROWS_PER_FILE", "4300")),
    ),
    work_dir=os.environ.get("IQP_WORK_DIR"),  # on a cluster: a directory every worker and Spark node share
    cost_model="learn",  # the packaged model of q1 is the prior: see dags/iqp_q6.py
    start_date=datetime.fromisoformat(os.environ.get("IQP_FIRST_WINDOW", "2026-01-01T00:00:00+00:00")),
    end_date=datetime.fromisoformat(last_window) if last_window else None,
)
