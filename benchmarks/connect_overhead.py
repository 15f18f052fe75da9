"""Per-batch overhead of the two execution paths, side by side in one run: spark-submit vs Spark Connect.

Run: uv run python benchmarks/connect_overhead.py [--query q6] [--repeat 5] [--data data/s001]
     uv run python benchmarks/connect_overhead.py --cpu [--query q14] [--files 8] [--repeat 3]
Target (issue 11): on Connect, under 2 s from a batch's release to its Spark work starting.
Target of `--cpu` (issue 21): at most 0.3 CPU-s of the server's per extra job.

Each repetition runs the same one-file partial (the smallest batch a plan may cut) once per
path, the paths interleaved so that load on the machine falls on both alike, each as the task
runs it once the dispatcher has granted the lease (the "release" here; what Airflow adds before
that, trigger, scheduler and grant, is the same on both paths and not measured):
- spark-submit: `spark-submit` of a small driver that opens the session and calls the partial
  job; the launch, the JVM, the Python driver and the session all come before the work starts.
- spark_connect: a fresh Python process with what the task process has already imported (the
  job modules, not pyspark), which opens a Connect session of its own as `ConnectJob` does (the
  pyspark client's import included, as every task process pays it once) and calls the job.
"Work start" is when the session has answered and the job's first Spark call is made; the
one-file partial's cost is from the launch to the end of the process, as the task waits for it.
The Connect server is started once, before the runs (its start-up is printed, not counted).

`--cpu` measures CPU-seconds instead, on Connect only: what a job costs the server (its JVM's
utime + stime from /proc, read before the job's process starts and after it exits and the
server has settled) and its task-like process (from the session's opening to its release, and
the whole process with its imports). Each round runs one partial over `--files` files and, as
a dynamic plan would cut the same files, one one-file partial per file, twice: each in a session
of its own (as every job ran before the window's session), and all in one window's session as
the tasks run them (`connect.window_session`; the last one releases it). The server's CPU per
extra job is (the one-file partials' sum - the one partial) / (files - 1): the data is the
same, so what is left is what each job pays whatever its size.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PATHS = ("spark_submit", "spark_connect")
TARGET_S = 2.0
TARGET_EXTRA_JOB_CPU_S = 0.3
CLK_TCK = os.sysconf("SC_CLK_TCK")
SETTLE_S = 1.0  # after a job's process exits: the server finishes releasing its session


def child(argv: list[str]) -> None:
    """One job in this process; prints wall-clock stamps as JSON: before the session (`begin`),
    the session answering (`ready`), the job done (`done`) and the session closed (`closed`).
    """
    from airflow_iqp.spark.jobs import partial_job  # what the task process has imported anyway
    from airflow_iqp.spark.jobs.spec import PartialSpec

    mode, spec = argv[0], PartialSpec.model_validate_json(Path(argv[1]).read_text())
    if mode == "connect-cpu":
        shared = argv[3] if len(argv) > 3 else None
        print(json.dumps(connect_job_cpu(spec, argv[2], shared, last=len(argv) > 4)), flush=True)
        return
    begin = time.time()
    if mode == "submit":
        from pyspark.sql import SparkSession

        spark = SparkSession.builder.getOrCreate()
        ready = time.time()
        partial_job.run(spec, spark)
        done = time.time()
        spark.stop()
    else:
        from airflow_iqp.spark.connect import ConnectJob

        with ConnectJob(argv[2], "iqp-overhead") as job:
            job.spark.version  # the first round trip: the session is open on the server
            ready = time.time()
            partial_job.run(spec, job.spark)
            done = time.time()
    closed = time.time()
    print(json.dumps({"begin": begin, "ready": ready, "done": done, "closed": closed}), flush=True)


def own_cpu() -> float:
    """This process's CPU-seconds so far, all its threads."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def connect_job_cpu(spec: object, url: str, shared: str | None, last: bool) -> dict[str, float]:
    """One partial in a Connect session of its own or the `shared` window's, as the task runs it
    after `load_client`: this process's CPU-seconds from opening the session to leaving it, and
    the job's seconds.
    """
    from airflow_iqp.spark.connect import ConnectJob, load_client
    from airflow_iqp.spark.jobs.spec import PartialSpec

    assert isinstance(spec, PartialSpec)
    load_client()
    cpu, opening = own_cpu(), time.perf_counter()
    with ConnectJob(url, "iqp-overhead", shared, last) as job:
        began = time.perf_counter()
        job.run(spec, before_commit=lambda: None)
        seconds = time.perf_counter() - began
    return {"client_job_cpu": own_cpu() - cpu, "seconds": seconds, "wall": time.perf_counter() - opening}


def server_cpu(pid: int) -> float:
    """CPU-seconds of the server's JVM so far (utime + stime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def children_cpu() -> float:
    """CPU-seconds of the child processes this one has waited for."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure_job(
    spec_file: Path, url: str, server_pid: int, env: dict[str, str], window: tuple[str, bool] | None = None
) -> dict[str, float]:
    """One partial in a fresh task-like process, in a session of its own or in `window` (its
    session, and whether the job is its last): the server's CPU-seconds over it (to its settling
    after the process exits), the process's own (all of it, and from session to release).
    """
    command = [sys.executable, str(Path(__file__).resolve()), "--child", "connect-cpu", str(spec_file), url]
    if window is not None:
        command += [window[0]] + (["last"] if window[1] else [])
    server, client, launched = server_cpu(server_pid), children_cpu(), time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"job failed ({done.returncode}):\n{done.stderr[-3000:]}")
    client_process = children_cpu() - client
    time.sleep(SETTLE_S)
    stamps = json.loads(done.stdout.strip().splitlines()[-1])
    return {
        "server": server_cpu(server_pid) - server,
        "client_process": client_process,
        "elapsed": time.perf_counter() - launched,
        **stamps,
    }


def idle_rate(server_pid: int, seconds: float = 10.0) -> float:
    """The idle server's CPU-seconds per second (heartbeats, GC, its maintenance thread)."""
    before = server_cpu(server_pid)
    time.sleep(seconds)
    return (server_cpu(server_pid) - before) / seconds


def cpu_main(args: argparse.Namespace, source: Any, env: dict[str, str]) -> int:
    """`--cpu`: the server's and the task's CPU-seconds per job, and per extra job."""
    from airflow_iqp.spark.connect_server import running

    files = args.files
    rows = source.data.rows(source.query.streams, range(files))
    rounds: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="iqp-overhead-cpu-") as work_dir:
        work = Path(work_dir)

        def spec(units: range, name: str) -> Path:
            path = work / f"{name}.spec.json"
            path.write_text(source.partial_spec(units, work / "out" / name).to_json())
            return path

        whole = spec(range(files), "whole")
        singles = [spec(range(i, i + 1), f"single-{i:04d}") for i in range(files)]
        with running(work / "server") as server:
            url, pid = server.url_with_token, server.pid
            for warm in (whole, singles[0]):  # the query's first jobs on the server: JIT, code generation
                measure_job(warm, url, pid, env)
            idle = idle_rate(pid)

            def one_file_jobs(window: str | None) -> list[dict[str, float]]:
                """Each one-file partial in a session of its own, or all in `window`'s."""
                last = len(singles) - 1
                return [
                    measure_job(s, url, pid, env, None if window is None else (window, k == last))
                    for k, s in enumerate(singles)
                ]

            runs = {
                "whole": lambda: measure_job(whole, url, pid, env),
                "own": lambda: one_file_jobs(None),
                "window": lambda: one_file_jobs(str(uuid.uuid4())),
            }
            for i in range(args.repeat):
                order = ("own", "window", "whole") if i % 2 else ("whole", "window", "own")
                rounds.append({kind: runs[kind]() for kind in order})
                print(f"round {i + 1}/{args.repeat} done", file=sys.stderr, flush=True)
    load = os.getloadavg()[0]

    def net(job: dict[str, float]) -> float:
        return job["server"] - idle * job["elapsed"]

    wholes = [r["whole"] for r in rounds]
    print(
        f"\nPer-job CPU on Spark Connect: {args.query} partials, {files} files ({rows} rows) as one job and as "
        f"{files} one-file jobs, each in a session of its own and all in one window's, {args.repeat} rounds; "
        f"median (min-max); {os.cpu_count()} cores, load average {load:.1f}; idle server {idle:.3f} CPU-s/s "
        "(subtracted from the server's columns)\n"
    )
    print(f"| {'per job':<42} | {'one file, own session':<21} | {'one file, window':<20} | {f'{files} files':<20} |")
    print(f"|{'-' * 44}|{'-' * 23}|{'-' * 22}|{'-' * 22}|")
    for label, value in (
        ("server CPU-s", net),
        ("task process CPU-s, session to release", lambda j: j["client_job_cpu"]),
        ("task process CPU-s, whole process", lambda j: j["client_process"]),
        ("job seconds (the recorded cost)", lambda j: j["seconds"]),
    ):
        own, shared = ([value(j) for r in rounds for j in r[kind]] for kind in ("own", "window"))
        cells = [summary(own), summary(shared), summary([value(j) for j in wholes])]
        print(f"| {label:<42} | {cells[0]:<21} | {cells[1]:<20} | {cells[2]:<20} |")
    for kind, label in (("own", "each in a session of its own"), ("window", "in the window's session")):
        sums = [sum(net(j) for j in r[kind]) for r in rounds]
        extra = [(sum(net(j) for j in r[kind]) - net(r["whole"])) / (files - 1) for r in rounds]
        verdict = "meets" if statistics.median(extra) <= TARGET_EXTRA_JOB_CPU_S else "MISSES"
        print(
            f"\nserver CPU-s, {label}: {files} one-file jobs {summary(sums)}, one {files}-file job "
            f"{summary([net(j) for j in wholes])}; per extra job {summary(extra)}: {verdict} the "
            f"{TARGET_EXTRA_JOB_CPU_S:g} CPU-s target"
        )
    return 0


def run_once(path: str, spec_file: Path, url: str, env: dict[str, str]) -> dict[str, float]:
    """Seconds from the release to Spark work starting, of the work, and of the whole one-file partial.

    spark-submit counts from its launch to its exit; Connect from the job's first line in the
    (already running) task process to its session's release.
    """
    script = str(Path(__file__).resolve())
    if path == "spark_submit":
        spark_submit = str(Path(sys.executable).with_name("spark-submit"))
        conf = ["--conf", "spark.ui.enabled=false", "--conf", "spark.ui.showConsoleProgress=false"]
        command = [spark_submit, "--master", "local[2]", *conf, script, "--child", "submit", str(spec_file)]
    else:
        command = [sys.executable, script, "--child", "connect", str(spec_file), url]
    launched = time.time()
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    exited = time.time()
    if done.returncode != 0:
        raise RuntimeError(f"{path} run failed ({done.returncode}):\n{done.stderr[-3000:]}")
    stamps = json.loads(done.stdout.strip().splitlines()[-1])
    start, end = (launched, exited) if path == "spark_submit" else (stamps["begin"], stamps["closed"])
    return {"to_work": stamps["ready"] - start, "work": stamps["done"] - stamps["ready"], "partial": end - start}


def summary(values: list[float]) -> str:
    return f"{statistics.median(values):6.2f} ({min(values):.2f}-{max(values):.2f})"


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2:])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--query", default="q6", help="a packaged query (default q6)")
    parser.add_argument("--repeat", type=int, default=5, help="runs per path (default 5)")
    parser.add_argument("--data", type=Path, default=Path("data/s001"), help="generated TPC-H (made if missing)")
    parser.add_argument("--cpu", action="store_true", help="CPU-seconds per job on Connect (server and task)")
    parser.add_argument("--files", type=int, default=8, help="with --cpu: files per round (default 8)")
    args = parser.parse_args()

    from airflow_iqp.costfit.batches import Dataset, TpchSource
    from airflow_iqp.queries import load_query
    from airflow_iqp.settings import driver_address, python_path
    from airflow_iqp.spark.connect_server import running
    from airflow_iqp.tpch.generate import generate
    from airflow_iqp.tpch.manifest import MANIFEST_NAME

    if not (args.data / MANIFEST_NAME).is_file():
        generate(args.data, 0.01, 32, 1.0)
    source = TpchSource(Dataset.open(args.data), load_query(args.query))
    env = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        **driver_address("local[2]").env,
        "PYTHONPATH": os.pathsep.join([str(REPO), *python_path()]),
    }
    if args.cpu:
        return cpu_main(args, source, env)
    rows = source.data.rows(source.query.streams, range(0, 1))
    with tempfile.TemporaryDirectory(prefix="iqp-overhead-") as work_dir:
        work = Path(work_dir)
        began = time.monotonic()
        with running(work / "server") as server:
            server_start = time.monotonic() - began
            spec_file = work / "batch.spec.json"
            spec_file.write_text(source.partial_spec(range(0, 1), work / "out" / "batch-0000").to_json())
            run_once("spark_connect", spec_file, server.url_with_token, env)  # warm-up: the server is long-lived
            results: dict[str, list[dict[str, float]]] = {p: [] for p in PATHS}
            for i in range(args.repeat):
                for path in PATHS if i % 2 == 0 else reversed(PATHS):
                    results[path].append(run_once(path, spec_file, server.url_with_token, env))
                print(f"run {i + 1}/{args.repeat} done", file=sys.stderr, flush=True)
    load = os.getloadavg()[0]
    print(
        f"\nPer-batch overhead: one-file {args.query} partial ({rows} rows), median (min-max) of {args.repeat} runs"
        f" per path, interleaved; {os.cpu_count()} cores, load average {load:.1f}; Connect server start-up"
        f" {server_start:.1f} s (once)\n"
    )
    print(f"| {'seconds':<44} | {'spark-submit':<20} | {'Spark Connect':<20} |")
    print(f"|{'-' * 46}|{'-' * 22}|{'-' * 22}|")
    for key, label in (
        ("to_work", "release (job launch) to Spark work start"),
        ("work", "Spark work (the job after the session is up)"),
        ("partial", "one-file partial, launch to end"),
    ):
        cells = [summary([r[key] for r in results[p]]) for p in PATHS]
        print(f"| {label:<44} | {cells[0]:<20} | {cells[1]:<20} |")
    overhead = statistics.median(r["to_work"] for r in results["spark_connect"])
    submit = statistics.median(r["to_work"] for r in results["spark_submit"])
    verdict = "meets" if overhead < TARGET_S else "MISSES"
    print(
        f"\nSpark Connect {verdict} the {TARGET_S:g} s target: {overhead:.2f} s from launch to Spark work "
        f"(spark-submit {submit:.2f} s, {submit / overhead:.0f}x)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
