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

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Point:
    """One operating point: accuracy, USD per task, and each worker's share of tasks it was called on."""

    accuracy: float
    usd_per_question: float = 0.0
    shares: Mapping[str, float] = field(default_factory=dict)
    """Worker → share of tasks on which it was called."""
    calls_per_question: float = 1.0

    def share(self, worker: str) -> float:
        return self.shares.get(worker, 0.0)


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
    best: dict[float, float] = {0.0: 0.0, 1.0: 1.0}
    for point in points:
        value = pgr(point.accuracy, weak.accuracy, strong.accuracy)
        share = point.share(strong.name)
        best[share] = max(best.get(share, value), value)
    return sorted(best.items())


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
    placed = [(0.0, 0.0), (1.0, 1.0)]
    for point in points:
        spend = max(0.0, (point.usd_per_question - cheapest.usd_per_question) / span)
        if spend <= 1.0:
            placed.append((spend, pgr(point.accuracy, cheapest.accuracy, best.accuracy)))
    frontier: list[tuple[float, float]] = []
    for spend, value in sorted(placed, key=lambda pair: (pair[0], -pair[1])):
        if not frontier or value > frontier[-1][1]:
            frontier.append((spend, value))
    return frontier


def cost_apgr(points: Sequence[Point], cheapest: Reference, best: Reference) -> float:
    """The cost curve's area over normalised spend from 0 to 1."""
    line = cost_curve(points, cheapest, best)
    return area([*line, (1.0, line[-1][1])])


def cost_cpt(points: Sequence[Point], cheapest: Reference, best: Reference, target: float) -> float:
    """The least normalised spend at which the cost curve reaches PGR ``target``."""
    return reach(cost_curve(points, cheapest, best), target)


def area(line: Sequence[tuple[float, float]]) -> float:
    """The trapezoid area under a polyline sorted by its first coordinate."""
    return sum((x1 - x0) * (y0 + y1) / 2 for (x0, y0), (x1, y1) in itertools.pairwise(line))


def reach(line: Sequence[tuple[float, float]], target: float) -> float:
    """The least first coordinate at which the polyline reaches ``target``, interpolated (1.0 if it never does
    before its end)."""
    for (c0, p0), (c1, p1) in itertools.pairwise(line):
        if p0 >= target:
            return c0
        if p1 >= target:
            return c0 + (c1 - c0) * (target - p0) / (p1 - p0)
    return 1.0
