"""`iqp fit-cost-model QUERY`: measure partial and merge jobs on this machine, write cost_models/QUERY.json.

In-process, the whole stream is processed as 1, 2, 4, 8 and 16 batches on one shared session,
and a one-file batch is timed once more (the smallest batch a planner may cut).
With spark-submit, where every job pays ~10 s of JVM and session start-up (30-60 s on a loaded
2-core machine), only a one-file and an all-files partial and a merge of 16 partials are timed,
so its merge model is a constant: start-up dwarfs the merge work at these sizes.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from airflow_iqp.constants import ExecutionPath
from airflow_iqp.planning.cost_model_file import PATHS

if TYPE_CHECKING:
    import argparse

    from airflow_iqp.costfit.batches import Dataset
    from airflow_iqp.costfit.runners import Runner

DEFAULT_FILES = 32


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `iqp fit-cost-model`."""
    p = subparsers.add_parser("fit-cost-model", help="measure the jobs on this machine and fit cost models")
    p.add_argument("query", nargs="?", help="query name, or 'all' for every query in queries/")
    p.add_argument("--query", dest="query_option", help="same as the positional QUERY")
    p.add_argument("--data", type=Path, default=Path("data/s001"), help="generated data (made here if missing)")
    p.add_argument("--scale", type=float, help="TPC-H scale; checked against --data, or used to generate it")
    p.add_argument("--paths", default=",".join(PATHS), help=f"comma-separated, of {', '.join(PATHS)}")
    p.add_argument("--out", type=Path, default=Path("cost_models"), help="directory of <query>.json")
    p.set_defaults(func=_fit)


def _fit(args: argparse.Namespace) -> int:
    from airflow_iqp.costfit.measure import Plan, measure
    from airflow_iqp.costfit.model import write_model
    from airflow_iqp.costfit.progress import Progress
    from airflow_iqp.costfit.runners import InProcessRunner, SubmitRunner, local_session
    from airflow_iqp.queries import list_queries, load_query

    query = args.query_option or args.query
    if not query:
        raise ValueError("name a query (or 'all')")
    named = [p.strip() for p in args.paths.split(",") if p.strip()]
    if not named or set(named) - set(PATHS):
        raise ValueError(f"--paths must list some of {', '.join(PATHS)}, got {args.paths!r}")
    paths = [ExecutionPath(p) for p in named]
    data = _dataset(args.data, args.scale)
    names = list(list_queries()) if query == "all" else [load_query(query).name]
    files = data.manifest.files
    plans = {
        ExecutionPath.IN_PROCESS: Plan(splits=tuple(k for k in (1, 2, 4, 8, 16) if k <= files), single_partials=(1,)),
        ExecutionPath.SPARK_SUBMIT: Plan(
            splits=tuple(sorted({min(2, files), min(16, files)})),
            single_partials=tuple(sorted({1, max(1, files // 4), files})),
        ),
    }
    in_process = InProcessRunner(local_session())  # also makes the untimed merge inputs of spark_submit
    runners: dict[ExecutionPath, Runner] = {
        ExecutionPath.IN_PROCESS: in_process,
        ExecutionPath.SPARK_SUBMIT: SubmitRunner(),
    }
    progress = Progress(len(names) * sum(plans[p].jobs() for p in paths))
    with tempfile.TemporaryDirectory(prefix="iqp-fit-") as work:
        for name in names:
            streams = load_query(name).streams
            workdir = Path(work) / name  # shared, so spark_submit merges reuse in_process partial outputs
            measured = {
                path: measure(
                    name,
                    streams,
                    data,
                    runners[path],
                    plans[path],
                    workdir,
                    progress.step,
                    merge_inputs=in_process if path is ExecutionPath.SPARK_SUBMIT else None,
                    warm_up=path is ExecutionPath.IN_PROCESS,
                )
                for path in paths
            }
            write_model(args.out / f"{name}.json", name, data.manifest.scale, files, measured)
            shutil.rmtree(workdir)
    progress.close()
    print(f"wrote {len(names)} cost model(s) to {args.out} (scale {data.manifest.scale}, {files} files)")
    return 0


def _dataset(root: Path, scale: float | None) -> Dataset:
    """The data at `root`, generated first (at `scale`, default 0.01) if it is not there."""
    from airflow_iqp.costfit.batches import Dataset
    from airflow_iqp.tpch.generate import generate
    from airflow_iqp.tpch.manifest import MANIFEST_NAME

    if not (root / MANIFEST_NAME).is_file():
        generate(root, scale if scale is not None else 0.01, DEFAULT_FILES, 1.0)
    data = Dataset.open(root)
    if scale is not None and data.manifest.scale != scale:
        raise ValueError(f"{root} holds scale {data.manifest.scale}, not {scale}; pick another --data")
    return data
