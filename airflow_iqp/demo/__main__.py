"""Run the demo: see airflow_iqp/demo/__init__.py."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from airflow_iqp.constants import ExecutionPath, Mode
from airflow_iqp.demo.examples import Example, load_examples
from airflow_iqp.demo.standalone import BIN, POLICY, PORT, DemoAirflow, stop_group, wait_healthy
from airflow_iqp.demo.stopping import Interrupts, sweep, tag_run
from airflow_iqp.exceptions import InvalidDeclaration
from airflow_iqp.settings import option_env
from airflow_iqp.streams.assign import ORIGIN, window_start
from airflow_iqp.tpch.manifest import STATIC_DIR

if TYPE_CHECKING:
    from airflow_iqp.demo.summary import WindowRow

REPO = Path(__file__).resolve().parents[2]
DEMO_DIR = Path(os.environ.get("IQP_DEMO_DIR", REPO / ".demo")).absolute()
CONNECT_STATE = DEMO_DIR / "connect-server"
PRIORS = DEMO_DIR / "priors"  # the examples' cost models fitted here on Spark Connect (`demo.priors`)
API_PORT = int(os.environ.get("IQP_DEMO_PORT", PORT))  # Airflow's API server and UI
DAGS = REPO / "dags"
FILES = 280  # generated at one file per (event-time) second...
SPEEDUP = 2.0  # ...and replayed two a second: 240 files in the demo window, 30 before, 10 after
WINDOW_FILES = 240  # files each further demo window (IQP_DEMO_WINDOWS) adds
# Windows run after the reported ones, not waited for: a window's last jobs share the 2 cores
# with the next window's plan tasks and slots, and a last window without them ran its jobs
# faster than the windows its models learned from (q1: 4.30 and 4.32 s, then 3.33 s; +29%).
TRAILING_WINDOWS = 1
SCALES = (0.2, 0.15, 0.25, 0.1, 0.3)  # tried in order: the first that makes a plan batch
LINEITEM_PER_SCALE = 6_001_215  # TPC-H lineitem rows at scale 1 (approximately, below 1)
LEAD = timedelta(seconds=15)  # replay starts this long before the demo window opens
STARTUP = timedelta(seconds=100)  # Airflow standalone up, DAGs parsed and unpaused (measured 85-95 s on 2 busy cores)
AFTER_WINDOW_TIMEOUT = timedelta(minutes=8)  # give up this long after the window end
POLL_S = 5.0


def execution_path() -> ExecutionPath:
    """Where the demo's jobs run: Spark Connect, unless IQP_DEMO_PATH=spark_submit."""
    chosen = os.environ.get("IQP_DEMO_PATH", ExecutionPath.SPARK_CONNECT.value)
    if chosen not in (ExecutionPath.SPARK_CONNECT, ExecutionPath.SPARK_SUBMIT):
        raise SystemExit(f"demo: IQP_DEMO_PATH must be spark_connect or spark_submit, got {chosen!r}")
    return ExecutionPath(chosen)


def demo_windows() -> int:
    """How many consecutive windows the demo runs: IQP_DEMO_WINDOWS, 1 by default. The example
    DAGs learn their cost models (from priors that plan the first window: `spark_connection`),
    and the next windows show the predictions converging.
    """
    chosen = os.environ.get("IQP_DEMO_WINDOWS", "1")
    if not chosen.isdigit() or int(chosen) < 1:
        raise SystemExit(f"demo: IQP_DEMO_WINDOWS must be a whole number of windows >= 1, got {chosen!r}")
    return int(chosen)


def log(message: str, started: float) -> None:
    """One progress line, stamped with the seconds since the demo started."""
    print(f"[{time.monotonic() - started:6.1f}s] {message}", flush=True)


# -- plans -------------------------------------------------------------------------------------


def example_env(rows_per_file: float, source: Path | None = None) -> dict[str, str]:
    """What the example DAG files read: where files land, static tables and results go, and the rate."""
    return {
        "IQP_LANDING": str(DEMO_DIR / "landing"),
        "IQP_STATIC": str((source or DEMO_DIR) / STATIC_DIR),
        "IQP_RESULTS": str(DEMO_DIR / "results"),
        "IQP_FILES_PER_SECOND": str(SPEEDUP),
        "IQP_ROWS_PER_FILE": f"{rows_per_file:.1f}",
    }


def examples(rows_per_file: float, source: Path | None = None) -> list[Example]:
    """The example DAGs as declared in dags/ at this rate, earliest deadline first.

    One that does not parse stops the demo with its declaration's error.
    """
    found = load_examples(DAGS, example_env(rows_per_file, source))
    broken = {path.name: err for path, err in found.items() if isinstance(err, InvalidDeclaration)}
    if broken:
        raise InvalidDeclaration("; ".join(f"{name}: {err}" for name, err in broken.items()))
    loaded = sorted((e for e in found.values() if isinstance(e, Example)), key=lambda e: e.deadline)
    if not loaded or len({e.window for e in loaded}) != 1:
        raise SystemExit(
            f"demo: the example DAGs in {DAGS} must declare one common window, got {[str(e.window) for e in loaded]}"
        )
    return loaded


def plans(rows_per_file: float) -> dict[str, object]:
    """Each example's WindowPlan (static) or DynamicBatching at the demo's rate, or its error.

    A static plan is the one its `plan` task runs once every example has recorded its demand
    (`demand.static_plan`): it leaves room for the longest job another example may hold the
    shared resource for. A DAG that learns its cost model is planned here with its prior (the
    packaged model) until its own jobs refit it: later windows plan with what it learned.
    """
    from airflow_iqp.declaration import ArrivalRate
    from airflow_iqp.runtime.costs import prior_model
    from airflow_iqp.runtime.demand import static_plan, window_demand
    from airflow_iqp.runtime.sizing import dynamic_batching

    try:
        loaded = examples(rows_per_file)
    except InvalidDeclaration as err:
        return {"examples": err}
    out: dict[str, object] = {}
    priced = []
    for example in loaded:
        declaration = example.declaration
        if not isinstance(declaration.rate, ArrivalRate):
            out[example.query] = InvalidDeclaration(f"{example.dag_id} must declare an ArrivalRate for the demo")
            continue
        try:
            model = (
                prior_model(declaration, execution_path())
                if declaration.learns_cost
                else declaration.fitted_model(execution_path())
            )
            if model is None:
                raise InvalidDeclaration(f"{example.dag_id} learns its cost model but has no packaged prior")
            demand = window_demand(declaration, declaration.rate, model)
        except InvalidDeclaration as err:
            out[example.query] = err
            continue
        priced.append((example, declaration.rate, model, demand.longest_job))
    longest = {example.dag_id: job for example, _, _, job in priced}
    for example, rate, model, _ in priced:
        declaration = example.declaration
        try:
            if declaration.mode == Mode.DYNAMIC:
                out[example.query] = dynamic_batching(declaration, rate, model)
            else:
                out[example.query] = static_plan(declaration, rate, model, longest)[0]
        except InvalidDeclaration as err:
            out[example.query] = err
    return out


def batches_of(planned: object) -> int:
    """Batches per window: planned (static) or MinBatch's (dynamic); 0 if the plan is unusable."""
    from airflow_iqp.runtime.sizing import DynamicBatching, WindowPlan

    if isinstance(planned, DynamicBatching):
        return planned.min_batch.batches(planned.expected_files)
    if isinstance(planned, WindowPlan) and planned.plan.feasible:
        return len(planned.plan.batches)
    return 0


def demo_works(planned: dict[str, object]) -> bool:
    """Every example valid, and at least one window cut in two or more batches."""
    counts = [batches_of(p) for p in planned.values()]
    return all(counts) and max(counts) >= 2


def choose_scale() -> tuple[float, dict[str, object]]:
    """The first stream scale at which every example plans and one needs two or more batches."""
    tried = []
    for scale in SCALES:
        planned = plans(LINEITEM_PER_SCALE * scale / FILES)
        if demo_works(planned):
            return scale, planned
        tried.append(f"scale {scale}: " + "; ".join(f"{q}: {describe_plan(p)}" for q, p in planned.items()))
    raise SystemExit(
        "demo: no stream scale makes an example DAG's window need two batches under the cost models in "
        "cost_models/ (or one is infeasible):\n  " + "\n  ".join(tried)
    )


def describe_plan(planned: object) -> str:
    """A plan (or MinBatch, or the declaration's error) in one line."""
    from airflow_iqp.runtime.sizing import DynamicBatching, WindowPlan

    if isinstance(planned, DynamicBatching):
        mb = planned.min_batch
        return (
            f"dynamic: MinBatch {mb.size} of {planned.expected_files} files ({mb.batches(planned.expected_files)} "
            f"batch(es), cost x{mb.cost_ratio:.2f}), at most {planned.max_batch} per batch, {planned.slots} slots"
        )
    if not isinstance(planned, WindowPlan):
        return f"invalid ({planned})"
    p = planned.plan
    parts = ", ".join(f"files {b.first}-{b.last} at {b.start:.0f}s ({b.cost:.0f}s)" for b in p.batches)
    return f"{len(p.batches)} batch(es) [{parts}], merge {planned.merge_seconds:.0f}s, finish {planned.finish:.0f}s"


# -- the stream --------------------------------------------------------------------------------


def stream(scale: float, windows: int, started: float) -> Path:
    """The generated stream under .demo/ for `windows` demo windows (`WINDOW_FILES` more files
    for each after the first, as many rows a file), reused when an earlier demo made the same one.
    """
    from airflow_iqp.tpch.generate import generate
    from airflow_iqp.tpch.manifest import MANIFEST_NAME, load_manifest

    files = FILES + WINDOW_FILES * (windows - 1)
    scale = round(scale * files / FILES, 6)
    out = DEMO_DIR / f"stream-s{scale:g}-f{files}"
    if (out / MANIFEST_NAME).is_file():
        manifest = load_manifest(out / MANIFEST_NAME)
        if manifest.scale == scale and manifest.files == files and manifest.seconds_per_file == 1.0:
            log(f"stream: reusing {out}", started)
            return out
    t = time.monotonic()
    manifest = generate(out, scale=scale, files=files, seconds_per_file=1.0)
    rows = {s: sum(f.rows for f in files) for s, files in manifest.streams.items()}
    log(
        f"stream: generated {manifest.files} files per stream at scale {scale:g} in {time.monotonic() - t:.1f}s: "
        f"{rows}",
        started,
    )
    return out


def lineitem_rows_per_file(source: Path) -> float:
    """The generated stream's mean lineitem rows per file: the rate the example DAGs plan with."""
    from airflow_iqp.tpch.manifest import MANIFEST_NAME, load_manifest

    manifest = load_manifest(source / MANIFEST_NAME)
    return sum(f.rows for f in manifest.streams["lineitem"]) / manifest.files


def next_window_start(after: datetime, window: timedelta) -> datetime:
    """The first window boundary at or after `after` (windows count from the timetable's origin)."""
    start = window_start(after, window, ORIGIN)
    return start if start == after else start + window


# -- Airflow -----------------------------------------------------------------------------------


def fresh_home() -> tuple[Path, Path, Path]:
    """Airflow home, landing directory and ledger of this run; an earlier run's are removed."""
    home, landing, ledger = DEMO_DIR / "airflow", DEMO_DIR / "landing", DEMO_DIR / "iqp_ledger.db"
    for path in (home, landing, DEMO_DIR / "results"):
        shutil.rmtree(path, ignore_errors=True)
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{ledger}{suffix}").unlink(missing_ok=True)
    home.mkdir(parents=True)
    return home, landing, ledger


def wait_for_dags(airflow: DemoAirflow, examples: list[Example], started: float, timeout: float = 240) -> None:
    """Until the scheduler lists every example DAG; an import error in one stops the demo."""
    wanted = {e.dag_id for e in examples}
    give_up = time.monotonic() + timeout
    while time.monotonic() < give_up:
        result = airflow.airflow("dags", "list", "-o", "json")
        found = set()
        if result.returncode == 0:
            try:
                listing = next(line for line in result.stdout.splitlines() if line.startswith("[{"))
                found = {d["dag_id"] for d in json.loads(listing)}
            except (StopIteration, ValueError):
                pass
        if wanted <= found:
            log(f"DAGs parsed: {', '.join(sorted(wanted))}", started)
            return
        errors = airflow.airflow("dags", "list-import-errors", "-o", "json")
        if errors.returncode == 0 and "dags/iqp_" in errors.stdout:
            raise RuntimeError(f"an example DAG failed to import:\n{errors.stdout[-3000:]}")
        time.sleep(2)
    raise TimeoutError(f"the example DAGs did not appear within {timeout:g} s (found {sorted(found)})")


def check(result: subprocess.CompletedProcess[str], what: str) -> None:
    """A failed Airflow CLI call stops the demo with its output."""
    if result.returncode != 0:
        raise RuntimeError(f"{what} failed ({result.returncode}):\n{(result.stdout + result.stderr)[-3000:]}")


def spark_connection(
    path: ExecutionPath, started: float, source: Path, queries: list[str], ledger: str
) -> dict[str, object]:
    """The `iqp_spark` connection of the demo: a Spark Connect server of its own on a free port
    (started here and warmed up with the `queries`' own jobs over the stream at `source`:
    `demo.warm`; their priors fitted on it at a window's sizes: `demo.priors`), or spark-submit
    on local[2], whose DAGs learn from the packaged priors (~10 s a job: too dear to fit).
    benchmarks/capacity_live.py points either at a standalone master (IQP_DEMO_MASTER) and
    scales the server's executors (IQP_DEMO_CORES=MIN,MAX) or leases them as the capacity plan
    says (IQP_DEMO_CORES=plan).
    """
    master = os.environ.get("IQP_DEMO_MASTER", "local[2]")
    if path is ExecutionPath.SPARK_SUBMIT:
        log(f"jobs run with spark-submit on {master} (IQP_DEMO_PATH=spark_submit)", started)
        return {"conn_type": "spark", "host": master}
    from airflow_iqp.settings import PLAN
    from airflow_iqp.spark.connect_server import ConnectServerError, Cores, free_port, start

    stop_connect_server()  # one an interrupted demo left behind
    t = time.monotonic()
    asked = os.environ.get("IQP_DEMO_CORES", "")
    least, _, most = asked.partition(",")
    cores: Cores = PLAN if asked == PLAN else (int(least), int(most)) if most else None
    try:
        server = start(CONNECT_STATE, port=free_port(), master=master, cores=cores, ledger=ledger)
    except ConnectServerError as err:
        raise RuntimeError(str(err)) from None
    log(f"Spark Connect server up in {time.monotonic() - t:.1f}s at {server.url} (log {server.log})", started)
    from airflow_iqp.demo.warm import warm_up

    t = time.monotonic()
    warmed = warm_up(server.url_with_token, source, queries, DEMO_DIR / "warm-up")
    jobs = "; ".join(f"{name} " + ", ".join(f"{s:.1f}" for s in seconds) for name, seconds in warmed.items())
    log(f"server warmed up with the examples' jobs in {time.monotonic() - t:.1f}s (partial, merge s: {jobs})", started)
    from airflow_iqp.demo.priors import fit_priors

    t = time.monotonic()
    measured = fit_priors(server.url_with_token, source, queries, WINDOW_FILES, PRIORS)
    fitted = f"fitted {', '.join(measured)} in {time.monotonic() - t:.1f}s" if measured else "fitted before, reused"
    log(f"priors at a window's sizes on this machine: {fitted} ({PRIORS}, [iqp] prior_models)", started)
    return server.connection()


def stop_connect_server() -> None:
    """Stop the demo's Spark Connect server, if it runs."""
    from airflow_iqp.spark.connect_server import stop

    stop(CONNECT_STATE)


# -- the run -----------------------------------------------------------------------------------


def progress(rows: dict[str, WindowRow | None]) -> str:
    """One line: how far each example's window has got."""
    parts = []
    for query, row in rows.items():
        if row is None:
            parts.append(f"{query}: not planned")
        else:
            done = sum(1 for b in row.batches if b.status == "done")
            running = sum(1 for b in row.batches if b.status == "running")
            parts.append(
                f"{query}: {row.status} {done}/{len(row.batches)} batches done"
                + (f", {running} running" if running else "")
            )
    return "; ".join(parts)


def gave_up(row: WindowRow) -> bool:
    """A batch failed on its retry too: the merge will not run, the window stays unmerged."""
    return any(b.status == "failed" and b.attempts >= 2 for b in row.batches)


def wait_for_windows(
    ledger_url: str,
    examples: list[Example],
    window_start: datetime,
    standalone: subprocess.Popen[bytes],
    started: float,
) -> dict[str, WindowRow]:
    """Until every example's demo window is merged (or gave up), printing progress on the way."""
    from airflow_iqp.demo.summary import window_row
    from airflow_iqp.ledger import session_scope

    give_up = window_start + examples[0].window + AFTER_WINDOW_TIMEOUT
    last = ""
    while True:
        with session_scope(ledger_url) as session:
            rows = {e.query: window_row(session, e.dag_id, window_start) for e in examples}
        line = progress(rows)
        now = datetime.now(UTC)
        offset = (now - window_start).total_seconds()
        if line != last or int(offset) % 30 < POLL_S:
            log(f"window {offset:+.0f}s: {line}", started)
            last = line
        finished = {q: r for q, r in rows.items() if r is not None and (r.finished or gave_up(r))}
        if len(finished) == len(rows):
            return finished
        if standalone.poll() is not None:
            raise RuntimeError(f"airflow standalone exited with {standalone.returncode}")
        if now > give_up:
            raise TimeoutError(f"the demo window was not merged within {AFTER_WINDOW_TIMEOUT} after its end: {line}")
        time.sleep(POLL_S)


def verify(rows: dict[str, WindowRow], examples: list[Example], started: float) -> dict[str, WindowRow]:
    """Each merged window checked against one Spark SQL pass over the same files."""
    from airflow_iqp.demo.verify import local_spark, verify_window

    t = time.monotonic()
    handler = signal.getsignal(signal.SIGINT)
    try:
        spark = local_spark()
    finally:
        signal.signal(signal.SIGINT, handler)  # PySpark's own outlives the session, and fails once it stopped
    checked = {}
    try:
        for query, row in rows.items():
            if row.status != "merged" or not row.result_uri:
                checked[query] = row
                continue
            declaration = next(e.declaration for e in examples if e.query == query)
            result, problems = verify_window(spark, declaration, row.window_start, row.window_end, row.result_uri)
            for problem in problems:
                print(f"  {query}: {problem}")
            checked[query] = replace(row, result_rows=len(result), verified=not problems)
    finally:
        spark.stop()
    log(f"verified against single-pass Spark SQL in {time.monotonic() - t:.1f}s", started)
    return checked


def main() -> int:
    """The demo, end to end; exits non-zero when a window failed, missed its deadline or its result is wrong."""
    started = time.monotonic()
    once = os.environ.get("IQP_DEMO_ONCE", "") not in ("", "0")
    interrupts = Interrupts()
    interrupts.own()
    run = tag_run()
    DEMO_DIR.mkdir(parents=True, exist_ok=True)

    windows = demo_windows()
    scale, planned = choose_scale()
    source = stream(scale, windows + TRAILING_WINDOWS, started)
    rows_per_file = lineitem_rows_per_file(source)
    planned = plans(rows_per_file)
    loaded = examples(rows_per_file, source)
    window = loaded[0].window
    if not demo_works(planned):
        raise SystemExit(f"demo: at {rows_per_file:.0f} rows per file no example needs two batches: {planned}")
    rate = f"{SPEEDUP:g} files/s of ~{rows_per_file:.0f} lineitem rows"
    log(f"plans at {rate}, windows of {window.total_seconds():.0f}s:", started)
    for example in loaded:
        deadline = example.deadline.total_seconds()
        print(f"    {example.query} (deadline window end + {deadline:g}s): {describe_plan(planned[example.query])}")
    if any(e.declaration.learns_cost for e in loaded):
        print(
            "    (by the packaged models; a DAG that learns its cost model plans with its prior until its jobs"
            " refit it, on Spark Connect a prior fitted on the demo's server below)"
        )

    from airflow_iqp.ledger.engine import migrate

    home, landing, ledger = fresh_home()
    ledger_url = f"sqlite:///{ledger}"
    migrate(ledger_url)
    path = execution_path()
    standalone = replay = None
    failed = True
    try:
        spark_conn = spark_connection(path, started, source, [e.query for e in loaded], ledger_url)
        window_start = next_window_start(datetime.now(UTC) + STARTUP, window)
        airflow = DemoAirflow(
            home=home,
            dags=DAGS,
            ledger=ledger,
            port=API_PORT,
            extra_env={
                **example_env(rows_per_file, source),
                # One run per DAG and demo window (a later window would find no files).
                "IQP_FIRST_WINDOW": window_start.isoformat(),
                "IQP_LAST_WINDOW": (window_start + window * (windows + TRAILING_WINDOWS - 0.5)).isoformat(),
                "AIRFLOW_CONN_IQP_SPARK": json.dumps(spark_conn),
                **({option_env("prior_models"): str(PRIORS)} if path is ExecutionPath.SPARK_CONNECT else {}),
            },
        )
        airflow_log = DEMO_DIR / "airflow-standalone.log"
        standalone = airflow.start(airflow_log)
        log(
            f"airflow standalone started (pid {standalone.pid}, log {airflow_log}); "
            f"demo window(s) {window_start:%H:%M:%S}-{window_start + windows * window:%H:%M:%S} UTC "
            f"(and {TRAILING_WINDOWS} after them, not waited for)",
            started,
        )
        up = wait_healthy(standalone, 240, airflow_log, airflow.api)
        log(f"Airflow healthy after {up:.1f}s", started)
        wait_for_dags(airflow, loaded, started)
        check(
            airflow.airflow("dags", "unpause", "-y", "--treat-dag-id-as-regex", "^iqp_q(1|6|14)$"),
            "airflow dags unpause",
        )
        log(
            f"DAGs unpaused; their Spark jobs ({path.value}) share one resource through the dispatcher "
            "([iqp] policy edf)",
            started,
        )

        wait = (window_start - LEAD - datetime.now(UTC)).total_seconds()
        if wait > 0:
            log(f"replay starts in {wait:.0f}s ({LEAD.total_seconds():.0f}s before the window opens)", started)
            time.sleep(wait)
        else:
            log(f"Airflow came up {-wait:.0f}s later than planned: the window gets fewer files", started)
        with (DEMO_DIR / "replay.log").open("wb") as out:
            replay = subprocess.Popen(
                [
                    str(BIN / "iqp"),
                    "data",
                    "replay",
                    "--source",
                    str(source),
                    "--landing",
                    str(landing),
                    "--speedup",
                    str(SPEEDUP),
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env=airflow.environ(),
            )
        files = FILES + WINDOW_FILES * (windows + TRAILING_WINDOWS - 1)
        log(f"replaying {files} files at {SPEEDUP:g} per second into {landing}", started)

        starts = [window_start + n * window for n in range(windows)]
        # Every window merged first: a verifying Spark session would slow the next window's jobs.
        merged = [wait_for_windows(ledger_url, loaded, start, standalone, started) for start in starts]
        ordered = []
        for rows in merged:
            checked = verify(rows, loaded, started)
            ordered += [checked[e.query] for e in loaded]

        from airflow_iqp.demo.summary import (
            batches_table,
            errors_table,
            grant_rows,
            grants_table,
            window_errors,
            windows_table,
        )
        from airflow_iqp.ledger import session_scope

        print("\nWindows (times relative to the window end):")
        print(windows_table(ordered))
        for start in starts:
            print(
                f"\nBatches of the window from {start:%H:%M:%S} (times from its start; wait = release to the job's "
                f"start, on {path.value}; error = predicted / actual - 1):"
            )
            print(batches_table([r for r in ordered if r.window_start == start]))
        print("\nPredicted against actual cost, per window (a calibration predicts nothing):")
        print(errors_table(ordered))
        print(window_errors(ordered))
        with session_scope(ledger_url) as session:
            grants = grant_rows(session, window_start - window)
        print(f"\nDispatcher grants of the Spark resource (policy {POLICY}; times from the first window's start):")
        print(grants_table(grants, window_start))
        bad = [
            f"{r.query} {r.window_start:%H:%M:%S}" for r in ordered if r.status != "merged" or r.verified is not True
        ]
        late = [f"{r.query} {r.window_start:%H:%M:%S}" for r in ordered if r.deadline_met is not True]
        failed = bool(bad or late)
        print()
        if bad:
            print(f"FAILED: {', '.join(bad)} (a window failed or its result differs from single-pass Spark SQL)")
        else:
            print("every window merged and equals single-pass Spark SQL over the same files")
        if late:
            print(f"FAILED: {', '.join(late)} missed the deadline")
        else:
            print("every window met its deadline")
        login = airflow.password()
        print(f"Airflow UI: {airflow.api}  login: {login[0]} / {login[1]}" if login else f"Airflow UI: {airflow.api}")
        log("demo done", started)
        if not once:
            print("Airflow keeps running; Ctrl-C stops it.", flush=True)
            while standalone.poll() is None:
                time.sleep(1)
    except KeyboardInterrupt:
        print("\ninterrupted")
    except (RuntimeError, TimeoutError) as err:
        print(f"\nFAILED: {err}", file=sys.stderr)
        failed = True
    finally:
        interrupts.stop()  # a Ctrl-C from here on must not cut the clean-up short
        stop_group(replay, grace=5)
        stop_group(standalone)
        stop_connect_server()
        swept = sweep(run)
        by_tag = f" ({len(swept)} found by its run tag)" if swept else ""
        log(f"stopped everything the demo started{by_tag}", started)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
