# `make demo` and `make test` each set themselves up: uv (installed with pip if missing),
# then the environment pinned by uv.lock, compiled to bytecode ahead: with PYTHONDONTWRITEBYTECODE
# set (as on this machine) every Airflow process would otherwise compile each module it imports
# again (a task process's imports: 2.5 CPU-s instead of 1.4; an IQP DAG file's parse 3.7 instead of 2.0).
SHELL := /bin/bash
UV := $(shell command -v uv 2>/dev/null || echo python3 -m uv)

.PHONY: setup demo lint test bench

setup:
	@command -v uv >/dev/null 2>&1 || python3 -m uv --version >/dev/null 2>&1 \
		|| python3 -m pip install --quiet --user uv
	$(UV) sync --locked --compile-bytecode
	$(UV) run --locked python -m compileall -q airflow_iqp

demo: setup
	$(UV) run --locked python -m airflow_iqp.demo

# Lint, format, types and the layer rule (the pure core imports neither Airflow nor Spark).
lint: setup
	$(UV) run --locked ruff check .
	$(UV) run --locked ruff format --check .
	$(UV) run --locked mypy
	$(UV) run --locked lint-imports

# The light tests on both cores, then the heavy ones (Spark, Airflow, PostgreSQL, CPU timing;
# marked in tests/conftest.py) one at a time, so deadlines are measured on a machine they own.
# pytest exits 5 when a selection is empty: that fails too.
test: lint
	bash scripts/ensure_postgres.sh
	bash scripts/ensure_redis.sh
	bash scripts/ensure_chromium.sh
	$(UV) run --locked pytest -m "not heavy" -n 2
	$(UV) run --locked pytest -m heavy

bench: setup
	$(UV) run --locked python benchmarks/planning_speed.py
