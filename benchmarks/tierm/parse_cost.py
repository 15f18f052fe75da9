"""What Airflow pays per IQP DAG file parse and per task process start, against a one-task DAG.

    flock /tmp/iqp-heavy.lock uv run python -m benchmarks.tierm.parse_cost [--preload airflow_iqp.dag]

- parse: as the DAG processor does it, a process with Airflow imported forks one child per file,
  which builds the file's DagBag and serializes its DAGs; the child's CPU-seconds (wait4). A task
  process parses its DAG file the same way, forked from its executor worker; `--preload` imports
  modules in the parent first, as `[scheduler] mp_forkserver_preload` has the LocalExecutor's
  workers do, so the child inherits them.
- plugins: what a task process pays to load the plugins (macros, listeners) once the task runner
  is imported; each process that loads them pays it, and our timetable makes every parse load them.
Run it in a fresh interpreter (AIRFLOW_HOME is set to a temporary directory before Airflow loads).
"""

from __future__ import annotations

import argparse
import importlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPEATS = 3
IQP_DAG = """
from datetime import datetime, timedelta
from airflow_iqp import ArrivalRate, FileStream, intermittent_query

dag = intermittent_query(
    dag_id="parse_q6", query="q6", window=timedelta(seconds=30), deadline=timedelta(seconds=20),
    streams={{"lineitem": FileStream("{root}/landing/lineitem")}}, output="{root}/results/{{dag_id}}/{{window_start}}",
    rate=ArrivalRate(files_per_second=0.5, rows_per_file=2000.0), cost_model="q6",
    start_date=datetime(2026, 1, 1), work_dir="{root}/work", mode="dynamic", alpha=0.5, tau_max=30,
)
"""
PLAIN_DAG = """
from datetime import datetime, timedelta
from airflow.sdk import DAG, task

with DAG(dag_id="plain", schedule=timedelta(seconds=30), start_date=datetime(2026, 1, 1), catchup=False):

    @task
    def run_once() -> None:
        pass

    run_once()
"""
PLUGINS = """
import time
import airflow.sdk.execution_time.task_runner
from airflow.sdk.listener import get_listener_manager
from airflow.sdk.plugins_manager import integrate_macros_plugins

began = time.process_time()
integrate_macros_plugins()
get_listener_manager()
print(time.process_time() - began)
"""


def parse_cpu(path: Path) -> float:
    """CPU-seconds of one forked child parsing and serializing `path`, as the DAG processor's."""
    import structlog
    from airflow.dag_processing import processor

    log = structlog.get_logger()
    processor._pre_import_airflow_modules(str(path), log)  # what the DAG processor does before forking
    pid = os.fork()
    if pid == 0:
        request = processor.DagFileParseRequest(
            file=str(path), bundle_path=path.parent, bundle_name="dags-folder", callback_requests=[]
        )
        parsed = processor._parse_file(request, log)
        os._exit(0 if parsed is not None and parsed.serialized_dags and not parsed.import_errors else 1)
    _, status, usage = os.wait4(pid, 0)
    if status != 0:
        raise RuntimeError(f"parsing {path} failed")
    return usage.ru_utime + usage.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preload", default="", help="modules the parent imports before forking, comma-separated")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="iqp-parse-cost-"))
    os.environ["AIRFLOW_HOME"] = str(root)
    (root / "dags").mkdir()
    files = {"one-task DAG": root / "dags" / "plain.py", "IQP DAG (q6, dynamic)": root / "dags" / "iqp.py"}
    files["one-task DAG"].write_text(PLAIN_DAG)
    files["IQP DAG (q6, dynamic)"].write_text(IQP_DAG.format(root=root))
    plugins = [
        float(
            subprocess.run([sys.executable, "-c", PLUGINS], capture_output=True, text=True, check=True).stdout.split()[
                -1
            ]
        )
        for _ in range(REPEATS)
    ]
    import airflow.sdk  # noqa: F401  the DAG processor's parent has Airflow imported

    for module in filter(None, args.preload.split(",")):
        importlib.import_module(module)

    began = time.strftime("%H:%M:%S")
    for name, path in files.items():
        cpu = [parse_cpu(path) for _ in range(REPEATS)]
        preloaded = f" ({args.preload} preloaded)" if args.preload else ""
        print(f"{name}: one parse in a forked child{preloaded}: {' '.join(f'{c:.2f}' for c in cpu)} CPU-s")
    print(f"plugins loaded in a task process: {' '.join(f'{c:.2f}' for c in plugins)} CPU-s ({began} UTC)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
