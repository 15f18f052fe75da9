"""The first job on a fresh Spark Connect server or JVM pays a warm-up that is not the query's cost.

On a fresh demo, q6's first batch (8 files) took 8.5 s and its second (232 files) 3.3 s: class
loading, JIT and cold caches, paid once per server. Fitted as they are, such timings make a
small batch look slow and the model fall with size. The ledger does not record which job was
first on its server, so timings are screened: a job is a warm-up suspect when it took more
than `WARM_UP_FACTOR` times its reference prediction (or `ROBUST_K` robust deviations above
it, when the timings are that noisy) and it stands alone: neither the job of its kind before
nor the one after was slow too (a change of load slows every job after it, a warm-up one). The
newest job is never a suspect: nothing says yet whether it was a one-off. An observation
recorded as `first_on_server` needs no screening; `learning.cost` leaves it out.

While the fit has no timing to spare (a calibration's two partials) there is no reference
prediction: a prior's shape is another machine's split of start-up and per-row cost (the
packaged q6 model on Spark Connect prices 150k rows at a fifth of 878k; a demo's jobs took
2.0 and 2.63 s, and screened against that shape the small one was dropped, pricing 150k rows
at 0.49 s). Then only what no cost model allows marks a warm-up: a job `WARM_UP_FACTOR` times
slower than a later one at least as large (`falls_with_size`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from airflow_iqp.learning.fit import MIN_SECONDS

if TYPE_CHECKING:
    from numpy.typing import NDArray

WARM_UP_FACTOR = 2.0  # a job this many times its prediction, alone, is a warm-up suspect
ROBUST_K = 4.0  # ... or this many robust deviations (1.4826 * median |log residual|) above it
ROBUST_MIN = 5  # timings needed for a robust deviation to mean anything


def warm_up_suspects(seconds: NDArray[np.float64], reference: NDArray[np.float64]) -> NDArray[np.bool_]:
    """Which timings (oldest first) are isolated warm-ups against their reference predictions."""
    residuals = np.log(np.maximum(seconds, MIN_SECONDS) / np.maximum(reference, MIN_SECONDS))
    threshold = math.log(WARM_UP_FACTOR)
    if len(residuals) >= ROBUST_MIN:
        threshold = max(threshold, ROBUST_K * 1.4826 * float(np.median(np.abs(residuals))))
    slow = residuals > threshold
    also_slow = np.concatenate([[False], residuals > threshold / 2, [False]])  # padded: no neighbour
    before, after = also_slow[:-2], also_slow[2:]
    newest = np.arange(len(residuals)) == len(residuals) - 1
    suspects: NDArray[np.bool_] = slow & ~before & ~after & ~newest
    return suspects


def falls_with_size(sizes: NDArray[np.float64], seconds: NDArray[np.float64]) -> NDArray[np.bool_]:
    """Which timings (oldest first) took over `WARM_UP_FACTOR` times a later job at least as large."""
    suspects = np.zeros(len(sizes), dtype=bool)
    for i in range(len(sizes) - 1):
        later = seconds[i + 1 :][sizes[i + 1 :] >= sizes[i]]
        suspects[i] = len(later) > 0 and seconds[i] > WARM_UP_FACTOR * float(later.min())
    return suspects
