"""The Spark side of one run, in its own process (so its CPU and memory are its own).

    python -m benchmarks.ssbench.worker SPEC.json

Modes (`spec["mode"]`):
- `ss`: one Structured Streaming query over the landing directory with the given trigger:
  `default`, `processingTime` (`interval_s`) or `availableNow` (started when the window closes);
- `ours`: one policy of ours (`ours.py`: one batch, static plan, dynamic) with its jobs on one
  execution path (`jobs.py`: in this process's warm session, a spark-submit per job, or a
  session per job on a Spark Connect server this process starts);
- `truth`: the single-pass batch result of each query over all generated files.

It talks to the harness in JSON lines: it writes `ready` once its session (and for `ss` with a
continuous trigger, its query; for `ours` on Connect, the server, whose pids it names) is up,
reads the window from stdin, and writes `result` (or `error`) once the final result is read.
Spark's own output goes to stderr.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from airflow_iqp.constants import ExecutionPath
from airflow_iqp.declaration import ArrivalRate
from airflow_iqp.queries import load_query
from benchmarks.ssbench import jobs, producer
from benchmarks.ssbench.check import canonical_rows
from benchmarks.ssbench.jobs import JOB_PATHS
from benchmarks.ssbench.ours import POLICIES, Setting, Window
from benchmarks.ssbench.progress import summarize
from benchmarks.ssbench.shape import OutputMode, streaming_form

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery
    from pyspark.sql.types import StructType

    from airflow_iqp.queries import QueryDefinition
    from benchmarks.ssbench.shape import StreamingForm

RESULT_VIEW = "ss_result"
PROGRESS_KEPT = 100_000  # progress events a query keeps (default 100): a run must lose none


def session(conf: dict[str, str]) -> SparkSession:
    return jobs.session({**conf, "spark.sql.streaming.numRecentProgressUpdates": str(PROGRESS_KEPT)})


def register_static(spark: SparkSession, source: Path, query: QueryDefinition) -> None:
    for table in query.static_tables:
        spark.read.parquet(str(producer.static_dir(source, table))).createOrReplaceTempView(table)


def schemas(spark: SparkSession, source: Path, streams: tuple[str, ...]) -> dict[str, StructType]:
    """Each stream's schema, from one batch-read file (streaming schema inference is off by default)."""
    return {s: spark.read.parquet(str(producer.stream_files(source, s)[0])).schema for s in streams}


def expected_rows(source: Path, streams: tuple[str, ...]) -> int:
    manifest = producer.load(source)
    return sum(f.rows for s in streams for f in manifest.streams[s])


class Messages:
    """JSON lines to the harness on a private copy of stdout; fd 1 then points at stderr, so
    nothing the JVM or a library prints can end up among the messages.
    """

    def __init__(self) -> None:
        self.out: TextIO = os.fdopen(os.dup(1), "w", buffering=1)
        os.dup2(2, 1)

    def send(self, event: str, **fields: Any) -> None:
        self.out.write(json.dumps({"event": event, **fields}) + "\n")

    @staticmethod
    def receive() -> dict[str, Any]:
        line = sys.stdin.readline()
        if not line:
            raise SystemExit("the harness closed the pipe")
        message: dict[str, Any] = json.loads(line)
        return message


def sleep_until(epoch: float) -> None:
    time.sleep(max(0.0, epoch - time.time()))


class Upserts:
    """The Update-mode sink: each micro-batch's changed rows replace the earlier row of their key."""

    def __init__(self, key_positions: tuple[int, ...]) -> None:
        self.key_positions = key_positions
        self.rows: dict[tuple[Any, ...], Any] = {}
        self.schema: StructType | None = None

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        self.schema = batch.schema
        for row in batch.collect():
            self.rows[tuple(row[i] for i in self.key_positions)] = row


class ReadyWhenComplete:
    """A progress listener that flags the batch after which every expected input row was read."""

    def __init__(self, expected: int) -> None:
        from pyspark.sql.streaming import StreamingQueryListener

        self.expected = expected
        self.seen = 0
        self.done = threading.Event()
        outer = self

        class Listener(StreamingQueryListener):
            def onQueryStarted(self, event: Any) -> None:
                pass

            def onQueryProgress(self, event: Any) -> None:
                outer.seen += event.progress.numInputRows
                if outer.seen >= outer.expected:
                    outer.done.set()

            def onQueryIdle(self, event: Any) -> None:
                pass

            def onQueryTerminated(self, event: Any) -> None:
                outer.done.set()

        self.listener = Listener()


def run_ss(spec: dict[str, Any], messages: Messages) -> None:
    source, landing, workdir = Path(spec["source"]), Path(spec["landing"]), Path(spec["workdir"])
    query = load_query(spec["query"])
    spark = session(spec["conf"])
    register_static(spark, source, query)
    shapes = schemas(spark, source, query.streams)
    event_time = producer.load(source).event_time_columns
    form = streaming_form(query.sql, query.streams, event_time, {s: shapes[s].fieldNames() for s in query.streams})

    def streams_from(directory: Path) -> None:
        for stream in query.streams:
            (directory / stream).mkdir(parents=True, exist_ok=True)
            frame = spark.readStream.schema(shapes[stream]).parquet(str(directory / stream))
            if stream in form.watermarked:
                frame = frame.withWatermark(event_time[stream], spec["watermark"])
            frame.createOrReplaceTempView(stream)

    # Warm-up, like ours: the same streaming query once over the first file, in a directory of its own.
    warm = workdir / "warm-up"
    streams_from(warm)
    for stream in query.streams:
        shutil.copy(producer.stream_files(source, stream)[0], warm / stream)
    _writer(spark, form, "availableNow", 0.0, Upserts(form.key_positions), warm / "checkpoint", "warm_up")
    streams_from(landing)
    expected = expected_rows(source, query.streams)
    ready = ReadyWhenComplete(expected)
    spark.streams.addListener(ready.listener)
    upserts = Upserts(form.key_positions)

    def start() -> StreamingQuery:
        trigger, interval = spec["trigger"], spec["interval_s"]
        return _writer(spark, form, trigger, interval, upserts, workdir / "checkpoint", RESULT_VIEW)

    query_handle = None if spec["trigger"] == "availableNow" else start()
    messages.send("ready")
    window = messages.receive()
    if query_handle is None:
        sleep_until(window["end"])
        query_handle = start()
    elif not ready.done.wait(max(0.0, window["give_up"] - time.time())):
        raise TimeoutError(f"the query read {ready.seen} of {expected} input rows by the time limit")
    failure = query_handle.exception()
    if failure is not None:
        raise RuntimeError(f"the streaming query failed: {failure}")
    rows = _final_rows(spark, form, upserts)
    summary = summarize([json.loads(p.json) for p in query_handle.recentProgress], expected)
    if summary.ready_at is None:
        raise RuntimeError(f"the query read {summary.input_rows} of {expected} input rows")
    messages.send(
        "result",
        rows=rows,
        ready_at=summary.ready_at,
        busy_s=summary.busy_s,
        batches=summary.batches,
        dropped_by_watermark=summary.dropped_by_watermark,
        state_bytes=summary.state_bytes,
    )
    query_handle.stop()


def _writer(
    spark: SparkSession,
    form: StreamingForm,
    trigger: str,
    interval_s: float,
    upserts: Upserts,
    checkpoint: Path,
    name: str,
    wait: bool = True,
) -> StreamingQuery:
    """Start the streaming query; with availableNow (and `wait`), return once it has read
    everything there is.
    """
    writer = spark.sql(form.sql).writeStream.outputMode(form.mode.value).option("checkpointLocation", str(checkpoint))
    if form.mode is OutputMode.COMPLETE:
        writer = writer.format("memory").queryName(name)
    else:
        writer = writer.foreachBatch(upserts)
    if trigger == "processingTime":
        writer = writer.trigger(processingTime=f"{round(interval_s * 1000)} milliseconds")
    elif trigger == "availableNow":
        writer = writer.trigger(availableNow=True)
    handle = writer.start()
    if trigger == "availableNow" and wait:
        handle.awaitTermination()  # raises the query's failure
    return handle


def _final_rows(spark: SparkSession, form: StreamingForm, upserts: Upserts) -> list[Any]:
    """The sink's final result with ORDER BY / LIMIT applied, as canonical rows."""
    if form.mode is OutputMode.UPDATE:
        if upserts.schema is None:
            return []
        spark.createDataFrame(list(upserts.rows.values()), upserts.schema).createOrReplaceTempView(RESULT_VIEW)
    return canonical_rows(spark.sql(form.read_sql(RESULT_VIEW)).collect())


def run_ours(spec: dict[str, Any], messages: Messages) -> None:
    """Ours on the window: a policy of ours.py, its jobs on one execution path of jobs.py."""
    source, landing, workdir = Path(spec["source"]), Path(spec["landing"]), Path(spec["workdir"])
    query = load_query(spec["query"])
    manifest = producer.load(source)
    names = [f.name for f in manifest.streams[query.streams[0]]]
    rows_per_file = sum(f.rows for s in query.streams for f in manifest.streams[s]) / len(names)
    execution_path = ExecutionPath(spec["path"])
    setting = Setting(
        query=query.name,
        window_s=len(names) * spec["seconds_per_file"],
        deadline_s=spec["deadline_s"],
        landing=landing,
        rate=ArrivalRate(1.0 / spec["seconds_per_file"], rows_per_file),
        execution_path=execution_path,
        static={t: producer.static_dir(source, t) for t in query.static_tables},
    )
    run = POLICIES[spec["policy"]](setting)  # plans now; a refused declaration ends the run here
    path = JOB_PATHS[execution_path](spec["conf"], query.name, source, workdir)
    try:
        if path.warm_spark:
            # Warm-up, like a long-running session or server: the same jobs once over the first file.
            warm = Window(query.streams, names[:1], source / "stream", 0.0, 0.0, workdir / "warm-up", path)
            warm.run_partial(warm.names)
            warm.merge()
        messages.send("ready", spark_pids=sorted(path.spark_pids))
        message = messages.receive()
        began = resource.getrusage(resource.RUSAGE_SELF)
        window = Window(query.streams, names, landing, message["start"], message["end"], workdir / "ours", path)
        account = run(window)
        ended = resource.getrusage(resource.RUSAGE_SELF)
    finally:
        path.close()
    messages.send(
        "result",
        rows=account.rows,
        ready_at=account.ready_at,
        busy_s=account.busy_s,
        batches=account.batches,
        # The loop's own CPU over the span (Airflow's stand-in) when the jobs run in other processes.
        loop_cpu_s=(ended.ru_utime + ended.ru_stime) - (began.ru_utime + began.ru_stime),
    )


def run_truth(spec: dict[str, Any], messages: Messages) -> None:
    """The single-pass Spark SQL result of each query over all of the stream's files."""
    source = Path(spec["source"])
    spark = session(spec["conf"])
    for name in spec["queries"]:
        query = load_query(name)
        register_static(spark, source, query)
        for stream in query.streams:
            files = map(str, producer.stream_files(source, stream))
            spark.read.parquet(*files).createOrReplaceTempView(stream)
        messages.send("truth", query=name, rows=canonical_rows(spark.sql(query.sql).collect()))


MODES = {"ss": run_ss, "ours": run_ours, "truth": run_truth}


def main() -> None:
    messages = Messages()
    spec = json.loads(Path(sys.argv[1]).read_text())
    try:
        MODES[spec["mode"]](spec, messages)
    except Exception as err:
        refused = type(err).__name__ in {"AnalysisException", "UnsupportedQuery", "InvalidDeclaration"}
        messages.send("error", refused=refused, error=f"{type(err).__name__}: {err}".splitlines()[0][:500])
        traceback.print_exc()
        sys.exit(1)


if __name__ == "__main__":
    main()
