"""Errors a caller must tell apart; each message says what went wrong and what to fix.

Importing this module imports nothing else of the project, so the pure core may use it.
"""

from __future__ import annotations


class IqpError(Exception):
    """Base of every error airflow-iqp raises on purpose."""


class InvalidDeclaration(IqpError, ValueError):
    """A DAG file's intermittent query cannot work as declared; the message says what to fix."""


class UnsupportedQuery(IqpError, ValueError):
    """The query cannot be split into an exact partial and merge; the message names the construct."""


class InvalidSetting(IqpError, ValueError):
    """An `[iqp]` option or environment variable holds a value that cannot work."""


class LedgerLookupError(IqpError, LookupError):
    """A row the caller expected is not in the ledger: a bug or a foreign ledger, not bad input."""

    def __init__(self, what: str, key: object) -> None:
        super().__init__(f"no {what} {key!r} in the ledger")
        self.what = what
        self.key = key


class LeaseLostError(IqpError):
    """The dispatcher's lease on the Spark resource was lost while the job held it: its output
    must not be trusted, and the task fails so that Airflow retries it.
    """


class CorruptInput(IqpError):
    """An input file of a batch cannot be read; the message names it. Declaring
    `on_corrupt="quarantine"` moves such files aside instead of failing the batch.
    """
