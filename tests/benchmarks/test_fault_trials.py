"""One quick fault trial through the benchmark's own code: a task process running a partial is
killed with SIGKILL mid-window (the kill happened: the process ran and is gone after it), and the
window still merges exactly, no file in two committed batches (the full trials, every kind, are
`benchmarks/fault_trials.py --trials 20`)."""

from __future__ import annotations

import pytest

from benchmarks.fault_trials import run_trials

pytestmark = pytest.mark.heavy


def test_a_killed_partial_worker_leaves_the_window_exact(tmp_path):
    # A killed lease holder's retry waits its lease out: the default 10 s, renewed every 2.5 s. The
    # dead task's Connect job may outlive it (the server drops it 30-35 s after its client), but
    # nothing of it is committed: the fence.
    [result] = run_trials(tmp_path, ["worker"], seed=15, log=print)

    assert result.target.startswith("task process"), result
    assert result.killed, f"the kill did not happen: {result}"
    assert result.no_duplicates, result.problems
    assert result.exact, result.problems
    assert result.merged is not None
    assert result.next_grant is not None
