"""Replace a directory in one rename, so readers see the old or the new one, never a mix."""

from __future__ import annotations

import shutil
import uuid
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path


def temp_sibling(target: Path, kind: str) -> Path:
    """A fresh dot-named path beside `target`: same filesystem (rename works), hidden from readers."""
    return target.parent / f".{target.name}.{kind}-{uuid.uuid4().hex}"


def replace_dir(new: Path, target: Path) -> None:
    """Rename `new` onto `target`; an older `target` is moved aside first, then deleted.

    Between the two renames `target` is briefly absent: a reader finds nothing, never half.
    """
    if not target.exists():
        new.rename(target)
        return
    old = temp_sibling(target, "old")
    target.rename(old)
    new.rename(target)
    shutil.rmtree(old)
