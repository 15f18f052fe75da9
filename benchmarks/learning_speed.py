"""Learning speed: refitting a DAG's cost model from all its observations after every job.

Run: uv run python benchmarks/learning_speed.py   (timed runs: under flock /tmp/iqp-heavy.lock)
Target (issue 10): fit_cost over 1000 observations < 10 ms, so the plan task, each batch and
each merge may refit from the ledger's observations instead of updating a model in place.
"""

from __future__ import annotations

import statistics
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import numpy as np

from airflow_iqp.constants import ExecutionPath, JobKind
from airflow_iqp.learning.cost import LearnedCost, Observation, fit_cost
from airflow_iqp.learning.fit import fit_piecewise
from airflow_iqp.learning.rate import WindowInput, learned_rate

if TYPE_CHECKING:
    from collections.abc import Callable

TARGET_MS = 10.0
START = datetime(2026, 1, 1, tzinfo=UTC)


def timed(fn: Callable[[], object], repeat: int) -> float:
    """Median wall time in ms over `repeat` calls."""
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1000)
    return statistics.median(samples)


def observations(count: int, rng: np.random.Generator) -> list[Observation]:
    """A DAG's history: five partials and one merge per window, 12 s start-up, 5% noise."""
    made = []
    for i in range(count):
        at = START + timedelta(seconds=30 * i)
        if i % 6 == 5:
            partials = int(rng.integers(1, 8))
            made.append(Observation(JobKind.MERGE, partials, (8 + 0.4 * partials) * rng.normal(1, 0.05), at))
        else:
            rows = int(np.exp(rng.uniform(np.log(1e3), np.log(1e7))))
            made.append(Observation(JobKind.PARTIAL, rows, (12 + 2e-5 * rows) * rng.normal(1, 0.05), at))
    return made


def main() -> None:
    rng = np.random.default_rng(0)
    print(f"{'what':<62} {'ms':>8}")
    for count in (10, 100, 1000, 10_000):
        history = observations(count, rng)
        ms = timed(lambda: fit_cost(history, ExecutionPath.SPARK_SUBMIT), repeat=50)
        verdict = f"  (target < {TARGET_MS:g} ms: {'met' if ms < TARGET_MS else 'MISSED'})" if count == 1000 else ""
        print(f"{f'fit_cost, {count} observations (newest 100 per kind fitted)':<62} {ms:8.3f}{verdict}")
    sizes = np.exp(rng.uniform(np.log(1e3), np.log(1e7), 1000))
    seconds = (12 + 2e-5 * sizes) * rng.normal(1, 0.05, 1000)
    weights = 0.5 ** (np.arange(1000)[::-1] / 10)
    ms = timed(lambda: fit_piecewise(sizes, seconds, weights), repeat=50)
    print(f"{'fit_piecewise alone, 1000 weighted points (no cut)':<62} {ms:8.3f}")
    model = fit_cost(observations(1000, rng), ExecutionPath.SPARK_SUBMIT)
    print(f"{'with_margin(k=2)':<62} {timed(lambda: model.with_margin(k=2), repeat=200):8.3f}")
    document = model.to_dict()
    print(f"{'to_dict + from_dict':<62} {timed(lambda: LearnedCost.from_dict(model.to_dict()), repeat=200):8.3f}")
    windows = [
        WindowInput(START + i * timedelta(minutes=10), START + (i + 1) * timedelta(minutes=10), 20, 20_000)
        for i in range(1000)
    ]
    print(f"{'learned_rate, 1000 windows':<62} {timed(lambda: learned_rate(windows), repeat=50):8.3f}")
    print(f"\nmodel after 1000 observations: {document}")


if __name__ == "__main__":
    main()
