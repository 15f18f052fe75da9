"""TPC-H Q6 (forecasting revenue change) over the replayed TPC-H stream: windows of 2 minutes,
result due 45 s after each.

Copy this file to declare your own query: a query file in queries/, a window, a deadline after
the window end, the landing directory of the stream, the expected rate, and a fitted cost model.

The rate defaults to what `make demo` replays (two files a second of ~4300 lineitem rows each);
IQP_FILES_PER_SECOND and IQP_ROWS_PER_FILE override it. IQP_FIRST_WINDOW and IQP_LAST_WINDOW
(ISO 8601, optional) limit the runs to the windows that start between them.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta

from airflow_iqp.dag import intermittent_query
from airflow_iqp.declaration import ArrivalRate

last_window = os.environ.get("IQP_LAST_WINDOW")
dag = intermittent_query(
    query="q6",
    window=timedelta(minutes=2),
    deadline=timedelta(seconds=45),
    landing=os.environ.get("IQP_LANDING", "/tmp/iqp/landing"),
    rate=ArrivalRate(
        files_per_second=float(os.environ.get("IQP_FILES_PER_SECOND", "2")),
        rows_per_file=float(os.environ.get("IQP_ROWS_PER_FILE", "4300")),
    ),
    cost_model="q6",
    start_date=datetime.fromisoformat(os.environ.get("IQP_FIRST_WINDOW", "2026-01-01T00:00:00+00:00")),
    end_date=datetime.fromisoformat(last_window) if last_window else None,
)
