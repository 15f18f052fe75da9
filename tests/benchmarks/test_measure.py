from __future__ import annotations

import os
import subprocess
import sys

import pytest

from benchmarks.ssbench.measure import (
    CLK_TCK,
    ChildrenCpu,
    ProcSample,
    Sampler,
    Selector,
    Snapshot,
    cpu_seconds,
    members,
    parse_hwm,
    parse_stat,
    peak_rss,
    selected,
    startup_cpu_seconds,
)


def proc(pid, ppid, own=0, child=0, hwm=0, cmdline="", start=None):
    return ProcSample(pid, ppid, pid * 10 if start is None else start, own, child, hwm, cmdline)


def snap(at, *procs):
    return Snapshot(at, {p.pid: p for p in procs})


def test_parse_stat_counts_fields_from_the_last_parenthesis():
    fields = ["S", "7", *["0"] * 9, "11", "12", "13", "14", *["0"] * 4, "987", "0"]
    text = f"42 (java (main) x) {' '.join(fields)}"
    assert parse_stat(text) == (7, 23, 27, 987, 42)


def test_parse_stat_reads_this_process():
    with open(f"/proc/{os.getpid()}/stat") as f:
        ppid, own, _, start, pid = parse_stat(f.read())
    assert (pid, ppid) == (os.getpid(), os.getppid())
    assert start > 0
    assert own >= 0


def test_parse_hwm_in_bytes_and_zero_for_a_zombie():
    assert parse_hwm("Name:\tjava\nVmHWM:\t    1900 kB\nVmRSS:\t 100 kB\n") == 1900 * 1024
    assert parse_hwm("Name:\tjava\nState:\tZ (zombie)\n") == 0


def test_selected_takes_roots_pattern_matches_and_descendants_minus_exclusions():
    procs = {
        p.pid: p
        for p in (
            proc(1, 0, cmdline="init"),
            proc(10, 1, cmdline="airflow worker"),
            proc(11, 10, cmdline="airflow task"),
            proc(12, 11, cmdline="spark-submit partial_job.py"),
            proc(13, 12, cmdline="java SparkSubmit"),
            proc(20, 1, cmdline="python unrelated"),
        )
    }
    spark = Selector(pattern=r"spark-submit")
    airflow = Selector(pattern=r"^airflow", exclude=spark)
    ident = {pid: procs[pid].identity for pid in procs}
    assert selected(procs, spark) == {ident[12], ident[13]}
    assert selected(procs, airflow) == {ident[10], ident[11]}
    assert selected(procs, Selector(pids=frozenset({11}))) == {ident[11], ident[12], ident[13]}


def test_parents_select_their_descendants_but_not_themselves():
    procs = {
        p.pid: p
        for p in (
            proc(10, 1, cmdline="python benchmark loop"),
            proc(12, 10, cmdline="spark-submit partial_job.py"),
            proc(13, 12, cmdline="java SparkSubmit"),
            proc(20, 1, cmdline="python unrelated"),
        )
    }
    ident = {pid: procs[pid].identity for pid in procs}
    assert selected(procs, Selector(parents=frozenset({10}))) == {ident[12], ident[13]}


def test_members_are_sticky_once_picked():
    first = snap(0, proc(5, 1, cmdline="java SparkSubmit"))
    later = snap(1, proc(5, 1, cmdline="java"))  # same identity, pattern no longer matches
    assert members([first, later], Selector(pattern="SparkSubmit")) == {(5, 50)}


def test_cpu_seconds_counts_growth_and_newcomers_from_zero():
    t = CLK_TCK
    snapshots = [
        snap(0, proc(2, 1, own=5 * t)),
        snap(1, proc(2, 1, own=6 * t), proc(3, 2, own=1 * t)),
        snap(2, proc(2, 1, own=8 * t), proc(3, 2, own=3 * t)),
    ]
    side = {(2, 20), (3, 30)}
    assert cpu_seconds(snapshots, side) == pytest.approx(3 + 3)
    assert startup_cpu_seconds(snapshots[0], side) == pytest.approx(5)


def test_a_child_reaped_by_a_member_parent_is_counted_once_in_full():
    t = CLK_TCK
    snapshots = [
        snap(0, proc(2, 1, own=1 * t), proc(3, 2, own=2 * t)),
        snap(1, proc(2, 1, own=1 * t), proc(3, 2, own=4 * t)),
        # the child exited after spending 5 s in all; the parent waited for it
        snap(2, proc(2, 1, own=1 * t, child=5 * t)),
    ]
    assert cpu_seconds(snapshots, {(2, 20), (3, 30)}) == pytest.approx(5 - 2)


def test_a_foreign_child_reaped_by_a_member_is_taken_out_of_the_members_count():
    t = CLK_TCK
    snapshots = [
        snap(0, proc(2, 1, own=1 * t), proc(3, 2, own=0)),
        snap(1, proc(2, 1, own=2 * t), proc(3, 2, own=4 * t)),
        snap(2, proc(2, 1, own=2 * t, child=4 * t)),
    ]
    assert cpu_seconds(snapshots, {(2, 20)}) == pytest.approx(1)
    assert cpu_seconds(snapshots, {(3, 30)}) == pytest.approx(4)


def test_a_member_reaped_elsewhere_counts_up_to_its_last_sample():
    t = CLK_TCK
    snapshots = [
        snap(0, proc(3, 9, own=1 * t)),
        snap(1, proc(3, 9, own=3 * t)),
        snap(2),
    ]
    assert cpu_seconds(snapshots, {(3, 30)}) == pytest.approx(2)


def test_peak_rss_is_the_largest_sum_of_live_members_high_water_marks():
    snapshots = [
        snap(0, proc(2, 1, hwm=100), proc(3, 2, hwm=50), proc(4, 1, hwm=1000)),
        snap(1, proc(2, 1, hwm=120)),
    ]
    assert peak_rss(snapshots, {(2, 20), (3, 30)}) == 150


def test_sampler_measures_a_busy_child_process():
    script = (
        "import sys, time\n"
        "print('ready', flush=True)\n"
        "sys.stdin.readline()\n"
        "end = time.process_time() + 0.4\n"
        "while time.process_time() < end: pass\n"
        "print('done', flush=True)\n"
        "sys.stdin.read()\n"
    )
    child = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.stdin is not None
    assert child.stdout is not None
    try:
        assert child.stdout.readline() == "ready\n"
        sampler = Sampler({"spark": Selector(pids=frozenset({child.pid}))}, interval=0.05)
        sampler.start()
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline() == "done\n"
        sampler.stop()
    finally:
        child.kill()
        child.wait()
    assert cpu_seconds(sampler.snapshots, sampler.side("spark")) == pytest.approx(0.4, abs=0.1)


def test_children_cpu_counts_a_waited_for_subprocess():
    busy = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass\n"
    cpu = ChildrenCpu.start()
    subprocess.run([sys.executable, "-c", busy], check=True)
    assert cpu.seconds() >= 0.3


def test_the_children_of_a_loop_agree_with_its_rusage_of_children():
    # Ours on spark-submit: the jobs (children of the loop) are sampled; the kernel's count of
    # waited-for children is the check. A grandchild reaped by the child is counted once.
    busy = "import time\nend = time.process_time() + 0.4\nwhile time.process_time() < end: pass\n"
    nested = f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', {busy!r}], check=True)\n{busy}"
    sampler = Sampler({"spark": Selector(parents=frozenset({os.getpid()}))}, interval=0.05)
    cpu = ChildrenCpu.start()
    sampler.start()
    subprocess.run([sys.executable, "-c", nested], check=True)
    sampler.stop()
    sampled = cpu_seconds(sampler.snapshots, sampler.side("spark"))
    assert cpu.seconds() >= 0.8
    assert sampled == pytest.approx(cpu.seconds(), abs=0.15)
