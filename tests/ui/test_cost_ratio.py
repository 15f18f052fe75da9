"""The monitor's "cost vs one batch" of a dynamic window against one batch really run over the
same files.

A q1 DAG that learns its cost model (cost_model="learn", the packaged model its prior) runs six
windows over generated TPC-H files: four as one batch each, as a backfill of past windows runs
them (their input is final when they are planned), between them two live dynamic windows of
`BATCHES` same-size batches. Real partial and merge jobs (the jobs' own code, in process on the
session's Spark), recorded as the dispatched tasks record them (dispatcher request and grant,
the batch cut and frozen, its cost, `runtime.costs.observe` refitting and storing the model).
The page's ratio for the last window (its actual cost over the stored model's single batch) is
compared with its actual cost over ONE partial over all its files plus its merge, measured twice
after each one-batch window (the median). Same-size batches are where a model fitted from them alone once
extrapolated five-fold (issue 22: the page said x0.16).

Issue 22 asks for 10%, and this asserts it. The page's one batch is the model at the window's
size, and the model is only as good as the jobs it saw near that size. A live dynamic DAG sees
one: its calibration's large partial, or none with a prior (then the prior's shape). Measured
on 2026-11-27 with that history (the first window as the calibration, the next two dynamic):

- q14, 10 files of 30,000 rows (every job ~0.3 s, nearly all per-job overhead): 9 of 13 runs
  within 10% over three stops, worst -26.4%; q14 at 200,000 rows a file: -7.1, -8.4, -0.6,
  -1.7, -16.3, -11.7%; and with eight warm-up rounds +18.1, -12.8, -0.3%.
- q1, 10 files of 400,000 rows (its single batch ~2 s): -16.3, -5.3, -11.9, -11.4, -0.1%, most
  of it the merge of one partial, which no dynamic window runs: priced from the calibration's
  one merge of two (0.31-0.47 s) and the windows' merges of five, it came to 0.36-0.42 s
  against 0.24-0.30 s measured.

So one job's timing decides it, and on these 2 cores the same job varies by 5-10% at 1-2 s and
by 15-25% at 0.3 s. With three one-batch windows in the history, as a backfill gives, the
model's one batch and merge rest on three such jobs each, here placed between the dynamic
windows so that the machine's drift over the run falls on both sides. At 300,000 rows a file
(one batch ~1.1 s): +0.5, -0.7, -6.3, +0.7, +6.0, +2.3%, and once -10.2%. At 600,000 (~2 s,
as here) the one-batch windows' partials ran 5-8% slower than the single batches measured
right after them over the last window's files (-6.9, -9.2%): those files had been read before,
the windows' own not. So every window's files are read once first, unrecorded: +0.4, -4.6, +5.7, +1.9, -1.3, +1.0,
-2.2%.

On 2026-11-28 the same jobs took ~4 s, and the test failed a fresh-clone `make test` at +15%
(+9.3% in the next). The same 6-file partial, 21 runs in one session, varied by 15% (coefficient
of variation) in its two tasks and by 6.8% split into 8 MB tasks (`SPLIT`), a dozen on two cores:
one disturbed core no longer holds the whole job. This machine also pages out memory idle for a
minute or two (DAMON), page cache included, so each window's and single batch's files are read
into it right before their jobs, as a file just landed is (`cached`). And the single batches
follow the one-batch windows the model's one batch rests on, not every window, so that the
session's warming (one-batch partials 4.25 s in the first window, 3.19 s in the fourth) falls
on both alike; four one-batch windows, two single batches each. Runs: +3.3, +3.0%.
"""

from __future__ import annotations

import statistics
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from airflow_iqp.constants import BatchReason, ExecutionPath, JobKind, Mode, Policy
from airflow_iqp.costfit.batches import Dataset, TpchSource
from airflow_iqp.declaration import LEARN, declare
from airflow_iqp.ledger import dispatch, engine, session_scope, store
from airflow_iqp.planning.record import PlanRecord
from airflow_iqp.queries import load_query
from airflow_iqp.runtime.costs import observe
from airflow_iqp.spark.jobs import merge_job, partial_job
from airflow_iqp.streams.files import DataFile
from airflow_iqp.streams.spec import FileStream
from airflow_iqp.tpch.generate import generate
from airflow_iqp.tpch.manifest import STREAM_DIR
from airflow_iqp.ui import read, views

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from pyspark.sql import SparkSession

    from airflow_iqp.declaration import Declaration
    from airflow_iqp.ledger.dispatch import Lease

QUERY = "q1"
DAG_ID = f"iqp_{QUERY}"
PATH = ExecutionPath.IN_PROCESS
# ~500,000 lineitem rows a file; six windows of 6 files: four as one batch each (a backfill),
# the third and the sixth dynamic, three batches of two files each.
SCALE, FILES, BATCHES, WINDOWS, DYNAMIC = 3.0, 6, 3, 6, (2, 5)
WARM_ROUNDS = 2  # the windows' and the single batch's jobs a fresh session runs, unrecorded, first
SINGLES = 2  # single batches measured right after each one-batch window
SPLIT = "8m"  # spark.sql.files.maxPartitionBytes for the test's jobs: a dozen tasks on two cores, not two
TOLERANCE = 0.1
WINDOW = timedelta(minutes=2)
START = datetime(2026, 1, 1, 10, 0, tzinfo=UTC)


def timed(job: Callable[[], dict[str, Any]]) -> tuple[float, dict[str, Any]]:
    """Seconds the job took, as the task records its cost, and its commit marker."""
    began = time.perf_counter()
    marker = job()
    return time.perf_counter() - began, marker


def declaration(data: Dataset, tmp_path: Path) -> Declaration:
    return declare(
        dag_id=DAG_ID,
        query=QUERY,
        window=WINDOW,
        deadline=timedelta(seconds=150),
        streams={"lineitem": FileStream(str(data.root / STREAM_DIR / "lineitem"))},
        output=str(tmp_path / "results" / "{dag_id}" / "{window_start}"),
        rate=LEARN,
        cost_model=LEARN,
        mode=Mode.DYNAMIC,
        alpha=0.1,
        tau_max=timedelta(seconds=60),
    )


class Window:
    """One dynamic window in the ledger, its jobs granted and recorded on a clock of their own."""

    def __init__(self, url: str, decl: Declaration, start: datetime) -> None:
        self.url, self.decl, self.now = url, decl, start
        self.deadline = start + WINDOW + decl.deadline
        with session_scope(url) as s:
            store.register_query(s, dag_id=DAG_ID, name=QUERY, sql=decl.query.sql, mode=Mode.DYNAMIC, params={})
            plan = PlanRecord(mode=Mode.DYNAMIC)
            self.id = store.record_plan(s, DAG_ID, start, start + WINDOW, self.deadline, 0, plan, [])

    def granted(self, kind: JobKind, slot: int) -> Lease:
        with session_scope(self.url) as s:
            dispatch.register(
                s,
                window_id=self.id,
                query=DAG_ID,
                kind=kind,
                slot=slot,
                reason=BatchReason.MIN_BATCH if kind is JobKind.PARTIAL else BatchReason.ALL_PROCESSED,
                deadline=self.deadline,
                remaining_cost=10.0,
                lease_seconds=600.0,
                now=self.now,
            )
            (lease,) = dispatch.grant(s, policy=Policy.EDF, resources=1, now=self.now)
        return lease

    def batch(self, slot: int, files: list[str], seconds: float, rows: int) -> None:
        lease = self.granted(JobKind.PARTIAL, slot)
        listed = [DataFile("lineitem", f"file://{f}", f.rsplit("/", 1)[-1], 1, START) for f in files]
        with session_scope(self.url) as s:
            cut = {"lineitem": listed}
            index = store.add_dynamic_batch(s, self.id, slot, BatchReason.MIN_BATCH, cut, 1, len(files), 1.0, self.now)
            store.start_batch(s, self.id, index, started_at=self.now)
            self.now += timedelta(seconds=seconds)
            store.finish_batch(s, self.id, index, self.now - timedelta(seconds=seconds), self.now, rows, seconds, "-")
            observe(s, self.decl, PATH, JobKind.PARTIAL, rows, seconds)
            dispatch.release(s, lease, self.now)

    def merge(self, partials: int, seconds: float, rows: int) -> None:
        lease = self.granted(JobKind.MERGE, -1)
        with session_scope(self.url) as s:
            self.now += timedelta(seconds=seconds)
            store.record_merge(s, self.id, self.now, rows, "-")
            observe(s, self.decl, PATH, JobKind.MERGE, partials, seconds)
            dispatch.release(s, lease, self.now)


def run_window(
    window: Window, source: TpchSource, batches: list[range], out: Path, spark: SparkSession
) -> tuple[list[float], int]:
    """Run and record the window's batches and merge; their seconds, and the rows it read."""
    partials, costs, total_rows = [], [], 0
    for slot, units in enumerate(batches):
        output = out / f"partial{slot}"
        spec = source.partial_spec(units, output)
        seconds, marker = timed(lambda: partial_job.run(spec, spark))
        rows = sum(marker["input_rows"].values())
        window.batch(slot, source.data.files("lineitem", units), seconds, rows)
        partials.append(output)
        costs.append(seconds)
        total_rows += rows
    merge_seconds, _ = timed(lambda: merge_job.run(source.merge_spec(partials, out / "merged"), spark))
    window.merge(len(batches), merge_seconds, total_rows)
    return [*costs, merge_seconds], total_rows


def cached(data: Dataset, units: range) -> None:
    """The files of `units` read into the page cache, as a file just landed is.

    This machine pages out memory left idle for a minute or two (DAMON's `pageout`), page cache
    included: the single batches, over files read again and again, ran 5-10% faster than the
    windows' jobs over files last read minutes before, and the page's one batch came out that
    much above the measured one.
    """
    for name in data.files("lineitem", units):
        Path(name).read_bytes()


def measured_single(source: TpchSource, units: range, out: Path, spark: SparkSession) -> tuple[float, float, int]:
    """ONE partial over all of `units` plus its merge, with the same jobs: their seconds and the
    rows the partial read.
    """
    cached(source.data, units)
    partial_s, marker = timed(lambda: partial_job.run(source.partial_spec(units, out / "partial"), spark))
    merge_s, _ = timed(lambda: merge_job.run(source.merge_spec([out / "partial"], out / "merged"), spark))
    return partial_s, merge_s, sum(marker["input_rows"].values())


@pytest.fixture
def split_finely(spark: SparkSession) -> Iterator[None]:
    """The session's file splits at `SPLIT` for the test, restored after (the session is shared)."""
    key = "spark.sql.files.maxPartitionBytes"
    saved = str(spark.conf.get(key))
    spark.conf.set(key, SPLIT)
    yield
    spark.conf.set(key, saved)


@pytest.mark.usefixtures("split_finely")
def test_the_pages_cost_ratio_is_near_a_measured_single_batchs(spark: SparkSession, tmp_path: Path) -> None:
    generate(tmp_path / "data", scale=SCALE, files=WINDOWS * FILES)
    data = Dataset.open(tmp_path / "data")
    source = TpchSource(data, load_query(QUERY))
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    decl = declaration(data, tmp_path)
    size = FILES // BATCHES
    firsts = range(0, WINDOWS * FILES, FILES)
    windows = [
        [range(i, i + size) for i in range(first, first + FILES, size)]
        if n in DYNAMIC
        else [range(first, first + FILES)]
        for n, first in enumerate(firsts)
    ]
    last = windows[-1][0].start, windows[-1][-1].stop
    # The ledger is created (migrated) and the windows planned before the warm-up: the first
    # recorded job ran right after the migration and was 10-80% slower than a 2-file one.
    recorded = [Window(url, decl, START + n * WINDOW) for n in range(len(windows))]
    # A fresh session's first jobs of a kind pay its warm-up (JIT, class loading, code generation
    # per plan: a merge of one partial and the union of several are different plans); a server's
    # that has run a few windows do not. Warm it up with every kind of job the windows and the
    # single batch run, unrecorded.
    for warm in range(WARM_ROUNDS):
        for kind, batches in enumerate([windows[0], windows[-1]]):
            out = tmp_path / f"warm{warm}-{kind}"
            for n, units in enumerate(batches):
                partial_job.run(source.partial_spec(units, out / f"partial{n}"), spark)
            merge_job.run(source.merge_spec([out / f"partial{n}" for n in range(len(batches))], out / "merged"), spark)
    # The single batches over the last window's files are measured right after each one-batch
    # window, not all of them after the last: the model's one batch rests on those windows, and
    # a machine whose speed drifts meanwhile (other work starting or ending, the session's JVM
    # still warming) would otherwise be measured at another speed than the one the model saw.
    # The median is compared.
    jobs, singles = [], []
    for n, batches in enumerate(windows):
        cached(data, range(batches[0].start, batches[-1].stop))
        jobs.append(run_window(recorded[n], source, batches, tmp_path / f"w{n}", spark)[0])
        if n not in DYNAMIC:
            singles += [
                measured_single(source, range(*last), tmp_path / f"single{n}-{k}", spark) for k in range(SINGLES)
            ]
    partial_s = statistics.median(p for p, _, _ in singles)
    merge_s = statistics.median(m for _, m, _ in singles)
    (rows,) = {r for _, _, r in singles}

    with session_scope(url, read_only=True) as s:
        query = read.query_of_dag(s, DAG_ID)
        assert query is not None
        row = read.windows(s, query, 1)[0]  # the newest: the last dynamic one
        model = read.cost_model(s, DAG_ID)
    summary = views.summarize(row, START + timedelta(hours=1), model)
    engine(url).dispose()
    engine(url, read_only=True).dispose()
    assert row.actual_tuples == rows
    assert summary.cost_s is not None
    assert summary.cost_ratio is not None
    assert summary.single_batch_cost_s is not None
    assert model is not None
    actual_ratio = summary.cost_s / (partial_s + merge_s)
    print(
        f"\njobs by window (s; batches, then the merge): {[[round(x, 2) for x in w] for w in jobs]}\n"
        f"single batches after the one-batch windows (s; partial, merge): "
        f"{[(round(p, 2), round(m, 2)) for p, m, _ in singles]}\n"
        f"last window: {BATCHES} batches over {rows} rows, actual {summary.cost_s:.2f} s\n"
        f"one batch: stored {summary.cost_model} model {summary.single_batch_cost_s:.2f} s "
        f"[95%: {summary.single_batch_low_s:.2f}, {summary.single_batch_high_s:.2f}], "
        f"measured {partial_s + merge_s:.2f} s (partial {partial_s:.2f} + merge {merge_s:.2f}); "
        f"the model's partial {model.partial_seconds(rows):.2f} + merge {model.merge_seconds(1):.2f}\n"
        f"cost vs one batch: page x{summary.cost_ratio:.3f}, measured x{actual_ratio:.3f}, "
        f"off by {summary.cost_ratio / actual_ratio - 1:+.1%}"
    )
    assert summary.cost_ratio == pytest.approx(actual_ratio, rel=TOLERANCE)
