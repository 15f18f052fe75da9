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
from typing import TYPE_CHECKING

from airflow_iqp.costfit.fit import fit_piecewise

if TYPE_CHECKING:
    from airflow_iqp.costfit.measure import Measurements


def machine() -> dict:
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
    try:
        done = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'version "([^"]+)"', done.stderr)
    return match[1] if match else None


def path_section(measured: Measurements) -> dict:
    """Fitted partial (seconds by tuples) and merge (seconds by partials) models with their errors."""
    section = {}
    for kind, size_key, rows in (("partial", "tuples", measured.partial), ("merge", "partials", measured.merge)):
        fit = fit_piecewise([r[size_key] for r in rows], [r["seconds"] for r in rows])
        section[kind] = {
            "points": fit.points,
            "measured": [{**r, "seconds": round(r["seconds"], 4)} for r in rows],
            "fit_error": {"rmse_seconds": round(fit.rmse, 4), "max_relative": round(fit.max_relative_error, 4)},
        }
    return section


def write_model(path: Path, query: str, scale: float, files: int, paths: dict[str, Measurements]) -> dict:
    """Write (atomically) the fitted paths; paths fitted earlier at the same scale are kept."""
    path = Path(path)
    kept = {}
    if path.is_file():
        old = json.loads(path.read_text())
        if old.get("scale") == scale and old.get("files") == files:
            kept = old.get("paths", {})
    document = {
        "query": query,
        "unit": "rows",
        "scale": scale,
        "files": files,
        "machine": machine(),
        "paths": {**kept, **{name: path_section(m) for name, m in paths.items()}},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(document, indent=2) + "\n")
    os.replace(tmp, path)
    return document
