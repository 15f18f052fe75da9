"""The cost-model document (format: `airflow_iqp.planning.cost_model_file`), and writing it.

The document keeps what was measured beside what was fitted, and the machine it was measured
on without its hostname, so a reader can judge whether the model applies to their machine.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_iqp.atomic import write_json
from airflow_iqp.constants import JobKind
from airflow_iqp.learning.fit import fit_piecewise

if TYPE_CHECKING:
    from collections.abc import Mapping

    from airflow_iqp.constants import ExecutionPath
    from airflow_iqp.costfit.measure import Measurements


def machine() -> dict[str, Any]:
    """CPU count, memory and software versions: what moves the timings, not who ran them."""
    import pyspark

    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") if hasattr(os, "sysconf") else None
    return {
        "cpus": os.cpu_count(),
        "memory_gib": round(memory / 2**30, 1) if memory else None,
        "arch": platform.machine(),
        "python": platform.python_version(),
        "spark": pyspark.__version__,
        "java": java_version(),
        "load_average_1min": round(os.getloadavg()[0], 1),  # other work on the machine inflates timings
    }


def java_version() -> str | None:
    """`java -version`'s version string, or None without a working java."""
    try:
        done = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'version "([^"]+)"', done.stderr)
    return match[1] if match else None


def path_section(measured: Measurements) -> dict[str, Any]:
    """Fitted partial (seconds by tuples) and merge (seconds by partials) models with their errors."""
    section: dict[str, Any] = {}
    for kind, size_key, rows in (
        (JobKind.PARTIAL, "tuples", measured.partial),
        (JobKind.MERGE, "partials", measured.merge),
    ):
        fit = fit_piecewise([r[size_key] for r in rows], [r["seconds"] for r in rows])
        section[kind.value] = {
            "points": fit.points,
            "measured": [{**r, "seconds": round(r["seconds"], 4)} for r in rows],
            "fit_error": {"rmse_seconds": round(fit.rmse, 4), "max_relative": round(fit.max_relative_error, 4)},
        }
    return section


def write_model(
    path: Path, query: str, about: Mapping[str, Any], paths: Mapping[ExecutionPath, Measurements]
) -> dict[str, Any]:
    """Write (atomically) the fitted paths; `about` says what data they were measured on (TPC-H:
    scale and files; a DAG: its id and units), and paths fitted earlier on the same data are kept.
    """
    path = Path(path)
    kept: dict[str, Any] = {}
    if path.is_file():
        old = json.loads(path.read_text())
        if all(old.get(key) == value for key, value in about.items()):
            kept = old.get("paths", {})
    document = {
        "query": query,
        "unit": "rows",
        **about,
        "machine": machine(),
        "paths": {**kept, **{name.value: path_section(m) for name, m in paths.items()}},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, document)
    return document
