"""TPC-H Q14 (promotion effect) over lineitem files as they land, joined with the static part
table: windows of 2 minutes, result due 150 s after each, in dynamic mode: no plan per window; a
batch runs once MinBatch files have landed (or the input runs late, or the window closes), where
MinBatch keeps the batched cost within 1 + alpha of one batch and one batch's cost within
tau_max. The dispatcher then ranks it against the other queries' batches by the [iqp] policy.
With alpha 0.1, batching may cost 10% more than one batch: on Spark Connect, where a job's
overhead is under a second, that is about five batches a demo window; on spark-submit, with
~15 s a job, one.

Copy this file to declare your own query (see dags/iqp_q6.py for what each argument means).
`make demo` (and docker/, with IQP_WORK_DIR on its shared volume) sets
IQP_LANDING, IQP_STATIC, IQP_RESULTS and the rate through the environment.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta

from airflow_iqp import ArrivalRate, FileStream, intermittent_query

LANDING = os.environ.get("IQP_LANDING", "/tmp/iqp/landing")
last_window = os.environ.get("IQP_LAST_WINDOW")
dag = intermittent_query(
    query="q14",
    window=timedelta(minutes=2),
    deadline=timedelta(seconds=150),
    streams={"lineitem": FileStream(f"{LANDING}/lineitem")},
    static={"part": os.environ.get("IQP_STATIC", "/tmp/iqp/static") + "/part"},
    output=os.environ.get("IQP_RESULTS", "/tmp/iqp/results") + "/{dag_id}/{window_start}",
    rate=ArrivalRate(
        files_per_second=float(os.environ.get("IQP_FILES_PER_SECOND", "2")),
        rows_per_file=float(os.environ.get("IQP_ROWS_PER_FILE", "4300")),
    ),
    work_dir=os.environ.get("IQP_WORK_DIR"),  # on a cluster: a directory every worker and Spark node share
    cost_model="learn",  # the packaged model of q14 is the prior: see dags/iqp_q6.py
    mode="dynamic",
    alpha=0.1,
    tau_max=timedelta(seconds=60),
    start_date=datetime.fromisoformat(os.environ.get("IQP_FIRST_WINDOW", "2026-01-01T00:00:00+00:00")),
    end_date=datetime.fromisoformat(last_window) if last_window else None,
)
