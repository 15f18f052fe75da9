"""Replace a file or a directory in one rename, so readers see the old or the new one, never a mix."""

from __future__ import annotations

import json
import os
import shutil
import uuid
from typing import TYPE_CHECKING, Any

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


def write_json(path: Path, document: Any) -> None:
    """Write `document` as indented JSON to a temporary file beside `path`, then rename it onto
    `path`: a reader never sees half a file, and a crash leaves the old one whole.
    """
    tmp = temp_sibling(path, "tmp")
    try:
        tmp.write_text(json.dumps(document, indent=2) + "\n")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
