"""CPU-seconds, peak memory and the processes they belong to, read from the OS (`/proc`, Linux).

The benchmark's cost metric is the CPU time (user + system) every Spark-side process spends over
one span (first file lands -> result ready). It is defined the same way for a one-shot JVM and for
a long-running one, it counts JVM start, polling, listing, GC and idle heartbeats, and it adds up
across processes. A process's own ticks are `utime + stime`; the ticks of children it has waited
for arrive in its `cutime + cstime` when they exit. Sampling the process tree every fraction of a
second therefore accounts for almost everything, with one rule against counting twice: a process
that exits while its parent (of the same side) lives on is counted through the parent.
"""

from __future__ import annotations

import os
import re
import resource
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

PROC = Path("/proc")
CLK_TCK = os.sysconf("SC_CLK_TCK")
Identity = tuple[int, int]  # (pid, start time in ticks since boot): a pid may be reused, this may not


@dataclass(frozen=True)
class ProcSample:
    """One process at one instant: its tree position, CPU ticks and memory."""

    pid: int
    ppid: int
    start_ticks: int
    own_ticks: int  # utime + stime
    child_ticks: int  # cutime + cstime: children this process has waited for
    hwm_bytes: int  # VmHWM: the process's peak resident set so far
    cmdline: str

    @property
    def identity(self) -> Identity:
        return (self.pid, self.start_ticks)

    @property
    def total_ticks(self) -> int:
        return self.own_ticks + self.child_ticks


@dataclass(frozen=True)
class Snapshot:
    """Every process of interest at one instant (`at` is time.monotonic())."""

    at: float
    procs: Mapping[int, ProcSample]


@dataclass(frozen=True)
class Selector:
    """Which processes make up one side (Spark, Airflow): the given pids, every process whose
    command line matches `pattern`, and all descendants of both; the descendants (not the
    processes themselves) of `parents`; minus what `exclude` selects.
    """

    pids: frozenset[int] = frozenset()
    pattern: str | None = None
    exclude: Selector | None = None
    parents: frozenset[int] = frozenset()  # e.g. a loop that runs spark-submit: its jobs are Spark, it is not

    def matches(self, sample: ProcSample) -> bool:
        return sample.pid in self.pids or (
            self.pattern is not None and re.search(self.pattern, sample.cmdline) is not None
        )


def parse_stat(text: str) -> tuple[int, int, int, int, int]:
    """(ppid, own ticks, child ticks, start ticks, pid) from the text of /proc/<pid>/stat.

    The command name sits in parentheses and may itself hold spaces or parentheses, so the fields
    are counted from the last ')'.
    """
    head, _, tail = text.rpartition(")")
    pid = int(head.split("(", 1)[0])
    fields = tail.split()  # fields[0] is field 3 (state) of proc(5)
    utime, stime, cutime, cstime = (int(fields[i]) for i in (11, 12, 13, 14))
    return int(fields[1]), utime + stime, cutime + cstime, int(fields[19]), pid


def parse_hwm(status: str) -> int:
    """VmHWM in bytes from /proc/<pid>/status; 0 for a zombie (it has no memory lines)."""
    match = re.search(r"^VmHWM:\s+(\d+)\s+kB", status, re.MULTILINE)
    return int(match[1]) * 1024 if match else 0


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None  # the process exited between listing and reading


def _read_all(cmdlines: dict[Identity, str]) -> dict[int, tuple[int, int, int, int]]:
    """Pid -> (ppid, own, child, start) for every process; fills `cmdlines` for new identities."""
    found: dict[int, tuple[int, int, int, int]] = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        stat = _read(entry / "stat")
        if stat is None:
            continue
        ppid, own, child, start, pid = parse_stat(stat)
        found[pid] = (ppid, own, child, start)
        if (pid, start) not in cmdlines:
            raw = _read(entry / "cmdline")
            cmdlines[(pid, start)] = (raw or "").replace("\0", " ").strip()
    return found


def selected(procs: Mapping[int, ProcSample], selector: Selector, sticky: Iterable[Identity] = ()) -> set[Identity]:
    """Identities `selector` picks in one snapshot: matches, `sticky` ones still alive, descendants."""
    sticky = set(sticky)
    picked = {
        p.pid
        for p in procs.values()
        if selector.matches(p) or p.identity in sticky or (p.ppid in selector.parents and p.pid not in selector.parents)
    }
    children: dict[int, list[int]] = {}
    for p in procs.values():
        children.setdefault(p.ppid, []).append(p.pid)
    todo = list(picked)
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in picked:
                picked.add(child)
                todo.append(child)
    chosen = {procs[pid].identity for pid in picked}
    if selector.exclude is not None:
        chosen -= selected(procs, selector.exclude)
    return chosen


def members(snapshots: Sequence[Snapshot], selector: Selector) -> set[Identity]:
    """Every identity the selector picks in any snapshot; once picked, always a member."""
    chosen: set[Identity] = set()
    for snap in snapshots:
        alive = {p.identity for p in snap.procs.values()}
        chosen |= selected(snap.procs, selector, chosen & alive)
    return chosen


def cpu_seconds(snapshots: Sequence[Snapshot], side: set[Identity]) -> float:
    """CPU-seconds the processes of `side` spent between the first and the last snapshot.

    Each member counts its last seen total ticks minus its total at the first snapshot (zero if it
    started later). A member that exited while its parent was alive had its final ticks added to
    the parent's child ticks: if that parent is a member too, the child's own last sample is not
    counted again; if the exited process is no member but its parent is, its ticks are removed
    from the parent. What a process spends between its last sample and its exit is counted only
    through a member parent that waits for it.
    """
    if not snapshots:
        return 0.0
    first = {p.identity: p.total_ticks for p in snapshots[0].procs.values()}
    last: dict[Identity, tuple[int, ProcSample]] = {}
    for index, snap in enumerate(snapshots):
        for p in snap.procs.values():
            last[p.identity] = (index, p)
    ticks = 0
    for ident, (_, sample) in last.items():
        if ident in side:
            ticks += sample.total_ticks - first.get(ident, 0)
    for ident, (index, sample) in last.items():
        parent = _absorbing_parent(snapshots, index, sample)
        if parent is not None and parent in side:
            ticks -= sample.total_ticks
    return ticks / CLK_TCK


def _absorbing_parent(snapshots: Sequence[Snapshot], index: int, sample: ProcSample) -> Identity | None:
    """The parent that waited for `sample`'s process: it is gone after snapshot `index` while
    its parent is still there in the next one.
    """
    if index + 1 >= len(snapshots):
        return None
    parent_then = snapshots[index].procs.get(sample.ppid)
    parent_next = snapshots[index + 1].procs.get(sample.ppid)
    if parent_then is None or parent_next is None or parent_then.identity != parent_next.identity:
        return None
    if parent_next.child_ticks <= parent_then.child_ticks and sample.total_ticks > 0:
        return None  # the parent did not wait for it (reparented or reaped elsewhere)
    return parent_then.identity


def peak_rss(snapshots: Sequence[Snapshot], side: set[Identity]) -> int:
    """The largest sum, over snapshots, of the VmHWM of the side's processes alive at that snapshot
    (an upper bound on the side's peak resident memory: each process's own peak, added up).
    """
    return max((sum(p.hwm_bytes for p in s.procs.values() if p.identity in side) for s in snapshots), default=0)


def startup_cpu_seconds(snapshot: Snapshot, side: set[Identity]) -> float:
    """CPU-seconds the side had spent before the span began (JVM and session start)."""
    return sum(p.total_ticks for p in snapshot.procs.values() if p.identity in side) / CLK_TCK


@dataclass
class Sampler:
    """Snapshots the processes of some sides every `interval` seconds, in a background thread.

    Only processes the sides select (now or before) are kept, so a long span stays small.
    """

    sides: Mapping[str, Selector]
    interval: float = 0.25
    snapshots: list[Snapshot] = field(default_factory=list)
    _cmdlines: dict[Identity, str] = field(default_factory=dict)
    _kept: dict[str, set[Identity]] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def take(self) -> Snapshot:
        """One snapshot now, appended to `snapshots`."""
        raw = _read_all(self._cmdlines)
        light = {
            pid: ProcSample(pid, ppid, start, own, child, 0, self._cmdlines[(pid, start)])
            for pid, (ppid, own, child, start) in raw.items()
        }
        keep: set[Identity] = set()
        for name, selector in self.sides.items():
            alive = {p.identity for p in light.values()}
            chosen = selected(light, selector, self._kept.get(name, set()) & alive)
            self._kept.setdefault(name, set()).update(chosen)
            keep |= chosen
        # Parents of kept processes stay too: their child ticks tell whether they waited for a child.
        parents = {light[light[pid].ppid].identity for pid, _ in keep if light[pid].ppid in light}
        procs = {}
        for pid, p in light.items():
            if p.identity in keep:
                status = _read(PROC / str(pid) / "status")
                procs[pid] = ProcSample(
                    p.pid, p.ppid, p.start_ticks, p.own_ticks, p.child_ticks, parse_hwm(status or ""), p.cmdline
                )
            elif p.identity in parents:
                procs[pid] = p
        snap = Snapshot(time.monotonic(), procs)
        self.snapshots.append(snap)
        return snap

    def start(self) -> Snapshot:
        """The span's first snapshot, then keep sampling until `stop`."""
        first = self.take()
        self._thread = threading.Thread(target=self._loop, name="cpu-sampler", daemon=True)
        self._thread.start()
        return first

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.take()

    def stop(self) -> Snapshot:
        """The span's last snapshot; sampling ends."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        return self.take()

    def side(self, name: str) -> set[Identity]:
        """Every process the named side selected during the span."""
        return members(self.snapshots, self.sides[name])


@dataclass(frozen=True)
class ChildrenCpu:
    """CPU-seconds of waited-for child processes (`getrusage(RUSAGE_CHILDREN)`) since `begin`:
    the cost of a `spark-submit` run by this process, its JVM and Python driver included.
    """

    begin: float

    @staticmethod
    def now() -> float:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    @classmethod
    def start(cls) -> ChildrenCpu:
        return cls(cls.now())

    def seconds(self) -> float:
        return self.now() - self.begin


def settle(selector: Selector, busy_cores: float = 0.2, over_s: float = 1.0, limit_s: float = 30.0) -> float:
    """Wait until the selected processes use less than `busy_cores` over `over_s` seconds (a JVM
    keeps compiling for a while after start-up and warm-up), at most `limit_s`; returns the wait.
    """
    sampler = Sampler({"side": selector})
    began = time.monotonic()
    sampler.take()
    while time.monotonic() - began < limit_s:
        time.sleep(over_s / 4)
        sampler.take()
        recent = [s for s in sampler.snapshots if s.at >= sampler.snapshots[-1].at - over_s]
        if len(recent) > 1 and recent[-1].at - recent[0].at >= over_s * 0.75:
            rate = cpu_seconds(recent, sampler.side("side")) / (recent[-1].at - recent[0].at)
            if rate < busy_cores:
                break
        sampler.snapshots[:] = recent
    return time.monotonic() - began
