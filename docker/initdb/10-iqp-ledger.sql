-- The ledger is our own database, next to (never inside) Airflow's metadata database.
CREATE DATABASE iqp_ledger OWNER airflow;
