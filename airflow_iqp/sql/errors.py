"""The one error a caller must handle when a query cannot be split into batches."""

from __future__ import annotations


class UnsupportedQuery(ValueError):
    """Raised when partial + merge over batches would not equal a single pass; names the construct."""
