"""The first job on a fresh Spark Connect server, with and without the warm-up `start` runs.

Run: flock /tmp/iqp-heavy.lock uv run python benchmarks/connect_warm_up.py [--repeat 2] [--query q14]

Each repetition starts a fresh server twice (the orders alternate, so the machine's load falls
on both alike): once cold (`start(..., warm=False)`), once followed by `connect_server.warm_up`
as `start` runs it, whose seconds are printed apart. Then it times the same jobs on it as a
demo window's first ones: a partial over `FILES` generated TPC-H files (the demo's scale: about
4,300 lineitem rows a file), a second one like it, and the merge of the two, each in a Connect
session of its own as a task runs it (`costfit.runners.ConnectRunner`). The Connect client is
imported before any timing, as a task process pays that import either way.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

FILES = 8  # the demo q6's first batch: 8 files


def first_jobs(source: object, server_url: str, work: Path) -> list[float]:
    """Seconds of the first partial, a second one like it, and their merge."""
    from airflow_iqp.costfit.batches import TpchSource
    from airflow_iqp.costfit.runners import ConnectRunner

    assert isinstance(source, TpchSource)
    runner = ConnectRunner(server_url)
    first = runner.partial(source.partial_spec(range(FILES), work / "p0"))
    second = runner.partial(source.partial_spec(range(FILES, 2 * FILES), work / "p1"))
    merge = runner.merge(source.merge_spec([work / "p0", work / "p1"], work / "merged"))
    return [first, second, merge]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--query", default="q14")
    args = parser.parse_args()

    import pyspark.sql.connect.session  # noqa: F401  # the client, imported before timing

    from airflow_iqp.costfit.batches import Dataset, TpchSource
    from airflow_iqp.queries import load_query
    from airflow_iqp.spark.connect_server import free_port, start, stop, warm_up
    from airflow_iqp.tpch.generate import generate

    results: dict[str, list[list[float]]] = {"cold": [], "warmed": []}
    warm_ups: list[float] = []
    with tempfile.TemporaryDirectory(prefix="iqp-warm-up-") as tmp:
        root = Path(tmp)
        generate(root / "data", scale=0.01 * 2 * FILES / 14, files=2 * FILES)
        source = TpchSource(Dataset.open(root / "data"), load_query(args.query))
        for repetition in range(args.repeat):
            order = ("cold", "warmed") if repetition % 2 == 0 else ("warmed", "cold")
            for mode in order:
                state = root / f"server-{mode}-{repetition}"
                server = start(state, port=free_port(), warm=False)
                try:
                    if mode == "warmed":
                        warm_ups.append(warm_up(server))  # what `start` runs unless told not to
                    jobs = first_jobs(source, server.url_with_token, root / f"work-{mode}-{repetition}")
                finally:
                    stop(state)
                results[mode].append(jobs)
                print(
                    f"{mode:6} run {repetition + 1}: first partial {jobs[0]:.2f} s, second {jobs[1]:.2f} s, "
                    f"merge {jobs[2]:.2f} s",
                    flush=True,
                )
    print(f"\nwarm-up at start: {', '.join(f'{s:.2f}' for s in warm_ups)} s")
    for mode, runs in results.items():
        columns = list(zip(*runs, strict=True))
        print(
            f"{mode:6}: first partial median {statistics.median(columns[0]):.2f} s, second "
            f"{statistics.median(columns[1]):.2f} s, merge {statistics.median(columns[2]):.2f} s "
            f"({len(runs)} fresh servers)"
        )


if __name__ == "__main__":
    main()
