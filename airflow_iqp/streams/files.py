"""A listed file of a stream, and which names are data.

A file is known by where it is (`uri`), and whether it changed by its `identity` (size,
modification time, ETag): a name the ledger froze once must not come back with other contents.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping


def is_data(relative: str) -> bool:
    """Spark's convention: no part of the path below the stream's directory starts with '_' or '.'
    (`_SUCCESS`, `_temporary/`, `.part-0.crc`, and the temp names writers rename from).
    """
    return all(part and part[0] not in "_." for part in relative.split("/"))


@dataclass(frozen=True)
class DataFile:
    """One file of stream `stream`: `relative` is its path below the stream's directory, `uri`
    its full address with the scheme (`file:///...`, `s3://bucket/...`), `modified` aware UTC.
    """

    stream: str
    uri: str
    relative: str
    size: int
    modified: datetime
    etag: str | None = None

    def __post_init__(self) -> None:
        if self.modified.tzinfo is None:
            raise ValueError(f"{self.uri}: modified must be timezone-aware, got {self.modified!r}")
        object.__setattr__(self, "modified", self.modified.astimezone(UTC))
        if self.size < 0:
            raise ValueError(f"{self.uri}: size must be >= 0, got {self.size}")

    @property
    def identity(self) -> tuple[int, datetime, str | None]:
        """What tells a rewritten file from the one frozen under the same name."""
        return (self.size, self.modified, self.etag)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON values, for XCom and trigger events."""
        return {
            "stream": self.stream,
            "uri": self.uri,
            "relative": self.relative,
            "size": self.size,
            "modified": self.modified.isoformat(),
            "etag": self.etag,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DataFile:
        """The file `to_dict` gave."""
        return cls(
            stream=data["stream"],
            uri=data["uri"],
            relative=data["relative"],
            size=data["size"],
            modified=datetime.fromisoformat(data["modified"]),
            etag=data["etag"],
        )


@dataclass(frozen=True)
class StreamListing:
    """What one listing of a stream's directory found: its data files in arrival order (then by
    path), and its close-marker files. Other hidden files are not data and are left out.
    """

    stream: str
    files: tuple[DataFile, ...]
    markers: tuple[DataFile, ...] = ()
