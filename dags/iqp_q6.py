"""TPC-H Q6 (forecasting revenue change) over lineitem files as they land: windows of 2 minutes,
result due 45 s after each.

Copy this file to declare your own query: a query file (here the packaged TPC-H Q6), a window,
a deadline after the window end, the streams its input lands on, where each window's result
goes, the expected rate (or "learn") and a cost model (a fitted file, or "learn").

The cost model is learned from the DAG's own jobs: a packaged query's packaged model (fitted on
another machine) is only its prior, whose shape the learned model keeps while its scale and
start-up come from this machine's jobs. The first window calibrates (one file as soon as it
lands, the rest once the window's input is final, then the merge); every later window is
planned with the model refit after each job (docs/learning.md).

`make demo` lands the files (`iqp data replay`) and sets IQP_LANDING, IQP_RESULTS and the rate
through the environment; IQP_FIRST_WINDOW and IQP_LAST_WINDOW (ISO 8601, optional) limit the
runs to the windows that start between them.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta

from airflow_iqp import ArrivalRate, FileStream, intermittent_query

LANDING = os.environ.get("IQP_LANDING", "/tmp/iqp/landing")
last_window = os.environ.get("IQP_LAST_WINDOW")
dag = intermittent_query(
    query="q6",
    window=timedelta(minutes=2),
    deadline=timedelta(seconds=45),
    streams={"lineitem": FileStream(f"{LANDING}/lineitem")},
    output=os.environ.get("IQP_RESULTS", "/tmp/iqp/results") + "/{dag_id}/{window_start}",
    rate=ArrivalRate(
        files_per_second=float(os.environ.get("IQP_FILES_PER_SECOND", "2")),
        rows_per_file=float(os.environ.get("IQP_ROWS_PER_FILE", "4300")),
    ),
    work_dir=os.environ.get("IQP_WORK_DIR"),  # on a cluster: a directory every worker and Spark node share
    cost_model="learn",
    start_date=datetime.fromisoformat(os.environ.get("IQP_FIRST_WINDOW", "2026-01-01T00:00:00+00:00")),
    end_date=datetime.fromisoformat(last_window) if last_window else None,
)
