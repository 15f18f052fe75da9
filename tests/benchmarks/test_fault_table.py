"""The fault trials' kinds and table, without running a trial."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from benchmarks.fault_trials import kinds_for, main, table
from benchmarks.faults.trial import KINDS, TrialResult


@pytest.mark.parametrize("trials", [1, 6, 20, 23])
def test_every_kind_gets_its_share_of_the_trials(trials):
    counts = Counter(kinds_for(trials, KINDS, random.Random(trials)))

    assert sum(counts.values()) == trials
    assert max(counts.values()) - min(counts.get(k, 0) for k in KINDS) <= 1


def test_the_same_seed_gives_the_same_kinds():
    assert kinds_for(12, KINDS, random.Random(3)) == kinds_for(12, KINDS, random.Random(3))


def _result(index, exact=True, no_duplicates=True, killed=True):
    return TrialResult(
        index, "worker", "task process 7", killed, 4.2, 2, 61.0, None, 80.5, "missed by 20 s", exact, no_duplicates
    )


def _rows(out):
    return [line for line in out.splitlines() if line.startswith("| ") and line[2].isdigit()]


def test_the_table_counts_only_exact_trials_without_duplicates():
    out = table([_result(1), _result(2, exact=False), _result(3, no_duplicates=False), _result(4)])

    rows = _rows(out)
    assert len(rows) == 4
    assert "| NO |" in rows[1]
    assert out.rstrip().endswith("0/4 deadlines met\n2/4 exact\nno kill: 0")


def test_a_trial_whose_kill_did_not_happen_is_counted_apart_not_as_exact():
    out = table([_result(1), _result(2, killed=False), _result(3, exact=False)])

    assert [row.split(" | ")[3] for row in _rows(out)] == ["yes", "NO", "yes"]
    assert "\n1/2 exact\nno kill: 1" in out
    assert "test nothing" not in out


def test_trials_that_killed_nothing_say_so():
    out = table([_result(1, killed=False)])

    assert "0/0 exact\nno kill: 1" in out
    assert out.rstrip().endswith("no trial killed its target: these trials test nothing")


def test_unknown_kinds_are_refused(capsys):
    with pytest.raises(SystemExit):
        main(["--kinds", "worker,gremlin"])
    assert "gremlin" in capsys.readouterr().err
