"""Airflow plugins shipped by `airflow_iqp` (loaded through the `airflow.plugins` entry point)."""
