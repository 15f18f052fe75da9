"""The committed React bundle, checked without Node: built from the sources as they are, the
host's libraries left out, one component per React app, and the same fields as the API."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
from pydantic import BaseModel

from airflow_iqp.plugins.ui import IqpUiPlugin
from airflow_iqp.ui import models
from airflow_iqp.ui.api import STATIC

WWW = STATIC.parent / "www"
BUNDLE = STATIC / "iqp.umd.js"
REBUILD = "run `npm ci && npm run build` in airflow_iqp/ui/www and commit airflow_iqp/ui/static"
HOST_GLOBALS = ("React", "ReactJSXRuntime", "ReactRouterDOM", "ChakraUI")


def sources_hash() -> str:
    """What www/scripts/hash-sources.mjs writes: every file but node_modules, by sorted path."""
    digest = hashlib.sha256()
    names = sorted(
        path.relative_to(WWW).as_posix()
        for path in WWW.rglob("*")
        if path.is_file() and "node_modules" not in path.relative_to(WWW).parts
    )
    for name in names:
        digest.update(name.encode() + b"\0" + (WWW / name).read_bytes() + b"\0")
    return digest.hexdigest()


def recorded() -> dict[str, str]:
    return dict(line.split() for line in (STATIC / "iqp.sha256").read_text().splitlines())


def test_the_bundle_was_built_from_these_sources() -> None:
    assert recorded()["sources"] == sources_hash(), f"the UI's sources changed since the last build: {REBUILD}"


def test_the_bundle_is_the_one_the_build_wrote() -> None:
    assert recorded()["bundle"] == hashlib.sha256(BUNDLE.read_bytes()).hexdigest(), f"edited by hand? {REBUILD}"


def test_the_hosts_libraries_stay_out_of_the_bundle() -> None:
    text = BUNDLE.read_text()
    header = text[: text.index("use strict")]
    for name in HOST_GLOBALS:
        assert f".{name}" in header, f"{name} should come from the host's global"
    assert "react.transitional.element" not in text  # React's own code
    assert "__chakra" not in text.lower()
    assert len(text) < 60_000


def test_each_react_app_has_its_component_in_the_bundle() -> None:
    main = (WWW / "src" / "main.tsx").read_text()
    registered = set(re.findall(r'^\s+"?([\w ]+?)"?: \w+,$', main, re.MULTILINE))
    assert registered == {app["name"] for app in IqpUiPlugin.react_apps}


def interfaces() -> dict[str, set[str]]:
    """The fields of each interface in www/src/types.ts."""
    source = (WWW / "src" / "types.ts").read_text()
    return {
        name: set(re.findall(r"^  (\w+)\??:", body, re.MULTILINE))
        for name, body in re.findall(r"^export interface (\w+) \{\n(.*?)^\}", source, re.MULTILINE | re.DOTALL)
    }


RESPONSE_MODELS = {
    name: model
    for name, model in vars(models).items()
    if isinstance(model, type) and issubclass(model, BaseModel) and model is not BaseModel
}


def test_every_response_model_has_its_interface() -> None:
    assert set(interfaces()) == set(RESPONSE_MODELS)


@pytest.mark.parametrize("name", sorted(RESPONSE_MODELS))
def test_an_interface_names_the_fields_of_its_model(name: str) -> None:
    assert interfaces()[name] == set(RESPONSE_MODELS[name].model_fields)


def test_node_modules_stay_out_of_git_and_the_wheel() -> None:
    root = Path(__file__).parents[2]
    assert "node_modules/" in (root / ".gitignore").read_text().splitlines()
    assert 'exclude = ["airflow_iqp/ui/www"]' in (root / "pyproject.toml").read_text()
