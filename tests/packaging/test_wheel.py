"""The provider as a user installs it: a wheel, not this checkout.

Builds the wheel, installs it (not editable) into a fresh virtual environment with the versions
uv.lock pins, and parses an example DAG there: the TPC-H query and the cost model it learns from
(the repository's top-level queries/ and cost_models/, shipped as package data) must be found
inside site-packages, never in the repository.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PARSE = """
import json, runpy, sys
namespace = runpy.run_path(sys.argv[1])
dag = namespace["dag"]
plan = dag.get_task("plan")
import airflow_iqp
from airflow_iqp.runtime.costs import prior_model
prior = prior_model(plan.declaration, "spark_connect")  # the example learns: the packaged model is its prior
print(json.dumps({
    "dag_id": dag.dag_id,
    "tasks": sorted(dag.task_ids),
    "package": airflow_iqp.__file__,
    "query": str(plan.declaration.query.path),
    "cost_model": str(prior.source),
    "version": airflow_iqp.__version__,
}))
"""


def _uv() -> str:
    uv = os.environ.get("UV")
    if not uv:
        pytest.fail("run the tests through `uv run` (make test), which names uv in $UV")
    return uv


def _run(*args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(args, capture_output=True, text=True, timeout=600, **kwargs)  # type: ignore[call-overload]
    assert done.returncode == 0, f"{' '.join(args)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done


def test_the_wheel_installs_and_parses_an_example_dag(tmp_path: Path) -> None:
    uv = _uv()
    _run(uv, "build", "--wheel", "--out-dir", str(tmp_path / "dist"), str(REPO))
    wheels = list((tmp_path / "dist").glob("airflow_iqp-*.whl"))
    assert len(wheels) == 1
    with zipfile.ZipFile(wheels[0]) as wheel:
        names = wheel.namelist()
        entry_points = next(wheel.read(n).decode() for n in names if n.endswith(".dist-info/entry_points.txt"))
    # the monitor ships as its built bundle, never its React sources or node_modules, and as a plugin of its own
    assert {"airflow_iqp/ui/static/iqp.umd.js", "airflow_iqp/ui/static/iqp.svg"} <= set(names)
    assert not [n for n in names if n.startswith("airflow_iqp/ui/www/")]
    assert "airflow_iqp_ui = airflow_iqp.plugins.ui:IqpUiPlugin" in entry_points
    # typed (PEP 561), and the top-level example queries and models ship as package data
    assert "airflow_iqp/py.typed" in names
    assert {"airflow_iqp/examples/queries/q6.sql", "airflow_iqp/examples/cost_models/q6.json"} <= set(names)
    pins = tmp_path / "pins.txt"
    _run(uv, "export", "--frozen", "--no-hashes", "--no-emit-project", "--all-extras", "-o", str(pins), cwd=REPO)
    venv = tmp_path / "venv"
    _run(uv, "venv", "--python", sys.executable, str(venv))
    python = venv / "bin" / "python"
    _run(uv, "pip", "install", "--python", str(python), "--constraint", str(pins), str(wheels[0]))

    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "iqp_q6.py").write_text((REPO / "dags" / "iqp_q6.py").read_text())
    env = {
        "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(tmp_path),
        "AIRFLOW_HOME": str(tmp_path / "airflow"),
        "IQP_LANDING": str(tmp_path / "landing"),
        "IQP_RESULTS": str(tmp_path / "results"),
    }
    parsed = json.loads(
        _run(str(python), "-c", PARSE, str(dags / "iqp_q6.py"), cwd=tmp_path, env=env).stdout.splitlines()[-1]
    )

    site = venv / "lib"
    assert parsed["dag_id"] == "iqp_q6"
    assert parsed["tasks"] == ["final_merge", "late_files", "partial_aggregate", "plan"]
    for key in ("package", "query", "cost_model"):
        assert Path(parsed[key]).is_relative_to(site), f"{key} came from {parsed[key]}, not the installed wheel"
        assert not Path(parsed[key]).is_relative_to(REPO)
    assert parsed["query"].endswith("airflow_iqp/examples/queries/q6.sql")
    assert parsed["cost_model"].endswith("airflow_iqp/examples/cost_models/q6.json")
    assert (
        parsed["version"]
        == _run(
            str(python), "-c", "import importlib.metadata as m; print(m.version('airflow-iqp'))", env=env
        ).stdout.strip()
    )
