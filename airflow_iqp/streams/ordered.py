"""Which directories of an `ordered` arrival stream can still receive files, from one fact.

An arrival stream declared `ordered=True` (with `history`) names its directories in the order
they start receiving files, at every level (`dt=2026-03-04/hour=08`, zero-padded sequence
numbers), and a directory receives no file once a later-named sibling has held files for longer
than the history. So one file known to have landed in directory `anchor` before a time settles,
from then on plus the history, every directory named before it at each level of its path: a
look that needs the files landed since then lists the anchor's chain level by level, skips what
sorts before it there, and takes everything from it on. The anchor comes from the ledger's
record of frozen files (`ledger.files.settled_anchor`); an empty anchor settles nothing.

Pure: no Airflow, no filesystem; `streams/listing.py` and `streams/arrivals.py` do the walking.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_iqp.streams.prefixes import Verdict

if TYPE_CHECKING:
    from collections.abc import Sequence

Anchor = tuple[str, ...]  # a directory's names below the stream's directory, outermost first


def anchor_of(uri: str, stream_uri: str) -> Anchor:
    """The directory of the file `uri` below the stream whose files' uris start `stream_uri/`,
    as names; empty for a file directly in the stream's directory (or not below it).
    """
    prefix = f"{stream_uri.rstrip('/')}/"
    if not uri.startswith(prefix):
        return ()
    folder = uri[len(prefix) :].rpartition("/")[0]
    return tuple(folder.split("/")) if folder else ()


def settled(names: Sequence[str], anchor: Anchor) -> bool:
    """Whether the directory `names` (below the stream's directory) sorts before the anchor at
    the first level where their paths part: named before a sibling on the anchor's chain.
    """
    for mine, theirs in zip(names, anchor, strict=False):
        if mine != theirs:
            return mine < theirs
    return False


def step(anchor: Anchor, chain: tuple[str, ...], name: str) -> tuple[Verdict, tuple[str, ...]]:
    """A walk's verdict on the directory `name` inside the one reached through `chain`: skip
    it when settled, go down it while it is on the anchor's chain, else take all below it.
    """
    reached = (*chain, name)
    if settled(reached, anchor):
        return Verdict.SKIP, reached
    if len(reached) < len(anchor) and anchor[: len(reached)] == reached:
        return Verdict.DESCEND, reached
    return Verdict.TAKE, reached
