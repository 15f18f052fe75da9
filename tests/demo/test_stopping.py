"""The demo's own Ctrl-C handler and its sweep, on real signals and real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import TYPE_CHECKING

import pytest

from airflow_iqp.demo.stopping import TAG, Interrupts, sweep, tag_run, tagged

if TYPE_CHECKING:
    from collections.abc import Iterator


@pytest.fixture
def interrupts() -> Iterator[Interrupts]:
    """The demo's handler installed for the test, pytest's put back after it."""
    previous = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    handler = Interrupts()
    handler.own()
    yield handler
    signal.signal(signal.SIGINT, previous[0])
    signal.signal(signal.SIGTERM, previous[1])


def test_the_first_ctrl_c_interrupts_and_the_second_does_not(interrupts: Interrupts) -> None:
    with pytest.raises(KeyboardInterrupt):
        signal.raise_signal(signal.SIGINT)
    signal.raise_signal(signal.SIGINT)  # during the clean-up: no second KeyboardInterrupt
    signal.raise_signal(signal.SIGTERM)


def test_sigterm_exits_143(interrupts: Interrupts) -> None:
    with pytest.raises(SystemExit) as stopped:
        signal.raise_signal(signal.SIGTERM)
    assert stopped.value.code == 143


def test_nothing_interrupts_the_clean_up_of_a_run_that_was_not_interrupted(interrupts: Interrupts) -> None:
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as PySpark's session leaves it
    interrupts.stop()
    signal.raise_signal(signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is interrupts


def test_sweep_ends_what_escaped_the_process_groups_even_if_it_ignores_sigterm(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(TAG, "")  # restored after the test: tag_run changes this process's environment
    tag = tag_run()
    # A child in a session of its own whose background grandchild outlives it, both deaf to SIGTERM.
    shell = subprocess.Popen(
        ["sh", "-c", "trap '' TERM; sleep 120 & echo $!; wait"],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert shell.stdout is not None
    grandchild = int(shell.stdout.readline())
    untagged = subprocess.Popen(["sleep", "120"], env={k: v for k, v in os.environ.items() if k != TAG})
    try:
        assert tagged(tag) == {shell.pid, grandchild}
        started = time.monotonic()
        assert sweep(tag, grace=0.5) == {shell.pid, grandchild}
        assert time.monotonic() - started < 10
        assert shell.wait(timeout=5) == -signal.SIGKILL
        assert tagged(tag) == set()
        assert untagged.poll() is None
    finally:
        untagged.kill()
        untagged.wait()
        shell.kill()
        shell.wait()
