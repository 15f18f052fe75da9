"""The project's vocabulary: every mode, state, kind, reason and policy, as string enums.

String enums compare equal to their values, so the ledger's columns, XCom payloads and
trigger kwargs keep plain strings, while code and mypy see one closed set per concept.
Importing this module imports nothing else of the project, so the pure core may use it.
"""

from __future__ import annotations

from enum import StrEnum


class Mode(StrEnum):
    """How a query's windows are batched: planned in advance, or cut live by MinBatch."""

    STATIC = "static"
    DYNAMIC = "dynamic"


class Policy(StrEnum):
    """Which waiting job the shared Spark resource goes to next (the paper's Section 4.3)."""

    EDF = "edf"  # earliest deadline first
    LLF = "llf"  # least laxity first (eq. 9)
    SJF = "sjf"  # shortest remaining work first
    RR = "rr"  # round robin: the query served least recently


class JobKind(StrEnum):
    """The two Spark jobs of a window."""

    PARTIAL = "partial"
    MERGE = "merge"


class ExecutionPath(StrEnum):
    """How a job reaches Spark; cost models are fitted per path."""

    IN_PROCESS = "in_process"  # one shared session in this process
    SPARK_SUBMIT = "spark_submit"  # one application per job
    SPARK_CONNECT = "spark_connect"  # a session on a Spark Connect server


class CostSource(StrEnum):
    """Where a cost model came from."""

    CALIBRATION = "calibration"  # the first window's timings: too few for residuals to mean much
    REFIT = "refit"  # refit on the DAG's own observations
    FILE = "file"  # fitted by `iqp fit-cost-model`


class WindowStatus(StrEnum):
    """A window's life in the ledger."""

    PLANNED = "planned"
    RUNNING = "running"
    MERGED = "merged"
    FAILED = "failed"


class BatchStatus(StrEnum):
    """A batch's life in the ledger."""

    PLANNED = "planned"
    WAITING = "waiting"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    SKIPPED = "skipped"


class FileStatus(StrEnum):
    """What the ledger records of one input file of a DAG's stream."""

    FROZEN = "frozen"  # taken by a batch: counted once, never again
    LATE = "late"  # came after its window's merge had started
    REWRITTEN = "rewritten"  # a name frozen before came back with other contents: refused
    QUARANTINED = "quarantined"  # unreadable: left out of its batch, the window's result incomplete


class RequestState(StrEnum):
    """A dispatcher request's life: waiting, granted a lease, then released or expired."""

    WAITING = "waiting"
    GRANTED = "granted"
    RELEASED = "released"
    EXPIRED = "expired"


class BatchReason(StrEnum):
    """Why a job asked for the resource when it did."""

    MIN_BATCH = "min_batch"  # MinBatch tuples have arrived
    ALL_IN = "all_in"  # the window's last tuple is in
    WINDOW_CLOSED = "window_closed"  # the window ended with fewer than MinBatch waiting
    SLOW_INPUT = "slow_input"  # MinBatch should have arrived by now (Section 4.4)
    PLANNED = "planned"  # a static plan's batch whose files have landed
    RETRY = "retry"  # a failed batch runs its frozen files again
    ALL_PROCESSED = "all_processed"  # every batch is done: the merge
    LATE = "late"  # files that came after their window merged, re-merged into it


class OnLate(StrEnum):
    """What a file that comes after its window's merge started does to the window's result."""

    RECORD = "record"  # recorded and reported on the window; the result stays
    REMERGE = "remerge"  # also processed, and a corrected result replaces the old one


class OnCorrupt(StrEnum):
    """What an unreadable input file does to its batch."""

    FAIL = "fail"  # the batch fails with a message naming the file
    QUARANTINE = "quarantine"  # the file is moved aside and recorded; the result is flagged incomplete


OPEN_REQUEST_STATES = (RequestState.WAITING, RequestState.GRANTED)
OPEN_WINDOW_STATES = (WindowStatus.PLANNED, WindowStatus.RUNNING)
CLOSED_WINDOW_STATES = (WindowStatus.MERGED, WindowStatus.FAILED)  # its merge ran: nothing more is planned
