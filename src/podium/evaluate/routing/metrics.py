"""RouteLLM's metrics (Ong et al. 2024, §5) over a system's operating points.

An operating point is (c, a): the share c ∈ [0, 1] of questions on which the strong model was called, and the
accuracy a reached. With a_w and a_s the accuracies of always-weak and always-strong:

- PGR(a) = (a − a_w) / (a_s − a_w), the performance gap recovered;
- APGR = ∫₀¹ PGR(c) dc, the area under the curve through the system's points and the two single-model
  endpoints (0, 0) and (1, 1), by the trapezoid rule (RouteLLM samples the curve at evenly spaced strong-call
  shares; with a threshold sweep that fine the two agree). A random router scores 0.5;
- CPT(x) = the least strong-call share at which the curve reaches PGR = x, by linear interpolation between
  points (1.0 when it only gets there at the strong endpoint).

A system with one operating point (an orchestrator at one preference) has the curve that mixing it at random
with always-weak or always-strong traces: the segments (0, 0)–(c, p)–(1, 1).
"""

import itertools
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Point:
    """One operating point: strong-call share, accuracy, and USD per question."""

    strong_share: float
    accuracy: float
    usd_per_question: float = 0.0


def pgr(accuracy: float, weak: float, strong: float) -> float:
    """Performance gap recovered; the gap must be positive."""
    if strong <= weak:
        raise ValueError(f"the strong model ({strong:.4f}) must be more accurate than the weak one ({weak:.4f})")
    return (accuracy - weak) / (strong - weak)


def curve(points: Sequence[Point], weak: float, strong: float) -> list[tuple[float, float]]:
    """(strong share, PGR) through the endpoints and ``points``, sorted by share; at one share, the best PGR."""
    best: dict[float, float] = {0.0: 0.0, 1.0: 1.0}
    for point in points:
        value = pgr(point.accuracy, weak, strong)
        best[point.strong_share] = max(best.get(point.strong_share, value), value)
    return sorted(best.items())


def apgr(points: Sequence[Point], weak: float, strong: float) -> float:
    """Average performance gap recovered over strong-call shares from 0 to 1."""
    line = curve(points, weak, strong)
    return sum((c1 - c0) * (p0 + p1) / 2 for (c0, p0), (c1, p1) in itertools.pairwise(line))


def cpt(points: Sequence[Point], weak: float, strong: float, target: float) -> float:
    """Call-performance threshold: the least strong-call share whose PGR reaches ``target`` (e.g. 0.5)."""
    line = curve(points, weak, strong)
    for (c0, p0), (c1, p1) in itertools.pairwise(line):
        if p0 >= target:
            return c0
        if p1 >= target:
            return c0 + (c1 - c0) * (target - p0) / (p1 - p0)
    return 1.0
