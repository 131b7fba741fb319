"""Routers and evaluated orchestrators side by side on one split of the recorded outcomes (``podium routing
compare``): APGR and CPT over each system's curve, and accuracy, USD and strong-call share at one operating point.

An orchestrator's curve is its thresholded escalation score and its operating point the one it reached when run
(:mod:`podium.evaluate.routing.orchestrators`), or, priced, the one a price sheet's break-even probability picks on
that curve once its score is calibrated (:mod:`podium.evaluate.routing.priced`); a router's operating point is the
one of its sweep nearest the strong-call share of the first orchestrator (0.5 without one), so the columns compare
systems at equal use of the strong model.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from podium.evaluate.routing.data import STRONG, WEAK, RoutingItem
from podium.evaluate.routing.metrics import Point, apgr, cpt
from podium.evaluate.routing.orchestrators import OrchestratorRun
from podium.evaluate.routing.priced import Priced

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
    breakeven: float | None = None
    """The price sheet's break-even probability that placed the ``_priced`` rows (None: no such rows)."""

    def systems(self) -> list[str]:
        """Every row of the table: the curves' systems, then the ``_priced`` rows."""
        return list(self.table[METRICS[0]])

    def result(self) -> dict[str, Any]:
        """The table as one JSON-ready object, with the number of questions, and the break-even probability and
        notes when there are any."""
        extra = {"breakeven": round(self.breakeven, 4)} if self.breakeven is not None else {}
        return {**self.table, "n_test": self.n_test, **extra, **({"notes": self.notes} if self.notes else {})}


def nearest(points: Sequence[Point], share: float) -> Point:
    """The point whose strong-call share is nearest ``share``."""
    return min(points, key=lambda point: abs(point.strong_share - share))


def compare(
    routers: dict[str, list[Point]],
    orchestrators: Sequence[OrchestratorRun],
    items: Sequence[RoutingItem],
    priced: Priced | None = None,
) -> Comparison:
    """The metrics of every router and orchestrator on ``items`` (the questions all of them were scored on); with
    ``priced`` (a price sheet's break-even probability), also its routers and calibrated orchestrators at the point
    the sheet picks on their curves, as ``NAME_priced``."""
    weak = sum(item.outcomes[WEAK].correct for item in items) / len(items)
    strong = sum(item.outcomes[STRONG].correct for item in items) / len(items)
    share = orchestrators[0].greedy().strong_share if orchestrators else 0.5
    rows = {name: (points, nearest(points, share)) for name, points in routers.items()}
    rows |= {run.name: (run.curve(), run.greedy()) for run in orchestrators}
    curves = {name: points for name, (points, _) in rows.items()}
    calls = {run.name: run.calls() for run in orchestrators}
    if priced is not None:
        rows |= {f"{name}_priced": (routers[name], point) for name, point in priced.routers.items()}
        for name, run in priced.orchestrators.items():
            point, calls[f"{name}_priced"] = run.above(priced.breakeven)
            rows[f"{name}_priced"] = curves[name], point
    breakeven = priced.breakeven if priced is not None else None
    comparison = Comparison(curves, {metric: {} for metric in METRICS}, len(items), breakeven=breakeven)
    gap = strong > weak
    if not gap:
        comparison.notes.append(
            f"APGR and CPT are undefined on these {len(items)} questions: the strong model's accuracy ({strong:.3f}) "
            f"is not above the weak model's ({weak:.3f}), so there is no gap to recover"
        )
    if priced is not None:
        comparison.notes.extend(
            f"{run.name} has no {run.name}_priced row: no validation run calibrates its escalation probability"
            for run in orchestrators
            if run.name not in priced.orchestrators
        )
    for name, (points, point) in rows.items():
        cascade = name.startswith("cascade")
        row = {
            "apgr": apgr(points, weak, strong) if gap else None,
            "accuracy": point.accuracy,
            "usd_per_question": point.usd_per_question,
            "cpt50": cpt(points, weak, strong, 0.5) if gap else None,
            "cpt80": cpt(points, weak, strong, 0.8) if gap else None,
            "strong_share": point.strong_share,
            "calls_per_question": calls.get(name, 1.0 + (point.strong_share if cascade else 0.0)),
        }
        for metric, value in row.items():
            comparison.table[metric][name] = (
                None if value is None else round(value, 6 if metric == "usd_per_question" else 4)
            )
    return comparison
