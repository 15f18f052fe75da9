"""Every input file exactly once, on SQLite and PostgreSQL: freezing, refusing a second freeze
(also between racing processes), file events once per version, quarantine, frozen identities."""

from __future__ import annotations

import multiprocessing
import random
import threading
import time
import traceback
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import pytest
from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError

from airflow_iqp.constants import BatchReason, FileStatus
from airflow_iqp.exceptions import AlreadyFrozen, LedgerLookupError
from airflow_iqp.ledger import files as ledger_files
from airflow_iqp.ledger import session_scope, store
from airflow_iqp.ledger.files import CHUNK
from airflow_iqp.ledger.models import Batch, StreamFile, Window
from tests.ledger.helpers import DAG, T0, data_file, planned_window

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from airflow_iqp.streams.files import DataFile


def _records(s: Session, status: FileStatus | None = None) -> list[tuple[Any, ...]]:
    query = select(StreamFile.stream, StreamFile.uri, StreamFile.status, StreamFile.window_id, Batch.batch_index)
    query = query.outerjoin(Batch, StreamFile.batch_id == Batch.id).order_by(StreamFile.id)
    if status is not None:
        query = query.where(StreamFile.status == status)
    return [tuple(r) for r in s.execute(query)]


def test_a_batch_freezes_its_files_with_their_identity_once(ledger_db: str) -> None:
    window_id = planned_window(ledger_db)
    files = [data_file("b.parquet", size=7), data_file("a.parquet", size=5)]
    with session_scope(ledger_db) as s:
        assert store.freeze_files(s, window_id, 0, {"sales": files}) == {"sales": [f.uri for f in files]}
    with session_scope(ledger_db) as s:  # a retry, with what the directory holds by then
        again = store.freeze_files(s, window_id, 0, {"sales": [*files, data_file("c.parquet")]})
        assert again == {"sales": [f.uri for f in files]}
        rows = s.scalars(select(StreamFile).order_by(StreamFile.uri)).all()
        assert [(r.uri, r.size, r.modified, r.etag, r.rows, r.status) for r in rows] == [
            (f.uri, f.size, f.modified, f.etag, None, FileStatus.FROZEN) for f in reversed(files)
        ]
        assert store.frozen_files(s, window_id) == {f.uri for f in files}


def test_a_file_frozen_by_any_batch_of_the_dag_is_refused_by_name(ledger_db: str) -> None:
    first = planned_window(ledger_db)
    later = planned_window(ledger_db, start=T0 + timedelta(seconds=10))
    a, b, c = (data_file(name) for name in ("a.parquet", "b.parquet", "c.parquet"))
    with session_scope(ledger_db) as s:
        store.freeze_files(s, first, 0, {"sales": [a, b]})
    for window_id, index in ((first, 1), (later, 0)):
        with pytest.raises(AlreadyFrozen) as info, session_scope(ledger_db) as s:
            store.freeze_files(s, window_id, index, {"sales": [c, b]})
        assert info.value.uris == {b.uri: f"window {T0.isoformat()} batch 0"}
        assert f"DAG {DAG!r}" in str(info.value)
        assert b.uri in str(info.value)
    with session_scope(ledger_db) as s:
        assert [r[1] for r in _records(s)] == [a.uri, b.uri]  # nothing of the refused batch stuck
        assert store.window_summary(s, first).batches[1].files is None
        assert store.freeze_files(s, first, 1, {"sales": [c]}) == {"sales": [c.uri]}  # it may freeze the rest


def test_the_database_itself_holds_a_path_to_one_freeze_per_dag(ledger_db: str) -> None:
    """Other DAGs and other streams may take the same path; the partial unique index refuses a
    second frozen row of one DAG, stream and path even when the store's own check is bypassed."""
    window_id = planned_window(ledger_db)
    other = planned_window(ledger_db, "iqp_other")
    shared = data_file("a.parquet")
    same_path_other_stream = data_file("a.parquet", stream="returns")
    with session_scope(ledger_db) as s:
        store.freeze_files(s, window_id, 0, {"sales": [shared], "returns": [same_path_other_stream]})
        store.freeze_files(s, other, 0, {"sales": [shared]})
    with pytest.raises(AlreadyFrozen), session_scope(ledger_db) as s:
        store.freeze_files(s, window_id, 1, {"sales": [shared]})
    with session_scope(ledger_db) as s:
        row = s.scalars(select(StreamFile).where(StreamFile.stream == "sales", StreamFile.window_id == window_id)).one()
        again = {"query_id": row.query_id, "stream": row.stream, "uri": row.uri, "size": 1, "modified": T0}
    with pytest.raises(IntegrityError, match="uq_stream_files_frozen|UNIQUE constraint failed"):
        with session_scope(ledger_db) as s:
            s.add(StreamFile(**again, status=FileStatus.FROZEN))
    with session_scope(ledger_db) as s:  # a row of another status is no second freeze
        s.add(StreamFile(**again, status=FileStatus.LATE))


def test_bad_file_lists_are_refused_before_anything_is_frozen(ledger_db: str) -> None:
    window_id = planned_window(ledger_db)
    a = data_file("a.parquet")
    with pytest.raises(ValueError, match=f"more than once: sales:{a.uri}"), session_scope(ledger_db) as s:
        store.freeze_files(s, window_id, 0, {"sales": [a, a]})
    with pytest.raises(ValueError, match="is a file of stream 'sales', listed under 'orders'"):
        with session_scope(ledger_db) as s:
            store.freeze_files(s, window_id, 0, {"orders": [a]})
    with pytest.raises(LedgerLookupError, match=f"no window {window_id} batch 9"), session_scope(ledger_db) as s:
        store.freeze_files(s, window_id, 9, {"sales": [a]})
    with session_scope(ledger_db) as s:  # an empty window's one batch freezes no file, once
        assert store.freeze_files(s, window_id, 0, {"sales": []}) == {"sales": []}
        assert store.freeze_files(s, window_id, 0, {"sales": [a]}) == {"sales": []}
        assert _records(s) == []


def test_a_dynamic_batch_freezes_what_it_cuts_or_is_not_cut_at_all(ledger_db: str) -> None:
    window_id = planned_window(ledger_db, ranges=())
    a, b = data_file("a.parquet"), data_file("b.parquet")
    with session_scope(ledger_db) as s:
        index = store.add_dynamic_batch(
            s, window_id, 0, BatchReason.MIN_BATCH, {"sales": [a]}, first=1, last=1, predicted_cost=1.0, now=T0
        )
    with pytest.raises(AlreadyFrozen, match=a.uri), session_scope(ledger_db) as s:
        store.add_dynamic_batch(
            s, window_id, 1, BatchReason.ALL_IN, {"sales": [b, a]}, first=2, last=3, predicted_cost=1.0, now=T0
        )
    with session_scope(ledger_db) as s:
        summary = store.window_summary(s, window_id)
        assert [(x.index, x.slot, x.files) for x in summary.batches] == [(index, 0, {"sales": [a.uri]})]
        assert _records(s) == [("sales", a.uri, FileStatus.FROZEN, window_id, 0)]


def test_frozen_identities_tell_a_rewritten_file_among_thousands(ledger_db: str) -> None:
    window_id = planned_window(ledger_db)
    frozen = [data_file(f"part-{i:05d}.parquet", size=i + 1) for i in range(CHUNK * 2 + 100)]
    with session_scope(ledger_db) as s:
        store.freeze_files(s, window_id, 0, {"sales": frozen})
    rewritten = data_file("part-00007.parquet", size=999, modified=T0 + timedelta(minutes=1))
    unseen = data_file("new.parquet")
    with session_scope(ledger_db, read_only=True) as s:
        found = store.frozen_identities(s, DAG, [f.uri for f in frozen] + [unseen.uri])
    assert len(found) == len(frozen)
    assert unseen.uri not in found
    assert all(found[f.uri].identity == f.identity for f in frozen)
    assert found[rewritten.uri].identity != rewritten.identity
    assert (found[rewritten.uri].window_id, found[rewritten.uri].batch_index) == (window_id, 0)
    with pytest.raises(LedgerLookupError, match="no query of DAG 'nope'"), session_scope(ledger_db) as s:
        store.frozen_identities(s, "nope", [unseen.uri])


def test_events_are_recorded_once_per_file_version_and_late_ones_count(ledger_db: str) -> None:
    window_id = planned_window(ledger_db)
    late = data_file("late.parquet")
    with session_scope(ledger_db) as s:
        assert store.record_file_event(s, DAG, window_id, late, FileStatus.LATE, note="after the merge") is True
    for _ in range(3):  # every later listing sees it again
        with session_scope(ledger_db) as s:
            assert store.record_file_event(s, DAG, window_id, late, FileStatus.LATE) is False
    newer = data_file("late.parquet", size=200, modified=T0 + timedelta(minutes=1))
    with session_scope(ledger_db) as s:
        assert store.record_file_event(s, DAG, window_id, newer, FileStatus.LATE) is True
        assert store.record_file_event(s, DAG, window_id, newer, FileStatus.REWRITTEN) is True
        assert store.record_file_event(s, DAG, None, data_file("orphan.parquet"), FileStatus.LATE) is True
        with pytest.raises(ValueError, match="frozen by a batch"):
            store.record_file_event(s, DAG, window_id, late, FileStatus.FROZEN)
    with session_scope(ledger_db) as s:
        assert store.window_summary(s, window_id).late_files == 2
        assert s.scalar(select(func.count()).select_from(StreamFile)) == 4
        assert s.scalar(select(StreamFile.note).where(StreamFile.size == late.size)) == "after the merge"


def test_a_quarantined_file_leaves_its_batch_and_flags_the_window(ledger_db: str) -> None:
    window_id = planned_window(ledger_db)
    good, bad = data_file("good.parquet"), data_file("bad.parquet")
    with session_scope(ledger_db) as s:
        store.freeze_files(s, window_id, 0, {"sales": [good, bad]})
    for _ in range(2):  # the second time changes nothing
        with session_scope(ledger_db) as s:
            left = store.quarantine_file(s, window_id, 0, "sales", bad.uri, note="footer unreadable")
            assert left == {"sales": [good.uri]}
    with session_scope(ledger_db) as s:
        summary = store.window_summary(s, window_id)
        assert (summary.incomplete, summary.batches[0].files) == (True, {"sales": [good.uri]})
        assert _records(s, FileStatus.QUARANTINED) == [("sales", bad.uri, FileStatus.QUARANTINED, window_id, 0)]
        assert store.frozen_files(s, window_id) == {good.uri, bad.uri}  # taken: no batch of it cuts it again
        assert bad.uri not in store.frozen_identities(s, DAG, [bad.uri])  # and no longer counted
        with pytest.raises(LedgerLookupError, match="file frozen by window .* batch 1 in stream 'sales'"):
            store.quarantine_file(s, window_id, 1, "sales", good.uri)
    # Moved back unchanged, frozen by another batch, unreadable again: still one record of it.
    with session_scope(ledger_db) as s:
        store.freeze_files(s, window_id, 1, {"sales": [bad]})
        store.quarantine_file(s, window_id, 1, "sales", bad.uri, note="still unreadable")
    with session_scope(ledger_db) as s:
        assert _records(s, FileStatus.QUARANTINED) == [("sales", bad.uri, FileStatus.QUARANTINED, window_id, 1)]
        assert s.scalar(select(StreamFile.note).where(StreamFile.status == FileStatus.QUARANTINED)) == (
            "still unreadable"
        )
        assert store.window_summary(s, window_id).batches[1].files == {"sales": []}


def test_a_freeze_that_waits_for_a_concurrent_one_is_refused(ledger_db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """On PostgreSQL the loser's own check runs before the winner commits, so the unique index
    is what stops it (its insert waits for the winner, then fails); on SQLite the loser waits
    for the write lock and its check sees the winner's rows. Either way it names the file."""
    first = planned_window(ledger_db)
    second = planned_window(ledger_db, start=T0 + timedelta(seconds=10))
    contested = data_file("contested.parquet")
    outcome: list[BaseException | None] = []
    checks: list[str] = []
    check = ledger_files._frozen_elsewhere

    def counted(*args: Any) -> dict[str, str]:
        checks.append(threading.current_thread().name)
        return check(*args)

    monkeypatch.setattr(ledger_files, "_frozen_elsewhere", counted)

    def loser() -> None:
        try:
            with session_scope(ledger_db) as s:
                store.freeze_files(s, second, 0, {"sales": [data_file("other.parquet"), contested]})
            outcome.append(None)
        except BaseException as err:  # the test thread reports it
            outcome.append(err)

    with session_scope(ledger_db) as s:
        store.freeze_files(s, first, 0, {"sales": [contested]})
        thread = threading.Thread(target=loser, name="loser")
        thread.start()
        time.sleep(1)  # the loser is now waiting for this transaction
        assert outcome == []
    thread.join(timeout=60)
    assert len(outcome) == 1
    assert isinstance(outcome[0], AlreadyFrozen), outcome
    assert outcome[0].uris == {contested.uri: f"window {T0.isoformat()} batch 0"}
    assert checks.count("loser") == (2 if ledger_db.startswith("postgresql") else 1)
    with session_scope(ledger_db) as s:
        assert _records(s) == [("sales", contested.uri, FileStatus.FROZEN, first, 0)]


ROUNDS = 12
URIS_PER_WORKER = 30


def _race(url: str, worker: int, results: Any) -> None:
    """Cut dynamic batches of random overlapping files in this worker's own window; report
    which files each successful batch took, and record the same late event every round."""
    try:
        rng = random.Random(worker)
        window_id = planned_window(url, start=T0 + timedelta(minutes=worker), ranges=())
        pool: list[DataFile] = [data_file(f"f{i:03d}.parquet") for i in range(URIS_PER_WORKER)]
        won: list[str] = []
        for slot in range(ROUNDS):
            take = rng.sample(pool, 4)
            try:
                with session_scope(url) as s:
                    store.add_dynamic_batch(s, window_id, slot, BatchReason.MIN_BATCH, {"sales": take}, 1, 4, 1.0, T0)
                    store.record_file_event(s, DAG, None, data_file("late.parquet"), FileStatus.LATE)
                won += [f.uri for f in take]
            except AlreadyFrozen as lost:
                if not set(lost.uris) <= {f.uri for f in take}:
                    raise AssertionError(f"refused for files it did not ask for: {lost.uris}") from lost
        results.put((worker, won))
    except Exception:  # the parent shows it
        results.put((worker, traceback.format_exc()))


def test_racing_processes_freeze_every_file_exactly_once(ledger_db: str) -> None:
    planned_window(ledger_db, start=T0 - timedelta(hours=1))  # register the DAG before the race
    ctx = multiprocessing.get_context("fork")
    results = ctx.Queue()
    workers = [ctx.Process(target=_race, args=(ledger_db, w, results)) for w in range(4)]
    for p in workers:
        p.start()
    reported = dict(results.get(timeout=120) for _ in workers)
    for p in workers:
        p.join(timeout=30)
    failures = [r for r in reported.values() if isinstance(r, str)]
    assert not failures, failures[0]
    won = [uri for uris in reported.values() for uri in uris]
    assert len(won) == len(set(won))  # no file went to two batches
    with session_scope(ledger_db) as s:
        frozen = list(s.scalars(select(StreamFile.uri).where(StreamFile.status == FileStatus.FROZEN)))
        assert sorted(frozen) == sorted(won)
        listed = [u for files in s.scalars(select(Batch.files).where(Batch.files.is_not(None))) for u in files["sales"]]
        assert sorted(listed) == sorted(won)  # the batches' lists agree with the frozen rows
        assert s.scalar(select(func.count()).where(StreamFile.status == FileStatus.LATE)) == 1
        assert 0 < len(won) <= URIS_PER_WORKER
        assert s.scalar(select(func.count()).select_from(Window)) == 5


def test_the_settled_anchor_is_the_greatest_file_below_the_stream_frozen_before_a_time(ledger_db: str) -> None:
    """Any DAG's frozen files count; events, later records and another stream whose name
    starts the same do not.
    """
    mine = planned_window(ledger_db)
    later = planned_window(ledger_db, start=T0 + timedelta(seconds=10))
    other = planned_window(ledger_db, dag_id="iqp_other")
    with session_scope(ledger_db) as s:
        store.freeze_files(s, mine, 0, {"sales": [data_file("dt=1/hour=0/a.parquet")]})
        store.freeze_files(s, other, 0, {"sales": [data_file("dt=1/hour=1/b.parquet")]})
        store.freeze_files(s, mine, 1, {"sales": [data_file("dt=1/hour=2/c.parquet")]})
        store.freeze_files(s, later, 0, {"sales2": [data_file("dt=9/z.parquet", stream="sales2")]})
        store.record_file_event(s, DAG, mine, data_file("dt=5/late.parquet"), FileStatus.LATE)
        s.execute(update(StreamFile).values(recorded_at=T0))
        c = "s3://bucket/sales/dt=1/hour=2/c.parquet"
        s.execute(update(StreamFile).where(StreamFile.uri == c).values(recorded_at=T0 + timedelta(hours=3)))
    cutoff = T0 + timedelta(hours=2)
    with session_scope(ledger_db, read_only=True) as s:
        assert store.settled_anchor(s, "s3://bucket/sales", cutoff) == "s3://bucket/sales/dt=1/hour=1/b.parquet"
        assert store.settled_anchor(s, "s3://bucket/sales/", T0 + timedelta(hours=4)) == c
        assert store.settled_anchor(s, "s3://bucket/sales", T0) is None  # nothing recorded before T0
        assert store.settled_anchor(s, "s3://bucket/sal", cutoff) is None  # no file of a stream "sal"
