"""Routing metrics over a system's operating points: RouteLLM's for two workers, a cost curve's for any number.

An operating point is what a system reached on the tasks: its accuracy, its USD per task and the share of tasks on
which it called each worker.

**Two workers** (RouteLLM, Ong et al. 2024, §5): with the weak (cheaper) and strong (more accurate) workers'
accuracies a_w and a_s, PGR(a) = (a − a_w) / (a_s − a_w), the performance gap recovered, over the share c ∈ [0, 1]
of tasks that called the strong worker:

- APGR = ∫₀¹ PGR(c) dc, the area under the curve through the system's points and the two single-worker endpoints
  (0, 0) and (1, 1), by the trapezoid rule (at one share, the best point). A random router scores 0.5;
- CPT(x) = the least strong-call share at which the curve reaches PGR = x, by linear interpolation between points
  (1.0 when it only gets there at the strong endpoint).

A system with one operating point (an orchestrator at one preference) has the curve that mixing it at random
with always-weak or always-strong traces: the segments (0, 0)–(c, p)–(1, 1).

**Any number of workers** (the cost curve, Podium's definition): the same gap, from the *cheapest* worker (lowest
mean USD per task) to the *best* one (highest accuracy; the cheaper on a tie), over normalised spend
x = (USD − USD_cheapest) / (USD_best − USD_cheapest). The curve is the system's Pareto frontier in (x, PGR) with the
endpoints (0, 0) and (1, 1): at each spend the best PGR of any point that costs no more, joined linearly between
frontier points (mixing two neighbouring operating points at random reaches every point of that segment). Points
cheaper than the cheapest worker count at x = 0; points dearer than the best worker are past the range. COST-APGR
is its area over x ∈ [0, 1] and COST-CPT(x) the least normalised spend at which it reaches PGR = x. With two
workers whose strong one is also the dearer, a call-count curve and a spend curve differ only in how a task's cost
varies, so the two areas are close but not equal.
"""

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class TaskOutcomes:
    """An operating point task by task, so that its metrics can be recomputed on resampled tasks
    (:mod:`podium.evaluate.routing.bootstrap`): each an array over the tasks, in one order."""

    correct: np.ndarray
    """1.0 where the task's answer was right."""
    usd: np.ndarray
    """What the task cost."""
    called: Mapping[str, np.ndarray]
    """Worker → 1.0 where the task called it."""


@dataclass(frozen=True)
class Point:
    """One operating point: accuracy, USD per task, and each worker's share of tasks it was called on."""

    accuracy: float
    usd_per_question: float = 0.0
    shares: Mapping[str, float] = field(default_factory=dict)
    """Worker → share of tasks on which it was called."""
    calls_per_question: float = 1.0
    tasks: TaskOutcomes | None = field(default=None, compare=False, repr=False)
    """The same point task by task (None: only its means are known)."""

    def share(self, worker: str) -> float:
        return self.shares.get(worker, 0.0)


def tally(correct: Sequence[bool], usd: Sequence[float], called: Sequence[Collection[str]], calls: int) -> Point:
    """The operating point of tasks that were each right or not, cost ``usd`` and called the workers ``called``
    (``calls`` calls in all), with the tasks kept on it."""
    count = len(correct)
    asked: dict[str, np.ndarray] = {}
    for task, names in enumerate(called):
        for name in names:
            asked.setdefault(name, np.zeros(count))[task] = 1.0
    return Point(
        accuracy=sum(correct) / count,
        usd_per_question=sum(usd) / count,
        shares={name: int(flags.sum()) / count for name, flags in asked.items()},
        calls_per_question=calls / count,
        tasks=TaskOutcomes(np.asarray(correct, dtype=float), np.asarray(usd, dtype=float), asked),
    )


@dataclass(frozen=True)
class Reference:
    """A single worker's standing: its name, accuracy and USD per task."""

    name: str
    accuracy: float
    usd_per_question: float


def pgr(accuracy: float, weak: float, strong: float) -> float:
    """Performance gap recovered; the gap must be positive."""
    if strong <= weak:
        raise ValueError(f"the strong model ({strong:.4f}) must be more accurate than the weak one ({weak:.4f})")
    return (accuracy - weak) / (strong - weak)


def curve(points: Sequence[Point], weak: Reference, strong: Reference) -> list[tuple[float, float]]:
    """(strong share, PGR) through the endpoints and ``points``, sorted by share; at one share, the best PGR."""
    shares = np.array([point.share(strong.name) for point in points])
    values = np.array([pgr(point.accuracy, weak.accuracy, strong.accuracy) for point in points])
    return [(float(x), float(y)) for x, y in share_curve(shares, values)]


def apgr(points: Sequence[Point], weak: Reference, strong: Reference) -> float:
    """Average performance gap recovered over strong-call shares from 0 to 1."""
    return area(curve(points, weak, strong))


def cpt(points: Sequence[Point], weak: Reference, strong: Reference, target: float) -> float:
    """Call-performance threshold: the least strong-call share whose PGR reaches ``target`` (e.g. 0.5)."""
    return reach(curve(points, weak, strong), target)


def cost_curve(points: Sequence[Point], cheapest: Reference, best: Reference) -> list[tuple[float, float]]:
    """(normalised spend, PGR) along the Pareto frontier of ``points`` with the endpoints (see the module notes)."""
    if best.usd_per_question <= cheapest.usd_per_question:
        raise ValueError(f"the best worker {best.name} must cost more than the cheapest {cheapest.name}")
    span = best.usd_per_question - cheapest.usd_per_question
    spends = np.array([(point.usd_per_question - cheapest.usd_per_question) / span for point in points])
    values = np.array([pgr(point.accuracy, cheapest.accuracy, best.accuracy) for point in points])
    return [(float(x), float(y)) for x, y in spend_frontier(spends, values)]


def cost_apgr(points: Sequence[Point], cheapest: Reference, best: Reference) -> float:
    """The cost curve's area over normalised spend from 0 to 1."""
    return frontier_area(cost_curve(points, cheapest, best))


def cost_cpt(points: Sequence[Point], cheapest: Reference, best: Reference, target: float) -> float:
    """The least normalised spend at which the cost curve reaches PGR ``target``."""
    return reach(cost_curve(points, cheapest, best), target)


def share_curve(shares: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The two-worker curve as rows (share, PGR): the endpoints (0, 0) and (1, 1) and each point, sorted by share,
    the best PGR at each share (shares equal to 12 decimals are one: a weighted mean rounds differently by the
    order it sums in)."""
    x = np.round(np.concatenate([[0.0, 1.0], shares]), 12)
    y = np.concatenate([[0.0, 1.0], values])
    order = np.lexsort((-y, x))
    x, y = x[order], y[order]
    first = np.concatenate([[True], x[1:] != x[:-1]])
    return np.stack([x[first], y[first]], axis=1)


def spend_frontier(spends: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The cost curve as rows (spend, PGR): the Pareto frontier of the endpoints and the points within the range
    (a spend below 0 counts at 0, one above 1 is left out), by spend."""
    within = spends <= 1.0
    x = np.round(np.concatenate([[0.0, 1.0], np.maximum(spends[within], 0.0)]), 12)
    y = np.concatenate([[0.0, 1.0], values[within]])
    order = np.lexsort((-y, x))
    x, y = x[order], y[order]
    best_before = np.concatenate([[-np.inf], np.maximum.accumulate(y)[:-1]])
    ahead = y > best_before
    return np.stack([x[ahead], y[ahead]], axis=1)


def frontier_area(line: Sequence[tuple[float, float]] | np.ndarray) -> float:
    """The area under a cost curve over spend from 0 to 1 (its last PGR held to the end)."""
    points = np.asarray(line, dtype=float)
    return area(np.vstack([points, [1.0, points[-1, 1]]]))


def area(line: Sequence[tuple[float, float]] | np.ndarray) -> float:
    """The trapezoid area under a polyline sorted by its first coordinate."""
    points = np.asarray(line, dtype=float)
    x, y = points[:, 0], points[:, 1]
    return float(np.sum(np.diff(x) * (y[:-1] + y[1:]) / 2))


def reach(line: Sequence[tuple[float, float]] | np.ndarray, target: float) -> float:
    """The least first coordinate at which the polyline reaches ``target``, interpolated (1.0 if it never does
    before its end). A value within 1e-9 of the target reaches it: the same PGR summed in another order (tasks
    resampled, say) must not move the threshold to the next point."""
    points = np.asarray(line, dtype=float)
    x, y = points[:, 0], points[:, 1]
    hits = np.flatnonzero(y >= target - 1e-9)
    if len(hits) == 0:
        return 1.0
    first = int(hits[0])
    if first == 0:
        return float(x[0])
    fraction = min((target - y[first - 1]) / (y[first] - y[first - 1]), 1.0)
    return float(x[first - 1] + (x[first] - x[first - 1]) * fraction)
