"""airflow-iqp: deadline-bound intermittent queries on Spark, scheduled by Airflow."""
