"""The per-core cost model of issue 25, fitted from measured runs: a packaged query's partial timed
by spark-submit on a local Spark standalone cluster at `spark.cores.max` = 1, 2 and 4, at several
input sizes, repeated; then the speedup the capacity model plans with (`planning.capacity.
fit_speedup`: one core's time over the time at each count) and its error with each size left
out of the fit (`held_out`).

    .venv/bin/python benchmarks/per_core.py [--query q1] [--sizes 15,30,60] [--cores 1,2,4] [--repeat 2]
                                            [--data DIR]   # TPC-H scale 0.1, 60 files, made if missing

The cluster is tests/spark/cluster.py's (a master and two workers from the pyspark wheel), each
worker declaring --worker-cores cores (2: 4 in all), whatever the machine has: the output says
how many CPUs there are, so a count above them is read as what it is (executors sharing CPUs).
Every run is a `spark-submit` in client mode of a small driver that opens the session (waiting
for every executor granted: `minRegisteredResourcesRatio` 1; executors as large as a worker
allows, as few JVMs as the count needs), runs the partial job and stops,
and two times are kept: the whole process, launch to exit (what the spark-submit path's cost
model times, JVM start-up included), and the Spark work alone (session up to partial committed:
what a job on an already running server sees). The cores each run was granted are read from its
executors' launch commands on the workers, not assumed from the setting. Runs are interleaved
(repeat, size, cores) so load on the machine falls on every core count alike.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from airflow_iqp.costfit.batches import Dataset, TpchSource
from airflow_iqp.costfit.measure import input_rows
from airflow_iqp.costfit.runners import spec_file
from airflow_iqp.planning.capacity import CoreRun, HeldOut, Speedup, fit_speedup, held_out
from airflow_iqp.queries import load_query
from airflow_iqp.settings import LOOPBACK, python_path
from airflow_iqp.tpch.generate import generate
from airflow_iqp.tpch.manifest import MANIFEST_NAME
from tests.spark.cluster import EXECUTOR_MEMORY, WORKERS, Cluster, standalone_cluster

REPO = Path(__file__).resolve().parents[1]
SCALE = 0.1
FILES = 60


def child(spec_path: str) -> None:
    """Inside spark-submit: the session (every executor registered), the partial, the stop; prints stamps."""
    from pyspark.sql import SparkSession

    from airflow_iqp.spark.jobs import partial_job
    from airflow_iqp.spark.jobs.spec import PartialSpec

    spec = PartialSpec.model_validate_json(Path(spec_path).read_text())
    spark = SparkSession.builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    ready = time.perf_counter()
    partial_job.run(spec, spark)
    done = time.perf_counter()
    app = spark.sparkContext.applicationId
    spark.stop()
    print(json.dumps({"work": done - ready, "app": app}), flush=True)


def submit(
    cluster: Cluster, cores: int, worker_cores: int, spec: Path, env: dict[str, str]
) -> tuple[float, float, str]:
    """One spark-submit of the partial at `cores` cores: seconds launch to exit, seconds of work, its app id."""
    command = [
        str(Path(sys.executable).with_name("spark-submit")),
        "--master",
        cluster.url,
        "--executor-memory",
        EXECUTOR_MEMORY,
        *("--conf", f"spark.cores.max={cores}"),
        *("--conf", f"spark.executor.cores={min(cores, worker_cores)}"),  # fewest executors: one JVM per worker
        *("--conf", "spark.scheduler.minRegisteredResourcesRatio=1.0"),
        *("--conf", "spark.ui.enabled=false"),
        *("--conf", "spark.ui.showConsoleProgress=false"),
        str(Path(__file__).resolve()),
        "--child",
        str(spec),
    ]
    launched = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    seconds = time.perf_counter() - launched
    if done.returncode != 0:
        raise RuntimeError(f"spark-submit failed ({done.returncode}):\n{done.stderr[-2000:]}")
    stamps = json.loads(done.stdout.strip().splitlines()[-1])
    return seconds, float(stamps["work"]), str(stamps["app"])


def spread(seconds: list[float]) -> str:
    """The mean and every run."""
    return f"{statistics.fmean(seconds):6.2f} ({' '.join(f'{s:.2f}' for s in seconds)})"


def fitted(name: str, runs: list[CoreRun]) -> tuple[Speedup, list[HeldOut]]:
    """Print the speedup fitted on every run and its leave-one-size-out error per core count."""
    speedup = fit_speedup(runs, name)
    points = ", ".join(f"{c}: {s:.2f}x" for c, s in speedup.points)
    print(f"fitted speedup, {name}: {points} (flat past {speedup.max_cores} cores)")
    errors = held_out(runs)
    for cores in sorted({h.cores for h in errors}):
        mine = [abs(h.error) for h in errors if h.cores == cores]
        print(
            f"  held out (each size left out of the fit), {cores} cores: mean |error| {statistics.fmean(mine):.0%}, "
            f"max {max(mine):.0%} over {len(mine)} runs (at {cores} cores the model says {speedup.at(cores):.2f}x)"
        )
    return speedup, errors


def measure(
    cluster: Cluster, source: TpchSource, sizes: list[int], core_counts: list[int], args: argparse.Namespace, work: Path
) -> tuple[list[CoreRun], list[CoreRun]]:
    """Every (repeat, size, cores) run, interleaved: launch-to-exit runs and Spark-work runs, by rows read."""
    env = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": LOOPBACK,  # the driver; the executors are on this machine too
        "PYTHONPATH": os.pathsep.join([str(REPO), *python_path()]),
    }
    warm_up = spec_file(source.partial_spec(range(sizes[0]), work / "warm-up"))
    submit(cluster, core_counts[0], args.worker_cores, warm_up, env)  # untimed
    process: list[CoreRun] = []
    spark_work: list[CoreRun] = []
    for r in range(args.repeat):
        for size in sizes:
            for cores in core_counts:
                output = work / f"run-{r}-{size}-{cores}"
                spec = spec_file(source.partial_spec(range(size), output))
                launch_to_exit, working, app = submit(cluster, cores, args.worker_cores, spec, env)
                if (got := cluster.executor_cores(app)) != cores:
                    raise RuntimeError(f"{app} asked for spark.cores.max={cores}; its executors got {got} cores")
                rows = input_rows(output)
                process.append(CoreRun(cores, rows, launch_to_exit))
                spark_work.append(CoreRun(cores, rows, working))
    return process, spark_work


def table(process: list[CoreRun], spark_work: list[CoreRun]) -> None:
    """Per size and core count: every run's seconds, both ways, and the speedup over one core."""

    def times(runs: list[CoreRun], rows: float, cores: int) -> list[float]:
        return [r.seconds for r in runs if r.size == rows and r.cores == cores]

    header = f"{'rows':>9} {'cores':>5}  {'launch to exit, s (runs)':<28} {'speedup':>7}"
    print(f"{header}  {'Spark work, s (runs)':<28} {'speedup':>7}")
    for rows in sorted({r.size for r in process}):
        for cores in sorted({r.cores for r in process}):
            cells = [
                f"{spread(times(runs, rows, cores)):<28} "
                f"{statistics.fmean(times(runs, rows, 1)) / statistics.fmean(times(runs, rows, cores)):>6.2f}x"
                for runs in (process, spark_work)
            ]
            print(f"{rows:>9,.0f} {cores:>5}  {'  '.join(cells)}")


def main() -> int:
    """Measure, print the table and the fits."""
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2])
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--query", default="q1")
    parser.add_argument("--sizes", default="15,30,60", help="files per partial (of 60)")
    parser.add_argument("--cores", default="1,2,4", help="spark.cores.max per run")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--worker-cores", type=int, default=2, help=f"cores each of the {WORKERS} workers declares")
    parser.add_argument("--data", type=Path, help=f"TPC-H data (scale {SCALE}, {FILES} files; made if missing)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    core_counts = [int(c) for c in args.cores.split(",")]
    started = time.monotonic()
    cpus = os.cpu_count() or 1
    declared = WORKERS * args.worker_cores
    print(
        f"{args.query} partial by spark-submit on a standalone cluster: {WORKERS} workers x {args.worker_cores} cores "
        f"declared ({declared}) on a machine with {cpus} CPUs"
        + (f": runs on more than {cpus} cores share them" if declared > cpus else "")
    )
    print(f"TPC-H scale {SCALE}, {FILES} files; partials of {sizes} files; {args.repeat} runs each, interleaved")
    with tempfile.TemporaryDirectory(prefix="iqp-per-core-") as tmp:
        work = Path(tmp)
        data_dir = args.data or work / "tpch"
        if not (data_dir / MANIFEST_NAME).is_file():
            generate(data_dir, SCALE, FILES)
        source = TpchSource(Dataset.open(data_dir), load_query(args.query))
        load = os.getloadavg()[0]
        with standalone_cluster(work / "cluster", worker_cores=args.worker_cores) as cluster:
            process, spark_work = measure(cluster, source, sizes, core_counts, args, work)
        print(f"load average (1 min): {load:.1f} before the runs, {os.getloadavg()[0]:.1f} after")
        print()
        table(process, spark_work)
        print()
        fitted("spark-submit, launch to exit", process)
        fitted("the Spark work alone, session up to partial committed", spark_work)
    print(f"({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
