"""One Structured Streaming application running many queries at once, in its own process (so its
CPU and memory are the application's): the streaming side of Tier M.

    python -m benchmarks.tierm.ss_app SPEC.json

The Tier S worker (`benchmarks.ssbench.worker`) runs one query; this runs every query of the spec
in one Spark session, each as its own streaming query over the shared landing directory, with the
same trigger: `default`, `processingTime` (`interval_s`) or `availableNow` (started at the window
close, one after another: twelve window-sized first batches at once ran the driver out of heap).
A query Spark refuses to stream is reported as refused and the others go on. It speaks the
worker's JSON lines: `ready`, then the window from stdin, then one `result` holding
every query's rows, ready time and progress summary.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.errors import StreamingQueryException

from airflow_iqp.queries import load_query
from benchmarks.ssbench import producer
from benchmarks.ssbench.check import canonical_rows
from benchmarks.ssbench.progress import summarize
from benchmarks.ssbench.shape import OutputMode, streaming_form
from benchmarks.ssbench.worker import Messages, Upserts, _writer, expected_rows, register_static, schemas, session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery
    from pyspark.sql.types import StructType

    from benchmarks.ssbench.shape import StreamingForm

REFUSALS = ("AnalysisException", "UnsupportedQuery", "StreamingQueryException")


class Progress:
    """Input rows read so far by each query, from a listener; a query is done once it read its
    expected rows. Events carry the query's id (an Update-mode query has no name), which is known
    once `start` returns, so rows are counted by id and looked up by name.
    """

    def __init__(self, expected: dict[str, int]) -> None:
        from pyspark.sql.streaming import StreamingQueryListener

        self.expected = expected
        self.ids: dict[str, str] = {}  # query name -> its streaming query's id
        self.read: dict[str, int] = {}  # id -> input rows
        self.changed = threading.Condition()
        outer = self

        class Listener(StreamingQueryListener):
            def onQueryStarted(self, event: Any) -> None:
                pass

            def onQueryProgress(self, event: Any) -> None:
                with outer.changed:
                    key = str(event.progress.id)
                    outer.read[key] = outer.read.get(key, 0) + event.progress.numInputRows
                    outer.changed.notify_all()

            def onQueryIdle(self, event: Any) -> None:
                pass

            def onQueryTerminated(self, event: Any) -> None:
                pass

        self.listener = Listener()

    def started(self, name: str, query_id: str) -> None:
        with self.changed:
            self.ids[name] = query_id

    def seen(self, name: str) -> int:
        return self.read.get(self.ids.get(name, ""), 0)

    def wait_all(self, names: list[str], give_up: float) -> list[str]:
        """Block until every named query read its input (or the time is up); the ones still short."""
        with self.changed:
            while True:
                short = [n for n in names if self.seen(n) < self.expected[n]]
                if not short or time.time() >= give_up:
                    return short
                self.changed.wait(timeout=1.0)


class Query:
    """One query of the application: its streaming form, sink and handle."""

    def __init__(self, name: str, form: StreamingForm, streams: tuple[str, ...]) -> None:
        self.name = name
        self.sink_name = f"tm_{name}"
        self.form = form
        self.streams = streams
        self.upserts = Upserts(form.key_positions)
        self.handle: StreamingQuery | None = None

    def start(
        self, spark: SparkSession, views: Views, trigger: str, interval_s: float, checkpoint: Path, wait: bool = True
    ) -> None:
        views.bind(self)
        self.handle = _writer(spark, self.form, trigger, interval_s, self.upserts, checkpoint, self.sink_name, wait)

    def rows(self, spark: SparkSession) -> list[Any]:
        table = self.sink_name
        if self.form.mode is OutputMode.UPDATE:
            if self.upserts.schema is None:
                return []
            table = f"{self.sink_name}_upserts"
            spark.createDataFrame(list(self.upserts.rows.values()), self.upserts.schema).createOrReplaceTempView(table)
        return canonical_rows(spark.sql(self.form.read_sql(table)).collect())


class Views:
    """The stream views a query's SQL reads, bound to one directory (a query's plan keeps the views
    it was analysed with, so rebinding them for the next query leaves a started one alone).
    """

    def __init__(self, spark: SparkSession, shapes: dict[str, StructType], event_time: dict[str, str]) -> None:
        self.spark = spark
        self.shapes = shapes
        self.event_time = event_time
        self.directory = Path()
        self.watermark = ""

    def bind(self, query: Query) -> None:
        for stream in query.streams:
            (self.directory / stream).mkdir(parents=True, exist_ok=True)
            frame = self.spark.readStream.schema(self.shapes[stream]).parquet(str(self.directory / stream))
            if stream in query.form.watermarked:
                frame = frame.withWatermark(self.event_time[stream], self.watermark)
            frame.createOrReplaceTempView(stream)


def run(spec: dict[str, Any], messages: Messages) -> None:
    source, landing, workdir = Path(spec["source"]), Path(spec["landing"]), Path(spec["workdir"])
    spark = session(spec["conf"])
    definitions = [load_query(name) for name in spec["queries"]]
    for definition in definitions:
        register_static(spark, source, definition)
    every_stream = tuple(sorted({s for d in definitions for s in d.streams}))
    shapes = schemas(spark, source, every_stream)
    event_time = producer.load(source).event_time_columns
    views = Views(spark, shapes, event_time)
    views.watermark = spec["watermark"]
    refused: dict[str, str] = {}
    queries: list[Query] = []
    for d in definitions:
        try:
            columns = {s: shapes[s].fieldNames() for s in d.streams}
            queries.append(Query(d.name, streaming_form(d.sql, d.streams, event_time, columns), d.streams))
        except Exception as err:
            refused[d.name] = f"{type(err).__name__}: {err}".splitlines()[0][:300]
    # Warm-up, as in Tier S: each query once over the first file, in a directory of its own.
    views.directory = workdir / "warm-up"
    for stream in every_stream:
        (views.directory / stream).mkdir(parents=True, exist_ok=True)
        shutil.copy(producer.stream_files(source, stream)[0], views.directory / stream)
    # All at once (started one by one, since each rebinds the views); a query Spark refuses to
    # analyse or to run as a stream is refused, the others go on.
    for step in ("start", "end"):
        for query in list(queries):
            try:
                if step == "start":
                    checkpoint = workdir / "warm-up" / "checkpoints" / query.name
                    query.start(spark, views, "availableNow", 0.0, checkpoint, wait=False)
                elif query.handle is not None:
                    query.handle.awaitTermination()
            except Exception as err:
                if type(err).__name__ not in REFUSALS:
                    raise
                refused[query.name] = f"{type(err).__name__}: {err}".splitlines()[0][:300]
                queries.remove(query)
    for query in queries:
        query.upserts = Upserts(query.form.key_positions)
        query.handle = None
    for query in queries:
        spark.sql(f"DROP VIEW IF EXISTS {query.sink_name}")
    expected = {q.sink_name: expected_rows(source, q.streams) for q in queries}
    progress = Progress(expected)
    spark.streams.addListener(progress.listener)
    views.directory = landing
    trigger, interval = spec["trigger"], spec["interval_s"]

    def start_all() -> None:
        # Started one at a time, since each rebinds the stream views; with availableNow each runs
        # to its end before the next starts (its failure is read from its handle below).
        for query in queries:
            query.start(spark, views, trigger, interval, workdir / "checkpoints" / query.name, wait=False)
            if query.handle is not None:
                progress.started(query.sink_name, str(query.handle.id))
                if trigger == "availableNow":
                    with contextlib.suppress(StreamingQueryException):
                        query.handle.awaitTermination()

    if trigger != "availableNow":
        start_all()
    messages.send("ready", refused=refused)
    window = messages.receive()
    if trigger == "availableNow":
        time.sleep(max(0.0, window["end"] - time.time()))
        start_all()
    short = progress.wait_all([q.sink_name for q in queries], window["give_up"])
    results: dict[str, Any] = {}
    for query in queries:
        handle = query.handle
        failure = None if handle is None else handle.exception()
        if handle is None or failure is not None or query.sink_name in short:
            seen = progress.seen(query.sink_name)
            why = f"failed: {failure}" if failure is not None else f"read {seen} of {expected[query.sink_name]} rows"
            results[query.name] = {"error": str(why).splitlines()[0][:300]}
            continue
        summary = summarize([json.loads(p.json) for p in handle.recentProgress], expected[query.sink_name])
        results[query.name] = {
            "rows": query.rows(spark),
            "ready_at": summary.ready_at,
            "busy_s": summary.busy_s,
            "batches": summary.batches,
            "dropped_by_watermark": summary.dropped_by_watermark,
        }
    messages.send("result", queries=results, refused=refused)
    for query in queries:
        if query.handle is not None:
            query.handle.stop()


def main() -> None:
    messages = Messages()
    spec = json.loads(Path(sys.argv[1]).read_text())
    try:
        run(spec, messages)
    except Exception as err:
        messages.send("error", refused=False, error=f"{type(err).__name__}: {err}".splitlines()[0][:500])
        traceback.print_exc()
        sys.exit(1)


if __name__ == "__main__":
    main()
