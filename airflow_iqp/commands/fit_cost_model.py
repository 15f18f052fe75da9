"""`iqp fit-cost-model`: measure partial and merge jobs on this machine and fit cost models.

    iqp fit-cost-model QUERY [--data DIR] [--out DIR]     a packaged TPC-H query on generated data
    iqp fit-cost-model --dag DAG_FILE [--out FILE]        a declared DAG's query on its own files

The first writes DIR/QUERY.json (default cost_models/); the second lists the DAG's streams,
takes every unit of input in every window, and writes one model file (default <dag_id>.json)
that the DAG declares as `cost_model="<file>"`. Both measure the same way. In-process and on
Spark Connect, all units are processed as 1, 2, 4, 8 and 16 batches (in one shared session,
or each job in a session of its own on the server), and a one-unit batch is timed once more
(the smallest batch a planner may cut). With spark-submit, where every job pays ~10 s of JVM
and session start-up (30-60 s on a loaded 2-core machine), only a one-unit, a quarter and an
all-units partial and merges of 2 and 16 partials are timed. Spark Connect is measured on the
server at `--connect URL`, else on a private local server started for the measurement.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_iqp.constants import ExecutionPath

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Iterator, Mapping, Sequence

    from airflow_iqp.costfit.batches import Dataset, Source
    from airflow_iqp.costfit.measure import Measurements, Plan
    from airflow_iqp.costfit.runners import InProcessRunner

DEFAULT_DATA = Path("data/s001")
DEFAULT_FILES = 32
MEASURED = (ExecutionPath.IN_PROCESS, ExecutionPath.SPARK_SUBMIT, ExecutionPath.SPARK_CONNECT)  # have runners
DEFAULT_PATHS = (ExecutionPath.IN_PROCESS, ExecutionPath.SPARK_SUBMIT)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `iqp fit-cost-model`."""
    p = subparsers.add_parser("fit-cost-model", help="measure the jobs on this machine and fit cost models")
    p.add_argument("query", nargs="?", help="a packaged query's name, or 'all' for every packaged query")
    p.add_argument("--query", dest="query_option", help="same as the positional QUERY")
    p.add_argument("--dag", type=Path, help="a DAG file: fit its query on the files its streams hold")
    p.add_argument("--dag-id", help="with --dag: which DAG, if the file declares several")
    p.add_argument("--data", type=Path, help=f"QUERY: generated data (made here if missing; default {DEFAULT_DATA})")
    p.add_argument("--scale", type=float, help="QUERY: TPC-H scale; checked against --data, or used to generate it")
    paths = ",".join(p.value for p in MEASURED)
    default = ",".join(p.value for p in DEFAULT_PATHS)
    p.add_argument("--paths", default=default, help=f"comma-separated, of {paths} (default {default})")
    p.add_argument(
        "--connect", help="spark_connect: the server's URL, sc://host:port/;token=... (default: a private local one)"
    )
    p.add_argument(
        "--out", type=Path, help="QUERY: directory of <query>.json (default cost_models); --dag: the model file"
    )
    p.set_defaults(func=_fit)


def _fit(args: argparse.Namespace) -> int:
    query = args.query_option or args.query
    if (query is None) == (args.dag is None):
        raise ValueError("name a packaged query (or 'all') to fit on generated data, or a DAG file with --dag")
    named = [p.strip() for p in args.paths.split(",") if p.strip()]
    known = [p.value for p in MEASURED]
    if not named or set(named) - set(known):
        raise ValueError(f"--paths must list some of {', '.join(known)}, got {args.paths!r}")
    paths = [ExecutionPath(p) for p in named]
    if args.connect is not None and ExecutionPath.SPARK_CONNECT not in paths:
        raise ValueError("--connect names the server the spark_connect path is measured on: add it to --paths")
    if args.dag is not None:
        if args.data is not None or args.scale is not None:
            raise ValueError("--data and --scale are for a packaged query; --dag measures the DAG's own files")
        with _connect_url(paths, args.connect) as url:
            return _fit_dag(args.dag, args.dag_id, paths, args.out, url)
    if args.dag_id is not None:
        raise ValueError("--dag-id names a DAG of the file given with --dag")
    with _connect_url(paths, args.connect) as url:
        return _fit_packaged(query, args.data or DEFAULT_DATA, args.scale, paths, args.out or Path("cost_models"), url)


@contextmanager
def _connect_url(paths: list[ExecutionPath], given: str | None) -> Iterator[str | None]:
    """The Connect server to measure on: the given URL, a private one while measuring, or none."""
    if ExecutionPath.SPARK_CONNECT not in paths or given is not None:
        yield given
        return
    from airflow_iqp.spark.connect_server import running

    with tempfile.TemporaryDirectory(prefix="iqp-fit-connect-") as state, running(Path(state)) as server:
        print(f"measuring spark_connect on a private server at {server.url} (log {server.log})", file=sys.stderr)
        yield server.url_with_token


def _fit_packaged(
    query: str, root: Path, scale: float | None, paths: list[ExecutionPath], out: Path, connect: str | None
) -> int:
    from airflow_iqp.costfit.batches import TpchSource
    from airflow_iqp.queries import list_queries, load_query

    data = _dataset(root, scale)
    names = list(list_queries()) if query == "all" else [load_query(query).name]
    sources = [TpchSource(data, load_query(name)) for name in names]
    about = {"scale": data.manifest.scale, "files": data.manifest.files}
    with tempfile.TemporaryDirectory(prefix="iqp-fit-") as work:
        _measure_and_write(sources, paths, Path(work), lambda source: out / f"{source.name}.json", about, connect)
    print(f"wrote {len(names)} cost model(s) to {out} (scale {data.manifest.scale}, {data.manifest.files} files)")
    return 0


def _fit_dag(
    dag_file: Path, dag_id: str | None, paths: list[ExecutionPath], out: Path | None, connect: str | None
) -> int:
    from airflow_iqp.costfit.dag import DagSource, all_units, load_declaration
    from airflow_iqp.streams.listing import ListingError

    declaration = load_declaration(dag_file.absolute(), dag_id)
    try:
        units, selection = all_units(declaration)
    except ListingError as err:
        raise ValueError(str(err)) from None
    left_out = len(selection.unmatched) + len(selection.unassigned)
    if left_out:
        print(
            f"left out {len(selection.unmatched)} file(s) missing from another stream and "
            f"{len(selection.unassigned)} whose path the pattern does not match",
            file=sys.stderr,
        )
    streams = ", ".join(f"{name}: {stream.path}" for name, stream in declaration.streams.items())
    if not units:
        raise ValueError(f"DAG {declaration.dag_id}'s streams ({streams}) hold no input yet: nothing to measure")
    target = out or Path(f"{declaration.dag_id}.json")
    about = {"dag_id": declaration.dag_id, "units": len(units)}
    with tempfile.TemporaryDirectory(prefix="iqp-fit-") as work:
        source = DagSource.fetch(declaration, units, Path(work) / "inputs")
        _measure_and_write([source], paths, Path(work), lambda _: target, about, connect)
    print(
        f"wrote {target}: query {declaration.name} of DAG {declaration.dag_id} on {len(units)} unit(s) of "
        f"input ({streams}); declare cost_model={str(target.absolute())!r}"
    )
    return 0


def _plans(units: int) -> dict[ExecutionPath, Plan]:
    from airflow_iqp.costfit.measure import Plan

    every_split = Plan(splits=tuple(k for k in (1, 2, 4, 8, 16) if k <= units), single_partials=(1,))
    return {
        ExecutionPath.IN_PROCESS: every_split,
        ExecutionPath.SPARK_CONNECT: every_split,
        ExecutionPath.SPARK_SUBMIT: Plan(
            splits=tuple(sorted({min(2, units), min(16, units)})),
            single_partials=tuple(sorted({1, max(1, units // 4), units})),
        ),
    }


def _measure_and_write(
    sources: Sequence[Source],
    paths: list[ExecutionPath],
    work: Path,
    target: Callable[[Source], Path],
    about: Mapping[str, Any],
    connect: str | None,
) -> None:
    """Measure every source on every path (spark_connect on the server at `connect`) and write
    each one's model file.
    """
    from airflow_iqp.costfit.model import write_model
    from airflow_iqp.costfit.progress import Progress
    from airflow_iqp.costfit.runners import InProcessRunner, local_session

    in_process = InProcessRunner(local_session())  # also makes the untimed merge inputs of spark_submit
    progress = Progress(sum(_plans(s.units)[p].jobs() for s in sources for p in paths))
    for source in sources:
        workdir = work / source.name  # shared, so spark_submit merges reuse in_process partial outputs
        measured = _measure(source, paths, workdir, progress.step, in_process, connect)
        write_model(target(source), source.name, about, measured)
        shutil.rmtree(workdir)
    progress.close()


def _measure(
    source: Source,
    paths: list[ExecutionPath],
    workdir: Path,
    step: Callable[[str], None],
    in_process: InProcessRunner,
    connect: str | None,
) -> dict[ExecutionPath, Measurements]:
    from airflow_iqp.costfit.measure import measure
    from airflow_iqp.costfit.runners import ConnectRunner, Runner, SubmitRunner

    plans = _plans(source.units)
    measured = {}
    for path in paths:
        submit = path is ExecutionPath.SPARK_SUBMIT
        runner: Runner = in_process
        if submit:
            runner = SubmitRunner()
        elif path is ExecutionPath.SPARK_CONNECT:
            if connect is None:
                raise ValueError("spark_connect is measured on a Spark Connect server: none was given")
            runner = ConnectRunner(connect)
        measured[path] = measure(
            source,
            runner,
            plans[path],
            workdir,
            step,
            merge_inputs=in_process if submit else None,
            warm_up=not submit,
        )
    return measured


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
