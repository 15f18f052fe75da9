"""The monitor in the Airflow UI: a read-only JSON API over the ledger (`api`), the view
models it returns (`models`, built by the pure `views` from the rows `read` takes from the
ledger), and the React bundle in `static/` (sources in `www/`). The `airflow_iqp_ui` plugin
(`airflow_iqp.plugins.ui`) mounts it.
"""

from __future__ import annotations

from pathlib import Path

STATIC = Path(__file__).parent / "static"  # the bundle; here so the plugin finds it without importing the API
