"""The UI plugin as Airflow loads it: from its own entry point, valid for the plugins API
(an invalid plugin is dropped from the UI with only a warning), beside the timetable plugin."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from airflow import plugins_manager
from airflow.api_fastapi.app import RESERVED_URL_PREFIXES
from airflow.api_fastapi.core_api.datamodels.plugins import PluginResponse

from airflow_iqp.plugins.ui import BUNDLE_FILE, IqpUiPlugin, bundle_url


@pytest.fixture(scope="module")
def infos() -> dict[str, dict[str, Any]]:
    return {info["name"]: info for info in plugins_manager.get_plugin_info()}


def test_plugin_info_validates_as_the_plugins_api_serves_it(infos: dict[str, dict[str, Any]]) -> None:
    plugin = PluginResponse.model_validate(infos["airflow_iqp_ui"])
    apps = {app.name: app for app in plugin.react_apps}
    assert {name: (app.destination, app.url_route) for name, app in apps.items()} == {
        "IQP": ("nav", "iqp"),
        "IQP window": ("dag_run", "iqp-window"),
        "IQP deadlines": ("dashboard", "iqp-deadlines"),
    }
    assert {app.bundle_url for app in apps.values()} == {bundle_url()}
    assert [(app.url_prefix, app.name) for app in plugin.fastapi_apps] == [("/iqp", "IQP monitor")]


def test_the_timetable_plugin_loads_beside_it(infos: dict[str, dict[str, Any]]) -> None:
    assert "airflow_iqp.timetables.window.WindowTimetable" in infos["airflow_iqp"]["timetables"]
    assert infos["airflow_iqp_ui"]["timetables"] == []


def test_urls_are_relative_and_the_prefix_is_free() -> None:
    (app,) = IqpUiPlugin.fastapi_apps
    assert not any(app["url_prefix"].startswith(reserved) for reserved in RESERVED_URL_PREFIXES)
    for react_app in IqpUiPlugin.react_apps:
        assert react_app["bundle_url"].startswith("iqp/static/")  # follows [api] base_url
        assert react_app.get("icon", "iqp/static/").startswith("iqp/static/")


def test_the_bundle_url_changes_with_the_bundle() -> None:
    assert BUNDLE_FILE.is_file()
    assert bundle_url().startswith("iqp/static/iqp.umd.js?v=")
    assert len(bundle_url().split("?v=")[1]) == 12


def test_loading_the_plugins_leaves_the_monitor_unbuilt() -> None:
    """Every DAG parse (our timetable) and every task process loads the plugins: the API and
    FastAPI are imported only where the app is mounted."""
    script = (
        "import sys; from airflow import plugins_manager; plugins_manager.ensure_plugins_loaded(); "
        "print(sorted(p.name for p in plugins_manager._get_plugins()[0])); print('airflow_iqp.ui.api' in sys.modules)"
    )
    loaded = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    *_, names, api_imported = loaded.stdout.strip().splitlines()
    assert "airflow_iqp_ui" in names
    assert api_imported == "False"
