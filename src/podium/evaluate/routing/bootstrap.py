"""How sure each curve metric is: a bootstrap over the tasks (Efron's percentile interval), every system resampled
on the same tasks, so that the difference of two systems is paired.

A resample draws as many tasks as there are, with replacement; it is a weight vector over the tasks (how often
each was drawn, over the count). Every operating point keeps its outcomes task by task
(:class:`~podium.evaluate.routing.metrics.TaskOutcomes`), so a curve of K points is three K × tasks matrices (right,
USD, strong worker called) and a resample's points are their products with the weight vector: no router is fitted
or traced again. The reference workers keep their roles (the weak and strong, cheapest and best workers of the
whole split) and their accuracies and costs are taken on the resample, as the metrics are. A curve traced on the
resampled tasks themselves has the same points (thresholds between tasks left out of the resample give points
equal to their neighbours), so each resample's metrics are those of ``podium routing compare`` on that resample.

The interval of a metric is the 2.5th to 97.5th percentile of its resamples. The paired interval of two systems is
that of the difference of their metrics over the same resamples; ``ahead`` is the share of resamples in which the
first is better (a higher APGR, a lower CPT). A resample on which the gap between the reference workers closes (the
strong one no more accurate than the weak one) has no metrics and is left out; the result says how many were.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from podium.evaluate.routing.metrics import (
    Point,
    area,
    frontier_area,
    reach,
    share_curve,
    spend_frontier,
)
from podium.routers.data import RoutingItem

CURVE_METRICS = ("apgr", "cpt50", "cpt80", "cost_apgr", "cost_cpt50", "cost_cpt80")
"""The metrics of a whole curve, which the bootstrap gives intervals for."""
HIGHER_IS_BETTER = {"apgr": True, "cost_apgr": True}
"""The metrics where more is better (the CPTs: less spend to reach the target is better)."""


def resample_weights(tasks: int, resamples: int, seed: int) -> np.ndarray:
    """(resamples × tasks): row r is how often each task is drawn in resample r, over the number of tasks."""
    rng = np.random.default_rng(seed)
    return rng.multinomial(tasks, np.full(tasks, 1.0 / tasks), size=resamples) / tasks


@dataclass(frozen=True)
class CurveTasks:
    """A curve's operating points task by task: rows are points, columns tasks."""

    correct: np.ndarray
    usd: np.ndarray
    strong: np.ndarray | None
    """1.0 where the point called the strong worker (two workers; None: more)."""

    @classmethod
    def of(cls, points: Sequence[Point], strong: str | None) -> "CurveTasks":
        """The matrices of ``points``, each of which must keep its tasks."""
        missing = [index for index, point in enumerate(points) if point.tasks is None]
        if missing or not points:
            raise ValueError(f"the curve's points {missing} do not keep their tasks: they cannot be resampled")
        tasks = [point.tasks for point in points if point.tasks is not None]
        count = len(tasks[0].correct)
        flags = None
        if strong is not None:
            flags = np.stack([task.called.get(strong, np.zeros(count)) for task in tasks])
        return cls(np.stack([task.correct for task in tasks]), np.stack([task.usd for task in tasks]), flags)


@dataclass(frozen=True)
class References:
    """The reference workers' outcomes task by task: their roles as in :func:`podium.evaluate.routing.compare.
    references` on the whole split."""

    correct: Mapping[str, np.ndarray]
    """Role (weak, strong, cheapest, best) → 1.0 where that worker was right."""
    usd: Mapping[str, np.ndarray]
    """Role → what that worker cost on each task."""

    @classmethod
    def of(cls, items: Sequence[RoutingItem], roles: Mapping[str, str]) -> "References":
        """The outcomes on ``items`` of the worker of each role (role → worker name)."""
        correct = {role: np.array([item.outcomes[name].correct for item in items], dtype=float)
                   for role, name in roles.items()}  # fmt: skip
        usd = {role: np.array([item.outcomes[name].usd for item in items]) for role, name in roles.items()}
        return cls(correct, usd)


def resampled_metrics(curve: CurveTasks, references: References, weights: np.ndarray) -> dict[str, np.ndarray]:
    """Each curve metric on each resample (rows of ``weights``), NaN where a resample leaves it undefined; a metric
    the curve has no data for (the two-worker ones without a strong worker) is left out."""
    accuracy = weights @ curve.correct.T
    mean = {role: weights @ values for role, values in references.correct.items()}
    cost = {role: weights @ values for role, values in references.usd.items()}
    results = {metric: np.full(len(weights), np.nan) for metric in CURVE_METRICS}
    # a resample's accuracies are multiples of 1 / tasks: a gap below half of that is a tie left by float rounding
    tie = 0.5 / weights.shape[1]
    if curve.strong is not None and "weak" in mean:
        shares = weights @ curve.strong.T
        gap = mean["strong"] - mean["weak"]
        for row in np.flatnonzero(gap > tie):
            line = share_curve(shares[row], (accuracy[row] - mean["weak"][row]) / gap[row])
            results["apgr"][row] = area(line)
            results["cpt50"][row], results["cpt80"][row] = reach(line, 0.5), reach(line, 0.8)
    else:
        for metric in ("apgr", "cpt50", "cpt80"):
            del results[metric]
    spend = weights @ curve.usd.T
    gap, span = mean["best"] - mean["cheapest"], cost["best"] - cost["cheapest"]
    for row in np.flatnonzero((gap > tie) & (span > 0)):
        line = spend_frontier((spend[row] - cost["cheapest"][row]) / span[row],
                              (accuracy[row] - mean["cheapest"][row]) / gap[row])  # fmt: skip
        results["cost_apgr"][row] = frontier_area(line)
        results["cost_cpt50"][row], results["cost_cpt80"][row] = reach(line, 0.5), reach(line, 0.8)
    return results


@dataclass(frozen=True)
class Paired:
    """The difference of one metric between two systems over the same resamples."""

    difference: float
    """The first system's metric less the second's, on the whole split."""
    low: float
    high: float
    ahead: float
    """The share of resamples in which the first system is better."""


@dataclass
class Bootstrap:
    """Intervals of every system's curve metrics and, for one pair of systems, of their differences."""

    resamples: int
    seed: int
    intervals: dict[str, dict[str, tuple[float, float]]]
    """Metric → system → (2.5th, 97.5th percentile)."""
    pair: tuple[str, str] | None = None
    """The two systems compared: the best orchestrator and the best router."""
    paired: dict[str, Paired] | None = None
    """Metric → the pair's difference."""
    undefined: int = 0
    """Resamples on which some metric was undefined (left out of its interval)."""

    def result(self) -> dict[str, object]:
        """As JSON-ready data."""
        out: dict[str, object] = {"resamples": self.resamples, "seed": self.seed, "intervals": {
            metric: {system: [round(low, 4), round(high, 4)] for system, (low, high) in systems.items()}
            for metric, systems in self.intervals.items()}}  # fmt: skip
        if self.pair is not None and self.paired is not None:
            out["paired"] = {"systems": list(self.pair), **{metric: {
                "difference": round(value.difference, 4), "interval": [round(value.low, 4), round(value.high, 4)],
                "ahead": round(value.ahead, 4)} for metric, value in self.paired.items()}}  # fmt: skip
        if self.undefined:
            out["undefined_resamples"] = self.undefined
        return out


def bootstrap(
    curves: Mapping[str, Sequence[Point]],
    items: Sequence[RoutingItem],
    roles: Mapping[str, str],
    point_estimates: Mapping[str, Mapping[str, float | None]],
    *,
    resamples: int,
    seed: int,
    pair: tuple[str, str] | None = None,
) -> Bootstrap:
    """The intervals of each curve's metrics over ``resamples`` resamples of ``items`` (drawn from ``seed``), and
    the paired differences of ``pair``; ``roles`` names the reference workers (role → worker) and
    ``point_estimates`` (metric → system → value) the metrics on the whole split: a metric undefined there gets no
    interval, and a paired difference reports the difference of the two beside its interval."""
    weights = resample_weights(len(items), resamples, seed)
    references = References.of(items, roles)
    strong = roles.get("strong")
    samples = {name: resampled_metrics(CurveTasks.of(points, strong), references, weights)
               for name, points in curves.items()}  # fmt: skip
    undefined = np.zeros(resamples, dtype=bool)
    intervals: dict[str, dict[str, tuple[float, float]]] = {}
    for name, metrics in samples.items():
        for metric, values in metrics.items():
            if point_estimates.get(metric, {}).get(name) is None:
                continue  # undefined on the whole split: no interval, whatever some resamples say
            undefined |= np.isnan(values)
            if not np.all(np.isnan(values)):
                low, high = np.nanpercentile(values, [2.5, 97.5])
                intervals.setdefault(metric, {})[name] = (float(low), float(high))
    result = Bootstrap(resamples, seed, intervals, undefined=int(undefined.sum()))
    if pair is not None:
        result.pair, result.paired = pair, {}
        for metric in CURVE_METRICS:
            estimates = [point_estimates.get(metric, {}).get(system) for system in pair]
            if metric not in samples[pair[0]] or metric not in samples[pair[1]] or None in estimates:
                continue
            difference = samples[pair[0]][metric] - samples[pair[1]][metric]
            defined = difference[~np.isnan(difference)]
            if not len(defined):
                continue
            low, high = np.percentile(defined, [2.5, 97.5])
            better = defined > 0 if HIGHER_IS_BETTER.get(metric, False) else defined < 0
            first, second = (float(value or 0.0) for value in estimates)
            result.paired[metric] = Paired(first - second, float(low), float(high), float(better.mean()))
    return result
