"""Helpers for the stream tests: listed files built by hand."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from airflow_iqp.streams.files import DataFile

T0 = datetime(2026, 1, 1, tzinfo=UTC)
ORIGIN = datetime(2000, 1, 1, tzinfo=UTC)


def data_file(relative: str, modified: datetime | timedelta, stream: str = "sales", size: int = 100) -> DataFile:
    """A file of `stream` at `relative`, modified at `modified` (a timedelta counts from T0)."""
    at = T0 + modified if isinstance(modified, timedelta) else modified
    return DataFile(stream=stream, uri=f"file:///data/{stream}/{relative}", relative=relative, size=size, modified=at)
