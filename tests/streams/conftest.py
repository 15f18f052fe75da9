"""Fixtures of the stream tests."""

from __future__ import annotations

from typing import Any

import pytest
from fsspec.implementations.local import LocalFileSystem


@pytest.fixture
def ls_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The directories the local filesystem lists (one `os.scandir` each), in order."""
    calls: list[str] = []
    ls = LocalFileSystem.ls

    def counted(self: LocalFileSystem, path: str, detail: bool = False, **kwargs: Any) -> Any:
        calls.append(str(path))
        return ls(self, path, detail=detail, **kwargs)

    monkeypatch.setattr(LocalFileSystem, "ls", counted)
    return calls
