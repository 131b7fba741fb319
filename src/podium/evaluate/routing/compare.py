"""Routers and evaluated orchestrators side by side on one split of the recorded outcomes (``podium routing
compare``): APGR and CPT over each system's curve, and accuracy, USD and strong-call share at one operating point.

An orchestrator's curve is its thresholded escalation score and its operating point the one it reached when run
(:mod:`podium.evaluate.routing.orchestrators`); a router's operating point is the one of its sweep nearest the
strong-call share of the first orchestrator (0.5 without one), so the columns compare systems at equal use of the
strong model.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from podium.evaluate.routing.data import STRONG, WEAK, RoutingItem
from podium.evaluate.routing.metrics import Point, apgr, cpt
from podium.evaluate.routing.orchestrators import OrchestratorRun

METRICS = ("apgr", "accuracy", "usd_per_question", "cpt50", "cpt80", "strong_share", "calls_per_question")
"""The table's metrics, in the order printed."""


@dataclass
class Comparison:
    """Every system's curve and the table of metrics."""

    curves: dict[str, list[Point]]
    table: dict[str, dict[str, float | None]] = field(default_factory=dict)
    """Metric → system → value (None where it is undefined)."""
    n_test: int = 0
    notes: list[str] = field(default_factory=list)
    """Why a metric is missing, when one is."""

    def result(self) -> dict[str, Any]:
        """The table as one JSON-ready object, with the number of questions (and notes, when there are any)."""
        return {**self.table, "n_test": self.n_test, **({"notes": self.notes} if self.notes else {})}


def nearest(points: Sequence[Point], share: float) -> Point:
    """The point whose strong-call share is nearest ``share``."""
    return min(points, key=lambda point: abs(point.strong_share - share))


def compare(
    routers: dict[str, list[Point]], orchestrators: Sequence[OrchestratorRun], items: Sequence[RoutingItem]
) -> Comparison:
    """The metrics of every router and orchestrator on ``items`` (the questions all of them were scored on)."""
    weak = sum(item.outcomes[WEAK].correct for item in items) / len(items)
    strong = sum(item.outcomes[STRONG].correct for item in items) / len(items)
    share = orchestrators[0].greedy().strong_share if orchestrators else 0.5
    shown = {name: nearest(points, share) for name, points in routers.items()}
    calls = {name: 1.0 + (shown[name].strong_share if name.startswith("cascade") else 0.0) for name in routers}
    curves = dict(routers)
    for run in orchestrators:
        curves[run.name], shown[run.name], calls[run.name] = run.curve(), run.greedy(), run.calls()
    comparison = Comparison(curves, {metric: {} for metric in METRICS}, len(items))
    gap = strong > weak
    if not gap:
        comparison.notes.append(
            f"APGR and CPT are undefined on these {len(items)} questions: the strong model's accuracy ({strong:.3f}) "
            f"is not above the weak model's ({weak:.3f}), so there is no gap to recover"
        )
    for name, points in curves.items():
        point = shown[name]
        row = {
            "apgr": apgr(points, weak, strong) if gap else None,
            "accuracy": point.accuracy,
            "usd_per_question": point.usd_per_question,
            "cpt50": cpt(points, weak, strong, 0.5) if gap else None,
            "cpt80": cpt(points, weak, strong, 0.8) if gap else None,
            "strong_share": point.strong_share,
            "calls_per_question": calls[name],
        }
        for metric, value in row.items():
            comparison.table[metric][name] = (
                None if value is None else round(value, 6 if metric == "usd_per_question" else 4)
            )
    return comparison
