"""A one-line progress bar on stderr: fitting all queries takes many minutes."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """A bar of `total` steps, redrawn in place after every step."""

    def __init__(self, total: int, stream: TextIO = sys.stderr, width: int = 30) -> None:
        self.total, self.done, self.stream, self.width = max(total, 1), 0, stream, width
        self.start = time.monotonic()

    def step(self, label: str) -> None:
        """One more step done; `label` says which."""
        self.done += 1
        filled = self.width * min(self.done, self.total) // self.total
        elapsed = time.monotonic() - self.start
        bar = "#" * filled + "." * (self.width - filled)
        self.stream.write(f"\r[{bar}] {self.done}/{self.total} {elapsed:5.0f}s {label[:40]:<40}")
        self.stream.flush()

    def close(self) -> None:
        """End the bar's line."""
        self.stream.write("\n")
        self.stream.flush()
