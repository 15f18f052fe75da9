"""File streams: how a query's input is declared, listed and cut into windows.

`spec`, `files`, `pattern` and `assign` are pure (neither Airflow nor Spark); `listing` lists a
stream's directory through Airflow's object storage.
"""
