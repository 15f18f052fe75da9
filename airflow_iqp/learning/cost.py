"""Cost models learned from one DAG's own jobs on one execution path, with their residual spread.

Every partial job (rows, seconds) and merge (partials, seconds) the DAG ran is an observation;
`fit_cost` fits both models from them, monotone and piecewise linear (`learning.fit`), each with
the spread of its relative residuals so that a plan can ask for a pessimistic model
(`LearnedCost.with_margin`). The fit is cheap (about a millisecond for a thousand observations,
see benchmarks/learning_speed.py), so callers refit from all observations after every job
instead of updating a model incrementally.

**Recency.** The machine's load changes, so recent jobs count more: an observation's weight
halves with every `HALF_LIFE` newer observations of the same kind (a few windows' partials, ten
windows' merges). After a change of load the model has moved seven eighths of the way within
three half-lives, while the weighted fit still rests on about 30 observations' worth of data
(the effective sample size), which keeps the noise down. Only the newest `RECENT` of each kind
are fitted (older ones weigh under 0.1%), so a caller may read just those. Counting jobs rather
than seconds keeps one rule for any window length. Old observations at sizes no recent job had
still place the model there (the smallest and largest sizes are always knots): nothing newer
says otherwise.

**How many observations.** Each knot rests on at least `OBSERVATIONS_PER_KNOT` observations
(never fewer than two knots while there are two sizes), so residuals measure noise instead of
being interpolated away. Below that, the fit is the least-squares line, or a constant for one
size, which is what the first window gives: a one-file partial, the rest of the window as one
partial, then the merge make a **calibration** model (partial = the line through the two points,
merge = that one timing as a constant). From `ENOUGH_PARTIALS` partials and `ENOUGH_MERGES`
merges on, the model is a **refit**. With no partials at two different sizes, or no merge, there
is nothing to fit: `NotEnoughObservations` says what is missing, and the caller runs the
calibration window.

**Prior.** Given a prior (a fitted file's section for the path), each kind keeps the prior's
shape and learns its scale, and with sizes far enough apart its intercept and a shape shrunk
toward it (`learning.prior`); one partial and one merge are then enough. Without one, the free
fit extrapolates past its largest size at most proportionally (`fit.proportional_tail`).
**Warm-ups** (a job first on a fresh server, flagged or found as a lone outlier,
`learning.warmup`) are left out of the fit and its spread.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from statistics import NormalDist
from typing import TYPE_CHECKING

import numpy as np

from airflow_iqp.constants import CostSource, ExecutionPath, JobKind
from airflow_iqp.exceptions import IqpError
from airflow_iqp.learning.fit import MAX_KNOTS, MIN_SECONDS, along, fit_piecewise, proportional_tail
from airflow_iqp.learning.prior import fit_on_prior
from airflow_iqp.learning.warmup import falls_with_size, warm_up_suspects
from airflow_iqp.planning.cost import PiecewiseLinearCost
from airflow_iqp.validation import number, whole_number

if TYPE_CHECKING:
    from collections.abc import Iterable

    from numpy.typing import NDArray

    from airflow_iqp.declaration import CostModel

HALF_LIFE = 10  # observations of one kind after which an observation weighs half
RECENT = 10 * HALF_LIFE  # observations of one kind fitted; the next older would weigh < 0.1%
OBSERVATIONS_PER_KNOT = 3
ENOUGH_PARTIALS = 6  # two knots' worth: below this, or below ENOUGH_MERGES, a calibration
ENOUGH_MERGES = 3
QUANTILES = {0.9: "p90", 0.95: "p95"}  # the quantiles a Spread keeps, by level


class NotEnoughObservations(IqpError):
    """No cost model can be fitted yet; the caller plans the calibration window instead."""

    def __init__(self, partial_sizes: int, merges: int) -> None:
        super().__init__(
            "a learned cost model needs partial jobs at 2 different sizes and 1 merge, "
            f"there are partials at {partial_sizes} size(s) and {merges} merge(s): "
            "run a calibration window (a one-file partial, the rest as one batch, then the merge)"
        )
        self.partial_sizes = partial_sizes
        self.merges = merges


@dataclass(frozen=True)
class Observation:
    """One job's measured cost: size is rows for a partial, partials for a merge.

    `first_on_server`: the job was the first on a fresh Spark Connect server or JVM, so its
    time includes the warm-up (`learning.warmup`) and the fit leaves it out.
    """

    kind: JobKind
    size: int
    seconds: float
    observed_at: datetime
    first_on_server: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", JobKind(self.kind))
        minimum = 1 if self.kind is JobKind.MERGE else 0  # an empty window merges one empty partial
        object.__setattr__(self, "size", whole_number(self.size, f"{self.kind} size", minimum=minimum))
        object.__setattr__(self, "seconds", number(self.seconds, f"{self.kind} seconds", minimum=0))
        if not isinstance(self.observed_at, datetime):
            raise ValueError(f"observed_at must be a datetime, got {self.observed_at!r}")
        if not isinstance(self.first_on_server, bool):
            raise ValueError(f"first_on_server must be True or False, got {self.first_on_server!r}")


@dataclass(frozen=True)
class Spread:
    """Relative residuals (observed - predicted) / predicted of a fit, weighted like the fit.

    A job took (1 + r) times its prediction; p90 and p95 are the weighted quantiles (the
    smallest residual with at least that share of the weight at or below it). Residuals on the
    data the model was fitted to understate the error on new jobs, so std and the quantiles'
    distance from the mean are widened by the degrees of freedom the fit used (the usual
    n / (n - parameters) correction of the variance). While the fit has no observation to spare
    (a calibration: two timings on a line), the spread is zero and means nothing; see
    `LearnedCost.source`. A count of 0 is no residuals at all: a fitted file's model as the
    ledger stores it (`runtime.costs.file_model`).
    """

    mean: float
    std: float
    p90: float
    p95: float
    count: int

    def margin(self, *, k: float | None = None, quantile: float | None = None) -> float:
        """The relative margin mean + k * std, or the kept quantile; never below 0."""
        if (k is None) == (quantile is None):
            raise ValueError("give exactly one of k (mean + k * std) or quantile (0.9 or 0.95)")
        if k is not None:
            return max(0.0, self.mean + number(k, "k", minimum=0) * self.std)
        if quantile not in QUANTILES:
            raise ValueError(f"quantile must be one of {', '.join(map(str, QUANTILES))}, got {quantile!r}")
        return max(0.0, float(getattr(self, QUANTILES[quantile])))

    def scaled(self, factor: float) -> Spread:
        """The same residuals measured against predictions `factor` times larger."""
        if factor == 1:  # exactly: no margin leaves the model as it was
            return self
        return Spread(
            mean=(1 + self.mean) / factor - 1,
            std=self.std / factor,
            p90=(1 + self.p90) / factor - 1,
            p95=(1 + self.p95) / factor - 1,
            count=self.count,
        )

    def to_dict(self) -> dict[str, float | int]:
        """Plain JSON values (the ledger's cost_models.*_spread)."""
        return {"mean": self.mean, "std": self.std, "p90": self.p90, "p95": self.p95, "count": self.count}

    @classmethod
    def from_dict(cls, data: object, where: str) -> Spread:
        """The spread stored at `where`; errors name the field."""
        if not isinstance(data, Mapping):
            raise ValueError(f"{where} must be an object with mean, std, p90, p95 and count, got {data!r}")
        values = {name: number(data.get(name), f"{where}.{name}") for name in ("mean", "std", "p90", "p95")}
        if values["std"] < 0:
            raise ValueError(f"{where}.std must be >= 0, got {values['std']!r}")
        return cls(**values, count=whole_number(data.get("count"), f"{where}.count", minimum=0))


@dataclass(frozen=True)
class LearnedCost:
    """A DAG's partial (seconds by rows) and merge (seconds by partials) models on one path.

    Both are `PiecewiseLinearCost`s with the planner's cost(0) = 0 (an empty batch is never
    planned). A calibration's spreads rest on two or three timings and are zero when they lie
    on a line: a caller that needs a safety margin should not trust them before `source` is
    refit.
    """

    path: ExecutionPath
    source: CostSource
    partial: PiecewiseLinearCost
    merge: PiecewiseLinearCost
    partial_spread: Spread
    merge_spread: Spread

    @property
    def observations(self) -> int:
        """How many observations the model rests on (the ledger's cost_models.observations)."""
        return self.partial_spread.count + self.merge_spread.count

    def partial_seconds(self, rows: int) -> float:
        """Predicted seconds of a partial job that runs over `rows` rows.

        A job that runs pays at least its start-up, even over no rows, so this is cost(1) for
        rows = 0, where the planner's cost(0) = 0.
        """
        return self.partial.cost(max(rows, 1))

    def merge_seconds(self, partials: int) -> float:
        """Predicted seconds of a merge over `partials` partial results (an empty window has one)."""
        return self.merge.cost(max(partials, 1))

    def interval(self, kind: JobKind | str, size: int, confidence: float = 0.95) -> tuple[float, float]:
        """The seconds a job of `size` takes with probability `confidence`, from the residual spread.

        The bounds are the prediction times 1 + mean -+ z std of the relative residuals (z the
        normal quantile of the two-sided confidence), the spread `with_margin` uses: the upper
        bound is `with_margin(k=z)`'s prediction, and like a margin the interval never excludes
        the prediction itself. A calibration's spread is zero: so is its interval's width.
        """
        level = number(confidence, "confidence", above=0)
        if level >= 1:
            raise ValueError(f"confidence must be < 1, got {confidence!r}")
        partial = JobKind(kind) is JobKind.PARTIAL
        predicted = self.partial_seconds(size) if partial else self.merge_seconds(size)
        spread = self.partial_spread if partial else self.merge_spread
        z = NormalDist().inv_cdf((1 + level) / 2)
        low = max(0.0, 1 + min(0.0, spread.mean - z * spread.std))
        high = 1 + max(0.0, spread.mean + z * spread.std)
        return predicted * low, predicted * high

    def with_margin(self, *, k: float | None = None, quantile: float | None = None) -> LearnedCost:
        """A pessimistic model: every prediction times 1 + margin, per kind from its own spread.

        The margin is mean + k * std of the relative residuals (k standard deviations of
        pessimism, as in Mayer et al.'s latency models) or the 0.9 / 0.95 quantile, and never
        below 0: a margin makes a model slower, never faster. Scaling keeps the model monotone
        with cost(0) = 0, and since residuals are relative, the same margin protects small and
        large batches alike. The returned spreads are the residuals against the new model.
        """
        partial = 1 + self.partial_spread.margin(k=k, quantile=quantile)
        merge = 1 + self.merge_spread.margin(k=k, quantile=quantile)
        return LearnedCost(
            path=self.path,
            source=self.source,
            partial=self.partial.scaled(partial),
            merge=self.merge.scaled(merge),
            partial_spread=self.partial_spread.scaled(partial),
            merge_spread=self.merge_spread.scaled(merge),
        )

    def to_dict(self) -> dict[str, object]:
        """Plain JSON values, one key per column of the ledger's cost_models table."""
        return {
            "path": self.path.value,
            "source": self.source.value,
            "observations": self.observations,
            "partial": [list(p) for p in self.partial.points],
            "merge": [list(p) for p in self.merge.points],
            "partial_spread": self.partial_spread.to_dict(),
            "merge_spread": self.merge_spread.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> LearnedCost:
        """The model `to_dict` gave; `observations` is derived, so it is not read back."""
        path, source = data.get("path"), data.get("source")
        if path not in tuple(ExecutionPath) or source not in tuple(CostSource):
            raise ValueError(
                f"learned cost model path must be one of {', '.join(ExecutionPath)} and source one of "
                f"{', '.join(CostSource)}, got path {path!r} and source {source!r}"
            )
        models = {}
        for kind in ("partial", "merge"):
            points = data.get(kind)
            if not isinstance(points, list):
                raise ValueError(f"learned cost model {kind} must be a list of [size, seconds] points, got {points!r}")
            try:
                models[kind] = PiecewiseLinearCost(points)
            except (TypeError, ValueError) as err:
                raise ValueError(f"learned cost model {kind}: {err}") from None
        return cls(
            path=ExecutionPath(str(path)),
            source=CostSource(str(source)),
            partial=models["partial"],
            merge=models["merge"],
            partial_spread=Spread.from_dict(data.get("partial_spread"), "partial_spread"),
            merge_spread=Spread.from_dict(data.get("merge_spread"), "merge_spread"),
        )


def _weighted_quantile(values: NDArray[np.float64], weights: NDArray[np.float64], level: float) -> float:
    order = np.argsort(values)
    cumulative = np.cumsum(weights[order])
    return float(values[order][np.searchsorted(cumulative, level * cumulative[-1] - 1e-12)])


def _shape(
    sizes: NDArray[np.float64],
    seconds: NDArray[np.float64],
    weights: NDArray[np.float64],
    prior: PiecewiseLinearCost | None,
) -> tuple[PiecewiseLinearCost, int]:
    """The fitted model and the parameters it spent: on the prior's curve, or free with a capped tail."""
    knots = min(MAX_KNOTS, max(2, len(sizes) // OBSERVATIONS_PER_KNOT))
    if prior is not None:
        fitted = fit_on_prior(prior, sizes, seconds, weights, knots)
        return PiecewiseLinearCost(fitted.points), fitted.parameters
    points = fit_piecewise(sizes, seconds, weights, knots).points
    return PiecewiseLinearCost(proportional_tail(points)), len(points)


def _fit_kind(observations: list[Observation], prior: PiecewiseLinearCost | None) -> tuple[PiecewiseLinearCost, Spread]:
    """One kind's model and spread from its observations, oldest first, warm-ups left out."""
    weights = 0.5 ** (np.arange(len(observations))[::-1] / HALF_LIFE)
    kept = np.array([not o.first_on_server for o in observations])
    if not kept.any():  # only warm-ups: better than nothing
        kept[:] = True
    sizes = np.array([o.size for o in observations], dtype=float)[kept]
    seconds = np.array([o.seconds for o in observations], dtype=float)[kept]
    weights = weights[kept]
    model, parameters = _shape(sizes, seconds, weights, prior)
    # Screen for warm-ups against the fit, or, while the fit has no timing to spare (it passes
    # through them all), for a cost that fell as the size grew.
    if len(sizes) > parameters:
        suspects = warm_up_suspects(seconds, along(model.points, np.maximum(sizes, 1)))
    else:
        suspects = falls_with_size(sizes, seconds)
    if suspects.any():
        sizes, seconds, weights = sizes[~suspects], seconds[~suspects], weights[~suspects]
        model, parameters = _shape(sizes, seconds, weights, prior)
    predicted = np.maximum(along(model.points, np.maximum(sizes, 1)), MIN_SECONDS)
    residuals = (seconds - predicted) / predicted
    mean = float(np.average(residuals, weights=weights))
    # The fit spent one degree of freedom per parameter on these very points; widening the
    # deviations by sqrt(n / (n - parameters)) (n: the effective sample size of the weights)
    # makes the variance unbiased for new jobs. With no observation to spare there is nothing
    # to widen.
    effective = weights.sum() ** 2 / (weights**2).sum()
    spare = effective - parameters
    widen = math.sqrt(effective / spare) if spare > 0 else 1.0
    spread = Spread(
        mean=mean,
        std=widen * math.sqrt(float(np.average((residuals - mean) ** 2, weights=weights))),
        p90=mean + widen * (_weighted_quantile(residuals, weights, 0.9) - mean),
        p95=mean + widen * (_weighted_quantile(residuals, weights, 0.95) - mean),
        count=len(sizes),
    )
    return model, spread


def fit_cost(
    observations: Iterable[Observation], path: ExecutionPath | str, prior: CostModel | None = None
) -> LearnedCost:
    """The cost model of one DAG on one execution path from its jobs' observations.

    With a `prior` (a fitted file's or a packaged model's section for this path) each kind
    keeps the prior's shape and learns its scale (`learning.prior`), so one partial and one
    merge are enough. Without, the free fit needs partials at two sizes and a merge.
    Raises NotEnoughObservations when they are missing.
    """
    path = ExecutionPath(path)
    ordered = sorted(observations, key=lambda o: o.observed_at)
    partials = [o for o in ordered if o.kind is JobKind.PARTIAL][-RECENT:]
    merges = [o for o in ordered if o.kind is JobKind.MERGE][-RECENT:]
    partial_sizes = len({o.size for o in partials})
    if partial_sizes < (1 if prior is not None else 2) or not merges:
        raise NotEnoughObservations(partial_sizes, len(merges))
    partial, partial_spread = _fit_kind(partials, None if prior is None else prior.partial)
    merge, merge_spread = _fit_kind(merges, None if prior is None else prior.merge)
    enough = len(partials) >= ENOUGH_PARTIALS and len(merges) >= ENOUGH_MERGES
    return LearnedCost(
        path=path,
        source=CostSource.REFIT if enough else CostSource.CALIBRATION,
        partial=partial,
        merge=merge,
        partial_spread=partial_spread,
        merge_spread=merge_spread,
    )
