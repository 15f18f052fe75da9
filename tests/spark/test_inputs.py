"""Which failures blame a file: a read that fails on a session that still works, not one whose
server went away (seen in the fault trials: a killed Connect server made every file of a batch
"unreadable", which with on_corrupt="quarantine" would have moved good files aside)."""

from __future__ import annotations

from typing import TYPE_CHECKING
from unittest.mock import MagicMock

import pytest
from pyspark.errors import PySparkException

from airflow_iqp.spark.jobs.inputs import unreadable_files
from airflow_iqp.spark.jobs.spec import StreamInput

if TYPE_CHECKING:
    from pathlib import Path


GONE = "[NO_ACTIVE_SESSION] No active Spark session found."


def _session(reads: bool, works: bool) -> MagicMock:
    """A session whose reads of a file fail or not, and which runs a trivial query or not."""
    spark = MagicMock()
    frame = spark.read.format.return_value.options.return_value.load.return_value
    frame.columns = ["l_quantity"]
    if not reads:
        frame.selectExpr.return_value.first.side_effect = PySparkException(GONE)
    if not works:
        spark.range.return_value.count.side_effect = PySparkException(GONE)
    return spark


def _stream(tmp_path: Path) -> StreamInput:
    files = [tmp_path / "a.parquet", tmp_path / "b.parquet"]
    for f in files:
        f.write_bytes(b"PAR1")
    return StreamInput(files=[str(f) for f in files])


def test_a_failed_read_on_a_working_session_blames_each_file(tmp_path: Path) -> None:
    corrupt = unreadable_files(_session(reads=False, works=True), "lineitem", _stream(tmp_path))

    assert [c.file for c in corrupt] == [str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet")]
    assert all("NO_ACTIVE_SESSION" in c.error for c in corrupt)


def test_a_failed_read_on_a_session_that_no_longer_works_is_raised_not_blamed_on_a_file(tmp_path: Path) -> None:
    with pytest.raises(PySparkException, match="NO_ACTIVE_SESSION"):
        unreadable_files(_session(reads=False, works=False), "lineitem", _stream(tmp_path))


def test_readable_files_are_not_corrupt(tmp_path: Path) -> None:
    assert unreadable_files(_session(reads=True, works=False), "lineitem", _stream(tmp_path)) == []
