"""Fixtures of the stream tests."""

from __future__ import annotations

import os
from typing import Any

import pytest


@pytest.fixture
def ls_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The local directories listed (one `os.scandir` each, whoever calls it), in order."""
    calls: list[str] = []
    scandir = os.scandir

    def counted(path: Any = ".") -> Any:
        calls.append(os.fspath(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", counted)
    return calls
