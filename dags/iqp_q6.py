"""TPC-H Q6 (forecasting revenue change) over the replayed TPC-H stream: windows of 2 minutes, result due 90 s after each.

Copy this file to declare your own query: a query file in queries/, a window, a deadline after
the window end, the landing directory of the stream, the expected rate, and a fitted cost model.
"""

import os
from datetime import UTC, datetime, timedelta

from airflow_iqp.dag import intermittent_query
from airflow_iqp.declaration import ArrivalRate

dag = intermittent_query(
    query="q6",
    window=timedelta(minutes=2),
    deadline=timedelta(seconds=90),
    landing=os.environ.get("IQP_LANDING", "/tmp/iqp/landing"),
    rate=ArrivalRate(files_per_second=float(os.environ.get("IQP_FILES_PER_SECOND", "0.5")), rows_per_file=1250),
    cost_model="q6",
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
)
