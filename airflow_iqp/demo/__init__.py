"""`make demo`: the example DAGs on a live, embedded Airflow, end to end.

`python -m airflow_iqp.demo` generates a small TPC-H stream, starts a Spark Connect server
(local[2], warmed up with the example queries' own jobs, `warm`; IQP_DEMO_PATH=spark_submit
runs every job as a spark-submit instead) and `airflow standalone` (SQLite, LocalExecutor)
under ./.demo/, replays one two-minute window at twice the generated rate (and one more after
it, not waited for: `TRAILING_WINDOWS`), unpauses the example DAGs, waits until their window is
merged, prints per window batches, tuples, predicted vs actual cost, deadline and result rows,
and checks every result against one Spark SQL pass over the same files; it exits non-zero when
a window failed, missed its deadline or differs. The example DAGs learn their cost models from their own jobs
(their priors, which plan the first window, fitted on the demo's server at a window's sizes,
`priors`; on spark-submit the packaged models); IQP_DEMO_WINDOWS=3
runs three consecutive windows and prints how far each batch's predicted cost was from the
actual one, with each window's median and worst error. IQP_DEMO_ONCE=1 exits then; otherwise
Airflow keeps running (UI address and login printed, on IQP_DEMO_PORT or 8080) until Ctrl-C.
Ctrl-C, once or more, stops everything it started (`stopping`): each long-lived child leads a
process group of its own, and what escapes those is found by the run's tag in its environment.
"""
