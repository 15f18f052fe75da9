"""The monitor in the Airflow UI, a plugin of its own (entry point `airflow_iqp_ui`) so that an
error here never costs the timetable plugin.

The API server mounts the app at `/iqp`: the JSON API under `/iqp/api/v1/` and the React
bundle under `/iqp/static/`. The bundle registers one component per React app, under the app's
`name` (the host loads it once per URL, so a single global would serve only the first app).
URLs are relative, so they follow `[api] base_url`; `?v=` (the bundle's own hash) makes
browsers fetch a rebuilt bundle instead of a cached one.
"""

from __future__ import annotations

import functools
import hashlib
from typing import Any

from airflow.plugins_manager import AirflowPlugin

from airflow_iqp.ui import STATIC

URL_PREFIX = "/iqp"
BUNDLE_FILE = STATIC / "iqp.umd.js"
ICON = "iqp/static/iqp.svg"


def bundle_url() -> str:
    """The bundle's URL, relative to the UI's base, versioned by its content."""
    version = hashlib.sha256(BUNDLE_FILE.read_bytes()).hexdigest()[:12] if BUNDLE_FILE.exists() else "missing"
    return f"iqp/static/{BUNDLE_FILE.name}?v={version}"


BUNDLE = bundle_url()


@functools.cache
def monitor_apps() -> list[dict[str, Any]]:
    """The monitor's app, built once, when the API server mounts it."""
    from airflow_iqp.ui.api import create_app

    return [{"app": create_app(), "url_prefix": URL_PREFIX, "name": "IQP monitor"}]


class _BuiltWhenRead:
    """`fastapi_apps`, built on first read: every process that loads plugins (each DAG file
    parse, for our timetable) would otherwise import FastAPI and the API, ~0.7 CPU-s.
    """

    def __get__(self, instance: object, owner: type | None = None) -> list[dict[str, Any]]:
        return monitor_apps()


class IqpUiPlugin(AirflowPlugin):
    """The nav page "IQP", a tab on every DAG run, a dashboard card, and the API behind them."""

    name = "airflow_iqp_ui"
    fastapi_apps = _BuiltWhenRead()
    react_apps = [
        {
            "name": "IQP",
            "bundle_url": BUNDLE,
            "destination": "nav",
            "url_route": "iqp",
            "category": "browse",
            "icon": ICON,
        },
        {"name": "IQP window", "bundle_url": BUNDLE, "destination": "dag_run", "url_route": "iqp-window"},
        {"name": "IQP deadlines", "bundle_url": BUNDLE, "destination": "dashboard", "url_route": "iqp-deadlines"},
    ]
