"""Stopping what we started as a process group (a launcher and the JVM it forks, a supervisor and
its children): SIGTERM the group, then SIGKILL what is left; the Connect server, the demo and the
tests' Spark cluster all stop their daemons this way.
"""

from __future__ import annotations

import os
import signal
import time


def stop_group(pgid: int, grace: float) -> None:
    """SIGTERM the process group, then SIGKILL what is left after `grace` seconds."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        give_up = time.monotonic() + wait
        while time.monotonic() < give_up:
            try:
                os.waitpid(pgid, os.WNOHANG)  # reap it if it is our child
            except ChildProcessError:
                pass
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.25)
