"""Errors a caller must tell apart; each message says what went wrong and what to fix.

Importing this module imports nothing else of the project, so the pure core may use it.
"""

from __future__ import annotations

SHOWN_URIS = 10  # an error message lists this many file names, then counts the rest


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


class AlreadyFrozen(IqpError):
    """Input files a batch wants to freeze were frozen by another batch of the same DAG: taking
    them again would count them twice. `uris` names them.
    """

    def __init__(self, dag_id: str, uris: dict[str, str]) -> None:
        shown = "; ".join(f"{uri} ({taken})" for uri, taken in list(uris.items())[:SHOWN_URIS])
        more = f"; and {len(uris) - SHOWN_URIS} more" if len(uris) > SHOWN_URIS else ""
        super().__init__(
            f"{len(uris)} input file(s) of DAG {dag_id!r} are frozen by another batch already, "
            f"so this batch must not take them: {shown}{more}"
        )
        self.dag_id = dag_id
        self.uris = dict(uris)


class InputGone(IqpError):
    """A past window's input files are no longer where the window reads them (retention, a
    move): running it would publish a result over part of its input. The message names the
    window and the path; nothing was written.
    """
