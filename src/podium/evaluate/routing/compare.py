"""Routers and evaluated orchestrators side by side on one split of a recording (``podium routing compare``): the
area and thresholds of each system's cost–quality curve, and accuracy, USD, calls and each worker's share at one
operating point (:mod:`podium.evaluate.routing.metrics` defines the metrics).

An orchestrator's curve is its thresholded escalation score and its operating point the one it reached when run
(:mod:`podium.evaluate.routing.orchestrators`), or, priced, the one a price sheet picks once its score is calibrated
(:mod:`podium.evaluate.routing.priced`). A router's operating point is the one of its curve nearest the first
orchestrator's (in strong-call share with two workers, in USD per task with more; without an orchestrator, the
middle of the range), so the columns compare systems at equal use of the workers.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from podium.evaluate.routing.metrics import Point, Reference, apgr, cost_apgr, cost_cpt, cpt
from podium.evaluate.routing.orchestrators import OrchestratorRun
from podium.routers.data import RoutingItem

METRICS = (
    "apgr", "cpt50", "cpt80", "cost_apgr", "cost_cpt50", "cost_cpt80",
    "accuracy", "usd_per_question", "calls_per_question", "strong_share",
)  # fmt: skip
"""The table's metrics, in the order printed."""


@dataclass
class Comparison:
    """Every system's curve and the table of metrics."""

    curves: dict[str, list[Point]]
    table: dict[str, dict[str, float | None]] = field(default_factory=dict)
    """Metric → system → value (None where it is undefined)."""
    shares: dict[str, dict[str, float]] = field(default_factory=dict)
    """System → worker → share of tasks that called it, at the system's operating point."""
    references: dict[str, str] = field(default_factory=dict)
    """The workers the metrics are relative to: ``weak`` and ``strong`` (two workers), ``cheapest`` and ``best``."""
    n_test: int = 0
    notes: list[str] = field(default_factory=list)
    """Why a metric is missing, when one is."""
    breakeven: float | dict[str, float] | None = None
    """The price sheet's break-even probability of escalating from the cheapest worker (per target worker with
    several), under the reward that placed the ``_priced`` rows (None: no such rows)."""

    def systems(self) -> list[str]:
        """Every row of the table: the curves' systems, then the ``_priced`` rows."""
        return list(self.table[METRICS[0]])

    def result(self) -> dict[str, Any]:
        """The table as one JSON-ready object: the metrics, each system's worker shares, the reference workers,
        the number of tasks, and the break-even probability and notes when there are any."""
        extra: dict[str, Any] = {}
        if isinstance(self.breakeven, float):
            extra["breakeven"] = round(self.breakeven, 4)
        elif self.breakeven is not None:
            extra["breakeven"] = {worker: round(edge, 4) for worker, edge in self.breakeven.items()}
        return {**self.table, "shares": self.shares, "references": self.references, "n_test": self.n_test,
                **extra, **({"notes": self.notes} if self.notes else {})}  # fmt: skip


def nearest(points: Sequence[Point], target: float, by: str | None) -> Point:
    """The point nearest ``target``: in the share of worker ``by``, or in USD per task where ``by`` is None."""
    return min(points, key=lambda p: abs((p.share(by) if by is not None else p.usd_per_question) - target))


def references(items: Sequence[RoutingItem], workers: Sequence[str]) -> dict[str, Reference]:
    """The reference workers on ``items``: the cheapest (lowest mean USD), the best (highest accuracy, the cheaper
    on a tie), and with two workers the weak (the cheaper) and strong (the dearer) ones, as RouteLLM pairs them."""
    count = len(items)
    alone = {name: Reference(name, sum(i.outcomes[name].correct for i in items) / count,
                             sum(i.outcomes[name].usd for i in items) / count) for name in workers}  # fmt: skip
    cheapest = min(alone.values(), key=lambda r: (r.usd_per_question, -r.accuracy))
    best = max(alone.values(), key=lambda r: (r.accuracy, -r.usd_per_question))
    chosen = {"cheapest": cheapest, "best": best}
    if len(workers) == 2:
        chosen |= {"weak": cheapest, "strong": next(r for name, r in alone.items() if name != cheapest.name)}
    return chosen


def compare(
    routers: Mapping[str, list[Point]],
    orchestrators: Sequence[OrchestratorRun],
    items: Sequence[RoutingItem],
    workers: Sequence[str],
    priced: Mapping[str, Point] | None = None,
    breakeven: float | dict[str, float] | None = None,
) -> Comparison:
    """The metrics of every router and orchestrator on ``items`` (the tasks all of them were scored on); with
    ``priced`` (system → its point under a reward and price sheet), those points too, as ``NAME_priced``."""
    reference = references(items, workers)
    two = "strong" in reference
    if two:
        by = reference["strong"].name
        target = orchestrators[0].greedy().share(by) if orchestrators else 0.5
    else:
        by = None
        span = (reference["cheapest"].usd_per_question, reference["best"].usd_per_question)
        target = orchestrators[0].greedy().usd_per_question if orchestrators else sum(span) / 2
    rows = {name: (points, nearest(points, target, by)) for name, points in routers.items()}
    comparison = Comparison({}, {metric: {} for metric in METRICS}, n_test=len(items), breakeven=breakeven)
    comparison.references = {role: ref.name for role, ref in reference.items()}
    for run in orchestrators:
        rows[run.name] = (run.curve(), run.greedy())
        if not run.traceable:
            comparison.notes.append(f"{run.name} asked a worker the recording does not hold: its greedy point only")
    curves = {name: points for name, (points, _) in rows.items()}
    for name, point in (priced or {}).items():
        rows[f"{name}_priced"] = (curves[name], point)
    comparison.curves = curves
    gap = reference["best"].accuracy > reference["cheapest"].accuracy
    spend = reference["best"].usd_per_question > reference["cheapest"].usd_per_question
    if not gap or not spend:
        comparison.notes.append(
            f"the curves' areas and thresholds are undefined on these {len(items)} tasks: the most accurate worker "
            f"{reference['best'].name} ({reference['best'].accuracy:.3f}, ${reference['best'].usd_per_question:.6f}) "
            f"is not both more accurate and dearer than the cheapest {reference['cheapest'].name} "
            f"({reference['cheapest'].accuracy:.3f}, ${reference['cheapest'].usd_per_question:.6f}), so there is no "
            "gap to recover"
        )
    elif not two:
        comparison.notes.append(
            f"apgr, cpt and strong_share are RouteLLM's two-worker metrics; with {len(workers)} workers see cost_apgr "
            "and cost_cpt (the cost curve from the cheapest worker to the best)"
        )
    for name, (points, point) in rows.items():
        row = metric_row(points, point, reference, gap and spend)
        for metric, value in row.items():
            comparison.table[metric][name] = (
                None if value is None else round(value, 6 if metric == "usd_per_question" else 4)
            )
        comparison.shares[name] = {worker: round(point.share(worker), 4) for worker in workers}
    return comparison


def metric_row(
    points: list[Point], point: Point, reference: Mapping[str, Reference], gap: bool
) -> dict[str, float | None]:
    """One system's metrics: its curve's (where the best worker is more accurate and dearer than the cheapest:
    ``gap``; RouteLLM's where two workers differ in accuracy) and its operating point's."""
    row: dict[str, float | None] = dict.fromkeys(METRICS)
    if gap:
        row |= {
            "cost_apgr": cost_apgr(points, reference["cheapest"], reference["best"]),
            "cost_cpt50": cost_cpt(points, reference["cheapest"], reference["best"], 0.5),
            "cost_cpt80": cost_cpt(points, reference["cheapest"], reference["best"], 0.8),
        }
    two = "strong" in reference
    if two and reference["strong"].accuracy > reference["weak"].accuracy:
        weak, strong = reference["weak"], reference["strong"]
        row |= {"apgr": apgr(points, weak, strong), "cpt50": cpt(points, weak, strong, 0.5),
                "cpt80": cpt(points, weak, strong, 0.8)}  # fmt: skip
    row |= {"accuracy": point.accuracy, "usd_per_question": point.usd_per_question,
            "calls_per_question": point.calls_per_question}  # fmt: skip
    if two:
        row["strong_share"] = point.share(reference["strong"].name)
    return row
