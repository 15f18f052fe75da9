"""Warm the demo's fresh Spark Connect server up with the example queries' own jobs.

`connect_server.start` runs one generic warm-up job, which absorbs the JVM's class loading but
not each query's: a query's first jobs on a server compile its generated code and get the JIT
to its operators, and run slower for several jobs. Measured on a 3-window demo (35ab34c, task
logs; server time = a job's time after its Connect session opened): q1's partial over ~1M rows
took 2.88, 2.54 and 2.13 s on the server in windows 1-3; q14's over ~206k rows 1.17-1.86 s in
window 1 and 0.82-1.40 s in window 2; q6's first partial (150k rows) 0.96 s, its third 0.61 s.
The learned models took those jobs for the queries' cost: q1's window 3 was predicted at
4.23 s (its window-1 job, the only one done when window 3 was planned) and took 3.35 s (+26%).
Running each example's partial and merge `ROUNDS` times first, unrecorded, gives the windows
the server a long-running one is.
"""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING

from airflow_iqp.costfit.batches import Dataset, TpchSource
from airflow_iqp.costfit.runners import ConnectRunner
from airflow_iqp.queries import load_query

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

ROUNDS = 3  # partial + merge per query; the slowdown of a query's first jobs fades over a few
UNITS = 120  # files per warm-up partial: half a demo window, between its batches' sizes


def warm_up(url: str, source: Path, queries: Sequence[str], out: Path) -> dict[str, list[float]]:
    """Each query's partial over `UNITS` files of the stream at `source` and its merge, `ROUNDS`
    times over, on the Connect server at `url` (outputs under `out`, removed); their seconds by query.
    """
    data = Dataset.open(source)
    runner = ConnectRunner(url)
    seconds: dict[str, list[float]] = {name: [] for name in queries}
    try:
        for round_ in range(ROUNDS):
            for name in queries:
                job = TpchSource(data, load_query(name))
                partial = out / f"{name}-{round_}"
                seconds[name].append(runner.partial(job.partial_spec(range(min(UNITS, data.manifest.files)), partial)))
                seconds[name].append(runner.merge(job.merge_spec([partial], out / f"{name}-{round_}-merged")))
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return seconds
