"""TPC-H Q14 (promotion effect) over the replayed TPC-H stream: windows of 2 minutes, result due 150 s after each,
in dynamic mode: no plan per window; a batch runs once MinBatch files have landed (or the input
runs late, or the window closes), where MinBatch keeps the batched cost within 1 + alpha of one
batch and one batch's cost within tau_max. The dispatcher then ranks it against the other
queries' batches by the [iqp] policy.

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
    query="q14",
    window=timedelta(minutes=2),
    deadline=timedelta(seconds=150),
    landing=os.environ.get("IQP_LANDING", "/tmp/iqp/landing"),
    rate=ArrivalRate(
        files_per_second=float(os.environ.get("IQP_FILES_PER_SECOND", "2")),
        rows_per_file=float(os.environ.get("IQP_ROWS_PER_FILE", "4300")),
    ),
    cost_model="q14",
    mode="dynamic",
    alpha=1.0,
    tau_max=timedelta(seconds=60),
    start_date=datetime.fromisoformat(os.environ.get("IQP_FIRST_WINDOW", "2026-01-01T00:00:00+00:00")),
    end_date=datetime.fromisoformat(last_window) if last_window else None,
)
