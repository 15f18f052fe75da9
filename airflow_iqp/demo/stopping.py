"""Stopping everything the demo started, however often Ctrl-C is pressed.

The demo owns SIGINT and SIGTERM: the first stops it where it is, later ones only say that it is
still stopping, so a second Ctrl-C cannot cut the clean-up short and leave a 1 GB JVM running.
Its long-lived children lead process groups of their own, which the clean-up ends; what escapes
them (Airflow runs each task in a process group of its own) carries the run's tag in its
environment, and the sweep ends that too. Linux only: the sweep reads /proc.
"""

from __future__ import annotations

import os
import signal
import time
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from types import FrameType

TAG = "IQP_DEMO_RUN"  # in the environment of every process the demo starts


class Interrupts:
    """The demo's SIGINT and SIGTERM handler: the first raises, the ones after it do not."""

    def __init__(self) -> None:
        self.stopping = False

    def own(self) -> None:
        """Install (again, after PySpark installed its own) this handler for SIGINT and SIGTERM."""
        signal.signal(signal.SIGINT, self)
        signal.signal(signal.SIGTERM, self)

    def stop(self) -> None:
        """From now on the demo is stopping: a signal only says so."""
        self.stopping = True
        self.own()

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        """KeyboardInterrupt (SIGINT) or SystemExit (SIGTERM) the first time; later, only a line on stderr."""
        if self.stopping:
            with suppress(OSError):  # not print(): the handler may run inside a print, which is not reentrant
                os.write(2, b"\nstill stopping what the demo started; it ends by itself\n")
            return
        self.stopping = True
        if signum == signal.SIGTERM:
            raise SystemExit(143)
        raise KeyboardInterrupt


def tag_run() -> str:
    """Tag this run in the environment every process it starts inherits."""
    tag = f"{os.getpid()}-{time.time_ns()}"
    os.environ[TAG] = tag
    return tag


def tagged(tag: str) -> set[int]:
    """The processes, other than this one, that the run tagged `tag` started (and still run)."""
    needle = f"{TAG}={tag}".encode()
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:  # gone, or not ours
            continue
        if needle in environ.split(b"\0"):
            found.add(int(entry.name))
    return found


def sweep(tag: str, grace: float = 5.0) -> set[int]:
    """SIGTERM whatever the run started that still runs, SIGKILL it after `grace` seconds; the pids found."""
    found = tagged(tag)
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        left = tagged(tag)  # an exited child of ours, not yet reaped, has no environment left
        if not left:
            break
        for pid in left:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        give_up = time.monotonic() + wait
        while tagged(tag) and time.monotonic() < give_up:
            time.sleep(0.25)
    return found
