"""`iqp result DAG_ID --window START`: print one window's published result, from the ledger."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse


def window_start(text: str) -> datetime:
    """--window: the window's start, ISO 8601 (`2026-01-01T10:00:00Z`) or as output names it
    (`20260101T100000`); UTC unless it says otherwise.
    """
    from airflow_iqp.results.template import TIME_FORMAT

    for parse in (datetime.fromisoformat, lambda t: datetime.strptime(t, TIME_FORMAT)):
        try:
            at = parse(text)
        except ValueError:
            continue
        return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)
    raise ValueError(f"--window {text!r} is no time: give the window start as 2026-01-01T10:00:00Z or 20260101T100000")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `iqp result`."""
    parser = subparsers.add_parser("result", help="print one window's published result")
    parser.add_argument("dag_id", help="the intermittent query's DAG id")
    parser.add_argument("--window", required=True, help="the window's start (ISO 8601, UTC unless it says otherwise)")
    parser.add_argument("--conn-id", help="Airflow connection of the output's storage (as the DAG's output_conn_id)")
    parser.add_argument("--json", action="store_true", help="one JSON object per row instead of a table")
    parser.add_argument("--ledger", help="the ledger's SQLAlchemy URL (default: the iqp_default connection)")
    parser.set_defaults(func=_result)


def _result(args: argparse.Namespace) -> int:
    from airflow_iqp.ledger import session_scope, store
    from airflow_iqp.results.publish import read_marker, read_result
    from airflow_iqp.tables import format_table

    start = window_start(args.window)
    with session_scope(args.ledger) as session:
        window_id = store.window_id(session, args.dag_id, start)
        if window_id is None:
            raise ValueError(f"the ledger has no window of {args.dag_id!r} starting {start.isoformat()}")
        window = store.window_summary(session, window_id)
    if not window.result_uri:
        raise ValueError(f"window {start.isoformat()} of {args.dag_id!r} has no result yet (status {window.status})")
    marker = read_marker(window.result_uri, args.conn_id)
    rows = read_result(window.result_uri, args.conn_id)
    if args.json:
        for row in rows:
            print(json.dumps(row, default=str))
        return 0
    notes = [f"{len(rows)} row(s)", f"from {window.result_uri}", f"committed {marker.get('committed_at')}"]
    if window.incomplete:
        notes.append("INCOMPLETE: quarantined input left out")
    if window.late_files:
        notes.append(f"{window.late_files} late file(s) recorded")
    print(
        f"{args.dag_id} window {window.window_start.isoformat()} .. {window.window_end.isoformat()}: {'; '.join(notes)}"
    )
    if rows:
        print(format_table(list(rows[0]), [list(r.values()) for r in rows]))
    return 0
