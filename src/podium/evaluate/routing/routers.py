"""The routers' cost–quality curves on a recording's test tasks: each router, fitted on the train tasks, traced over
every setting of its knob (every operating point it can reach), and the single points of the baselines.

- each worker alone (``always_NAME``), and the ``oracle``: per task the cheapest worker that is right (the cheapest
  worker where none is);
- ``random``: a seeded uniform score per task; the top-scored tasks go to the best worker on the train tasks, the
  rest to the cheapest (the diagonal between them: APGR ≈ 0.5);
- question routers (``knn``, ``logreg``, ``mf``): the worker of the highest predicted accuracy less
  ``cost_weight`` times its mean train cost, over every ``cost_weight`` (:mod:`podium.routers.decide`); with two
  workers this is a threshold on the difference of their predicted accuracies;
- cascades (``cascade``, ``cascade_checks``): from the cheapest worker up, escalate while the reply's probability of
  being wrong is above a threshold, over every threshold; a cascade pays for every worker it asked.

Priced points place the routers whose scores are probabilities where a reward and a price sheet put them
(:mod:`podium.evaluate.routing.priced`).
"""

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from podium.evaluate.routing.metrics import Point, tally
from podium.routers.checks import verify_checks
from podium.routers.data import RoutingItem, RoutingSet, mean_costs
from podium.routers.decide import cascade_stop, cheapest_first, choose
from podium.routers.fit import fit_router
from podium.routers.models import CASCADES, QUESTION_ROUTERS, CascadeRouter, FittedRouter, QuestionRouter, RouterKind

Route = Sequence[str]
"""The workers asked on one task, in order; the last one answers."""


def operating_point(items: Sequence[RoutingItem], routes: Sequence[Route]) -> Point:
    """The point reached by asking each task's ``route`` (every worker of it paid, the last one answering)."""
    pairs = list(zip(items, routes, strict=True))
    return tally(
        [item.outcomes[route[-1]].correct for item, route in pairs],
        [sum(item.outcomes[name].usd for name in route) for item, route in pairs],
        routes,
        sum(len(route) for route in routes),
    )


def distinct_points(items: Sequence[RoutingItem], assignments: Sequence[Sequence[Route]]) -> list[Point]:
    """The operating points of ``assignments`` (one route per task each), each distinct assignment once."""
    seen: set[tuple[tuple[str, ...], ...]] = set()
    points = []
    for routes in assignments:
        key = tuple(tuple(route) for route in routes)
        if key not in seen:
            seen.add(key)
            points.append(operating_point(items, routes))
    return points


def knob_values(breakpoints: np.ndarray) -> list[float]:
    """One value of a knob inside every interval its ``breakpoints`` make, and one beyond each end; breakpoints
    within 1e-9 of each other (the same in exact arithmetic, apart in floating point) count as one."""
    values = np.sort(breakpoints[np.isfinite(breakpoints)])
    merged: list[float] = []
    for value in values:
        if not merged or value - merged[-1] > 1e-9 * max(1.0, abs(value)):
            merged.append(float(value))
    if not merged:
        return [0.0]
    inner = [(low + high) / 2 for low, high in itertools.pairwise(merged)]
    return [merged[0] - 1.0, *inner, merged[-1] + 1.0]


def weight_sweep(items: Sequence[RoutingItem], workers: Sequence[str], quality: np.ndarray,
                 costs: Sequence[float]) -> list[Point]:  # fmt: skip
    """Every operating point of a question router: ``choose`` at each cost weight between its breakpoints."""
    cost = np.asarray(costs, dtype=float)
    apart = cost[:, None] - cost[None, :] > 0
    crossings = (quality[:, :, None] - quality[:, None, :])[:, apart] / (cost[:, None] - cost[None, :])[apart]
    assignments = [[(workers[i],) for i in choose(quality, cost, weight)] for weight in knob_values(crossings.ravel())]
    return distinct_points(items, assignments)


def cascade_sweep(items: Sequence[RoutingItem], router: CascadeRouter) -> list[Point]:
    """Every operating point of a cascade: its stop at each threshold between the replies' probabilities."""
    wrong = cascade_probabilities(items, router)
    assignments = []
    for threshold in knob_values(wrong.ravel()):
        stops = [cascade_stop(row, threshold) for row in wrong]
        assignments.append([tuple(router.workers[: stop + 1]) for stop in stops])
    return distinct_points(items, assignments)


def cascade_probabilities(items: Sequence[RoutingItem], router: CascadeRouter) -> np.ndarray:
    """P(reply wrong) of each level but the last (columns) on each task (rows)."""
    columns = [router.wrong(level, [item.outcomes[name].response or "" for item in items])
               for level, name in enumerate(router.workers[:-1])]  # fmt: skip
    return np.stack(columns, axis=1)


def oracle_routes(items: Sequence[RoutingItem], workers: Sequence[str]) -> list[Route]:
    """Per task, the cheapest worker that is right (the cheapest worker where none is)."""
    routes = []
    for item in items:
        by_cost = sorted(workers, key=lambda name: item.outcomes[name].usd)
        routes.append((next((name for name in by_cost if item.outcomes[name].correct), by_cost[0]),))
    return routes


def random_sweep(items: Sequence[RoutingItem], cheapest: str, best: str, seed: int = 0) -> list[Point]:
    """The random router's points: the top-k of seeded uniform scores to ``best``, the rest to ``cheapest``."""
    scores = np.random.default_rng(seed).random(len(items))
    order = np.argsort(-scores, kind="stable")
    chosen = [cheapest] * len(items)
    assignments = [[(name,) for name in chosen]]
    for index in order:
        chosen[int(index)] = best
        assignments.append([(name,) for name in chosen])
    return distinct_points(items, assignments)


@dataclass
class RouterCurves:
    """Every router's curve on the test tasks, and the fitted routers (for their priced points)."""

    curves: dict[str, list[Point]]
    fitted: dict[str, FittedRouter] = field(default_factory=dict)
    vectors: np.ndarray | None = None
    """The test questions' embeddings (question routers' input)."""


def router_curves(
    data: RoutingSet,
    train: Sequence[RoutingItem],
    test: Sequence[RoutingItem],
    *,
    embed: Callable[[Sequence[str]], np.ndarray],
    kinds: Sequence[RouterKind] | None = None,
    seed: int = 0,
) -> RouterCurves:
    """The single workers, the oracle, random and every router of ``kinds`` (default: every one the recording
    allows: cascades need recorded replies, ``cascade_checks`` a verify tool for the tasks' kind), fitted on
    ``train`` and traced on ``test``."""
    workers = list(data.workers)
    train_costs = mean_costs(train, workers)
    cheapest = workers[int(cheapest_first(train_costs)[0])]
    best = max(
        workers, key=lambda name: (sum(i.outcomes[name].correct for i in train), -train_costs[workers.index(name)])
    )
    curves = {f"always_{name}": [operating_point(test, [(name,)] * len(test))] for name in workers}
    curves["oracle"] = [operating_point(test, oracle_routes(test, workers))]
    curves["random"] = random_sweep(test, cheapest, best, seed)
    result = RouterCurves(curves)
    for kind in kinds if kinds is not None else available_routers(data):
        if kind in QUESTION_ROUTERS:
            if result.vectors is None:
                train_vectors, result.vectors = embed([i.question for i in train]), embed([i.question for i in test])
            router = fit_router(kind, train, workers, data.answer_kind, vectors=train_vectors)
            assert isinstance(router, QuestionRouter)
            curves[kind] = weight_sweep(test, workers, router.quality(result.vectors), router.costs)
        else:
            router = fit_router(kind, train, workers, data.answer_kind)
            assert isinstance(router, CascadeRouter)
            curves[kind] = cascade_sweep(test, router)
        result.fitted[kind] = router
    return result


def available_routers(data: RoutingSet) -> list[RouterKind]:
    """The routers a recording supports: every question router; the cascade where replies are recorded; the
    checked cascade where the tasks' kind also has a verify tool."""
    kinds: list[RouterKind] = list(QUESTION_ROUTERS)
    replies = all(outcome.response is not None for item in data.items for outcome in item.outcomes.values())
    if replies:
        kinds.append("cascade")
        if verify_checks("", data.answer_kind) is not None:
            kinds.append("cascade_checks")
    return [kind for kind in kinds if kind in QUESTION_ROUTERS or kind in CASCADES]
