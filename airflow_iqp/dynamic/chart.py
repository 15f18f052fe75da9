"""A bar chart as a PNG with only zlib and struct: the project has no plotting dependency.

One panel per measure (deadlines met, normalized cost); one group of bars per delta, one
colour per policy. No text: the caller prints the legend next to the table.
"""

from __future__ import annotations

import struct
import zlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

COLOURS = ((31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189), (140, 86, 75))
BAR, GAP, HEIGHT, MARGIN = 8, 12, 120, 10


def write_png(path: Path, pixels: list[bytearray], width: int) -> None:
    """Rows of RGB bytes to an 8-bit truecolour PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    raw = b"".join(b"\x00" + bytes(row) for row in pixels)
    header = struct.pack(">IIBBBBB", width, len(pixels), 8, 2, 0, 0, 0)
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
    )


def bar_chart(path: Path, panels: Sequence[Sequence[Sequence[float]]], tops: Sequence[float | None]) -> None:
    """panels[p][group][series], stacked top to bottom; tops[p] is the full-height value
    (None: the panel's maximum).
    """
    groups = max(len(panel) for panel in panels)
    series = max(len(group) for panel in panels for group in panel)
    width = 2 * MARGIN + groups * (series * BAR + GAP)
    rows = [bytearray(b"\xff" * 3 * width) for _ in range(len(panels) * (HEIGHT + 2 * MARGIN))]
    for p, panel in enumerate(panels):
        top = tops[p] or max((v for group in panel for v in group), default=0.0) or 1.0
        base = (p + 1) * (HEIGHT + 2 * MARGIN) - MARGIN  # the panel's axis row
        rows[base][3 * MARGIN : 3 * (width - MARGIN)] = b"\x00" * 3 * (width - 2 * MARGIN)
        for g, group in enumerate(panel):
            for s, value in enumerate(group):
                left = MARGIN + g * (series * BAR + GAP) + s * BAR
                colour = bytes(COLOURS[s % len(COLOURS)]) * (BAR - 1)
                for y in range(base - round(HEIGHT * max(value, 0.0) / top), base):
                    rows[y][3 * left : 3 * (left + BAR - 1)] = colour
    write_png(path, rows, width)
