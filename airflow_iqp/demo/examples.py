"""The example DAGs the demo runs, parsed from their files the way Airflow parses them, so the
demo's windows, deadlines and modes are the DAG files' own and cannot drift from them.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from airflow_iqp.dag_files import declared
from airflow_iqp.exceptions import InvalidDeclaration

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from datetime import timedelta
    from pathlib import Path

    from airflow_iqp.declaration import Declaration

PATTERN = "iqp_*.py"


@dataclass(frozen=True)
class Example:
    """One example DAG file: its DAG id and the intermittent query it declares."""

    dag_id: str
    declaration: Declaration

    @property
    def query(self) -> str:
        """The query's name (its file in queries/)."""
        return self.declaration.name

    @property
    def window(self) -> timedelta:
        """One DAG run per window of this length."""
        return self.declaration.window

    @property
    def deadline(self) -> timedelta:
        """The result is due this long after the window end."""
        return self.declaration.deadline


@contextmanager
def _environment(env: Mapping[str, str]) -> Iterator[None]:
    """The example DAG files read the demo's landing directory and rate from the environment."""
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def load_examples(
    dags: Path, env: Mapping[str, str], pattern: str = PATTERN
) -> dict[Path, Example | InvalidDeclaration]:
    """Each example DAG file, parsed with `env` set, as its Example or the error its declaration raised."""
    found: dict[Path, Example | InvalidDeclaration] = {}
    with _environment(env):
        for path in sorted(dags.glob(pattern)):
            try:
                for dag_id, declaration in declared(path).items():
                    found[path] = Example(dag_id, declaration)
            except InvalidDeclaration as err:
                found[path] = err
    return found
