"""Ctrl-C on `make demo`, pressed once and again while it stops, stops everything the demo started.

The demo runs as a terminal runs it: the leader of its own process group, which Ctrl-C signals
whole. What it started is watched from outside while it runs, by parentage and by its directory
in the environment (Airflow puts each task in a group of its own; the Spark Connect server leads
a session of its own); none of it may outlive the demo.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from airflow_iqp.spark.connect_server import free_port

pytestmark = pytest.mark.heavy

REPO = Path(__file__).resolve().parents[2]
STARTUP_S = 400  # Airflow healthy and the DAGs parsed: 90-120 s on 2 busy cores
STOP_S = 120  # the clean-up's own bound: every group's SIGTERM grace and SIGKILL, then the sweep


def stat(pid: int) -> tuple[str, int, int] | None:
    """(state, parent pid, start time in clock ticks) of a running process, None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return fields[0], int(fields[1]), int(fields[19])


@dataclass
class Watch:
    """Every process of the demo seen while it runs: its descendants, and whatever has its
    directory in its environment. A (pid, start time) pair tells a reused pid apart.
    """

    root: int
    marker: bytes
    seen: dict[tuple[int, int], str] = field(default_factory=dict)
    done: threading.Event = field(default_factory=threading.Event)
    scanning: threading.Lock = field(default_factory=threading.Lock)

    def scan(self) -> None:
        """One look at /proc."""
        with self.scanning:
            self._scan()

    def _scan(self) -> None:
        table = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and (found := stat(int(entry.name))):
                table[int(entry.name)] = found
        children: dict[int, list[int]] = {}
        for pid, (_, parent, _) in table.items():
            children.setdefault(parent, []).append(pid)
        ours, todo = set(), [self.root]
        while todo:
            pid = todo.pop()
            ours.add(pid)
            todo += children.get(pid, [])
        for pid in table:
            try:
                if self.marker in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
                    ours.add(pid)
            except OSError:
                pass
        for pid in ours & table.keys():
            try:  # the latest: a child seen between its fork and its exec shows its parent's
                command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:200]
            except OSError:
                command = ""
            key = (pid, table[pid][2])
            self.seen[key] = command or self.seen.get(key, "?")

    def until_running(self, command: str, timeout: float) -> None:
        """Scan until a process of the demo runs `command` (what runs now, however short-lived)."""
        give_up = time.monotonic() + timeout
        while True:
            self.scan()
            if any(command in seen for seen in self.seen.values()):
                return
            assert time.monotonic() < give_up, f"no {command!r} within {timeout:g} s: {self.seen}"
            time.sleep(0.1)

    def run(self) -> None:
        while not self.done.is_set():
            self.scan()
            time.sleep(0.25)

    def alive(self) -> dict[int, str]:
        """The processes seen that still run (an exited one waiting to be reaped does not)."""
        left = {}
        with self.scanning:
            seen = dict(self.seen)
        for (pid, started), command in seen.items():
            now = stat(pid)
            if now is not None and now[2] == started and now[0] not in ("Z", "X"):
                left[pid] = command
        return left


@dataclass
class Demo:
    """`python -m airflow_iqp.demo` in a process group of its own, its output read line by line."""

    process: subprocess.Popen[str]
    watch: Watch
    lines: queue.Queue[str] = field(default_factory=queue.Queue)
    output: list[str] = field(default_factory=list)

    @classmethod
    def start(cls, demo_dir: Path) -> Demo:
        env = {
            **os.environ,
            "IQP_DEMO_DIR": str(demo_dir),
            "IQP_DEMO_ONCE": "1",
            "IQP_DEMO_PORT": str(free_port()),
            "PYTHONUNBUFFERED": "1",  # lines as a terminal shows them
        }
        process = subprocess.Popen(
            [sys.executable, "-m", "airflow_iqp.demo"],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        demo = cls(process, Watch(process.pid, f"IQP_DEMO_DIR={demo_dir}".encode()))
        threading.Thread(target=demo.read, daemon=True).start()
        threading.Thread(target=demo.watch.run, daemon=True).start()
        return demo

    def read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)

    def wait_for(self, text: str, timeout: float) -> None:
        """Until a line of the demo's output contains `text`."""
        give_up = time.monotonic() + timeout
        while time.monotonic() < give_up:
            try:
                line = self.lines.get(timeout=1)
            except queue.Empty:
                assert self.process.poll() is None, f"the demo exited before {text!r}:\n{self.text()}"
                continue
            self.output.append(line)
            if text in line:
                return
        raise AssertionError(f"no {text!r} from the demo within {timeout:g} s:\n{self.text()}")

    def text(self) -> str:
        while not self.lines.empty():
            self.output.append(self.lines.get())
        return "".join(self.output)[-6000:]

    def ctrl_c(self) -> None:
        """What the terminal does on Ctrl-C: SIGINT to the foreground process group."""
        os.killpg(self.process.pid, signal.SIGINT)

    def kill_all(self) -> None:
        """After a failure: leave no JVM behind for the next test."""
        self.watch.done.set()
        for pid in [self.process.pid, *self.watch.alive()]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.process.wait()


def test_ctrl_c_stops_everything_the_demo_started(tmp_path: Path) -> None:
    """Pressed once the Connect server and Airflow are up, and again while the demo stops what it
    started: the first press stops it all; the second, which reaches every process of the group
    mid-shutdown, only says so (a run pressed once is the first half of this one, and took
    another 65-130 s of `make test`).
    """
    demo = Demo.start(tmp_path / "demo")
    try:
        demo.wait_for("airflow standalone started", STARTUP_S)
        connect_server = json.loads((tmp_path / "demo" / "connect-server" / "server.json").read_text())["pid"]
        demo.watch.until_running("airflow standalone", 60)  # past its exec: the line comes right after the spawn
        demo.ctrl_c()
        demo.wait_for("interrupted", 10)
        demo.ctrl_c()
        pressed = time.monotonic()
        demo.process.wait(timeout=STOP_S)
        stopped_in = time.monotonic() - pressed
        demo.watch.done.set()
        demo.watch.scan()
        left = demo.watch.alive()
    finally:
        demo.kill_all()
    output = demo.text()
    assert left == {}, f"still running {stopped_in:.0f} s after Ctrl-C: {json.dumps(left, indent=1)}\n{output}"
    assert connect_server in {pid for pid, _ in demo.watch.seen}
    commands = "\n".join(demo.watch.seen.values())
    assert "airflow standalone" in commands, commands
    assert "stopped everything the demo started" in output, output
    assert "still stopping what the demo started" in output, output


def test_the_demo_owns_ctrl_c_again_after_its_in_process_spark_session(tmp_path: Path) -> None:
    """The verification's local SparkSession installs PySpark's SIGINT handler, which outlives
    the session and fails on it; the demo's own is back once the session is up.
    """
    script = textwrap.dedent(
        """
        import signal
        from airflow_iqp.demo.__main__ import verify
        from airflow_iqp.demo.stopping import Interrupts

        interrupts = Interrupts()
        interrupts.own()
        verify({}, [], 0.0)
        print("SIGINT handler:", "the demo's" if signal.getsignal(signal.SIGINT) is interrupts else "another")
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        env={**os.environ, "IQP_DEMO_DIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "SIGINT handler: the demo's" in result.stdout, result.stdout + result.stderr[-3000:]
