"""An `ordered` arrival stream's anchor: which directories it settles, and the walk it gives."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

import pytest

from airflow_iqp.exceptions import InvalidDeclaration
from airflow_iqp.streams.listing import list_files, list_since, stream_uri
from airflow_iqp.streams.ordered import anchor_of, settled, step
from airflow_iqp.streams.prefixes import Verdict
from airflow_iqp.streams.spec import FileStream

if TYPE_CHECKING:
    from pathlib import Path

HOUR = timedelta(hours=1)


def test_the_anchor_is_the_directory_of_a_file_below_the_stream() -> None:
    assert anchor_of("s3://b/events/dt=2026-03-04/hour=08/x.parquet", "s3://b/events") == ("dt=2026-03-04", "hour=08")
    assert anchor_of("s3://b/events/x.parquet", "s3://b/events/") == ()
    assert anchor_of("s3://b/events2/dt=1/x.parquet", "s3://b/events") == ()  # another stream's


def test_what_sorts_before_the_anchor_where_the_paths_part_is_settled() -> None:
    anchor = ("dt=2026-03-04", "hour=08")
    assert settled(("dt=2026-03-03",), anchor)
    assert settled(("dt=2026-03-04", "hour=07"), anchor)
    assert not settled(("dt=2026-03-04",), anchor)  # on its chain
    assert not settled(("dt=2026-03-04", "hour=08", "sub"), anchor)
    assert not settled(("dt=2026-03-04", "hour=09"), anchor)
    assert not settled(("dt=2026-03-05", "hour=00"), anchor)
    assert not settled(("dt=2026-03-03",), ())  # no anchor settles nothing


def test_a_walk_goes_down_the_anchor_s_chain_and_takes_what_follows() -> None:
    anchor = ("dt=2026-03-04", "hour=08")
    assert step(anchor, (), "dt=2026-03-03")[0] is Verdict.SKIP
    assert step(anchor, (), "dt=2026-03-04") == (Verdict.DESCEND, ("dt=2026-03-04",))
    assert step(anchor, (), "dt=2026-03-05")[0] is Verdict.TAKE
    assert step(anchor, ("dt=2026-03-04",), "hour=07")[0] is Verdict.SKIP
    assert step(anchor, ("dt=2026-03-04",), "hour=08")[0] is Verdict.TAKE
    assert step(anchor, ("dt=2026-03-04",), "hour=10")[0] is Verdict.TAKE
    assert step((), (), "anything")[0] is Verdict.TAKE


def test_list_since_lists_the_chain_and_what_follows(tmp_path: Path, ls_calls: list[str]) -> None:
    for relative in (
        "top.parquet",
        "dt=01/hour=23/a.parquet",
        "dt=02/hour=07/b.parquet",
        "dt=02/hour=08/c.parquet",
        "dt=02/hour=08/deeper/d.parquet",
        "dt=02/hour=09/e.parquet",
        "dt=03/hour=00/f.parquet",
        "dt=02/_temporary/g.parquet",
    ):
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).touch()
    stream = FileStream(str(tmp_path), history=HOUR, ordered=True)

    since = list_since("s", stream, ("dt=02", "hour=08"))

    assert sorted(f.relative for f in since.files) == [
        "dt=02/hour=08/c.parquet",
        "dt=02/hour=08/deeper/d.parquet",
        "dt=02/hour=09/e.parquet",
        "dt=03/hour=00/f.parquet",
        "top.parquet",  # a file of a listed directory is listed, whatever its name
    ]
    assert str(tmp_path / "dt=01") not in ls_calls
    assert str(tmp_path / "dt=02/hour=07") not in ls_calls
    assert list_since("s", stream, ()) == list_files("s", stream)
    assert stream_uri(stream) == f"file://{tmp_path}"


def test_ordered_is_declared_on_arrival_streams_with_a_history() -> None:
    stream = FileStream("/d", history=HOUR, ordered=True)
    assert FileStream.from_dict(stream.to_dict()) == stream
    assert not FileStream("/d").ordered
    with pytest.raises(InvalidDeclaration, match="needs history="):
        FileStream("/d", ordered=True)
    with pytest.raises(InvalidDeclaration, match="only read with window_by='arrival'"):
        FileStream("/d", window_by="path", pattern="dt={date}", history=HOUR, ordered=True)
    with pytest.raises(InvalidDeclaration, match="True or False"):
        FileStream("/d", history=HOUR, ordered="yes")  # type: ignore[arg-type]
