"""The operating point a price sheet picks on a router's or an orchestrator's curve: each choice where it is worth
the most under the success-gated cost penalty reward (``cost_penalty``: 1 − w · USD / s when correct, else 0), at the
sheet's prices.

**After a reply** (an orchestrator, a cascade): the escalation score p (1 − P(accept) at the first decision after the
first worker's reply, or a cascade's probability that the reply is wrong) is read as the probability that the first
reply is wrong: supervised on oracle labels (escalate exactly where the first worker failed), cross-entropy makes it
that. With c_f and c_t the first and a target worker's mean USD per task, and a_r and a_w the target's accuracy where
the first worker is right and where it is wrong, all from the train split's recorded outcomes priced by the sheet,
the expected rewards are

    accept:    (1 − p) · L,                     L = 1 − w · c_f / s
    escalate:  (a_r + p · (a_w − a_r)) · K,     K = 1 − w · (c_f + c_t) / s

so escalating pays where p exceeds the break-even probability p* = (L − a_r · K) / ((a_w − a_r) · K + L). A dearer
target lowers K and raises p*: fewer tasks pass it, whatever the orchestrator read in its prompt. Where the
target's cost alone outweighs a correct answer (K ≤ 0), p* is 1 and it is never called.

With several workers to escalate to (say GPT-4's replies sold under two names at two prices), each has its own line
from its own recorded outcomes and price, and the best choice at p is the highest line: p ∈ [0, 1) splits into
intervals, accept below the first edge, then each worker that is best somewhere from its edge on
(:func:`escalation_edges`; a worker that never pays more than the others has none). So an unseen worker is used
exactly where its price and its recorded accuracy make it pay.

**From the question** (a question router): the worker of the highest expected reward q_w · (1 − w · c_w / s), with
q_w its predicted accuracy (:func:`podium.routers.decide.choose_by_reward`).

The rule needs p to be that probability, not merely to rank tasks. A router's logistic regression is fitted to it;
an orchestrator's escalation probability, after reinforcement learning, need not be (the claim's GRPO adapter says
about 0.29 on test questions whose weak reply is wrong 16 % of the time), so it is calibrated first on a run over
the validation split (Platt scaling: a logistic regression of "the first reply was wrong" on the log-odds of its
score), which keeps its order, so its curve is unchanged.
"""

import dataclasses
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from podium.costs.prices import ModelPrice
from podium.evaluate.routing.metrics import Point
from podium.evaluate.routing.orchestrators import OrchestratorRun, Worker
from podium.evaluate.routing.routers import cascade_probabilities, operating_point
from podium.policies.escalate import ACCEPT
from podium.routers.data import RoutingItem
from podium.routers.decide import cascade_stop, choose_by_reward
from podium.routers.logistic import fit_logreg
from podium.routers.models import CascadeRouter, FittedRouter, QuestionRouter


@dataclass(frozen=True)
class CostPenalty:
    """The ``cost_penalty`` reward's parameters (a GRPO config's ``reward.cost_weight`` and ``cost_usd_scale``)."""

    weight: float
    usd_scale: float


Recorded = Sequence[tuple[bool, float]]
"""A worker's recorded outcomes on the train tasks, one (correct, USD at its price) per task."""


@dataclass(frozen=True)
class Line:
    """The expected reward of one choice after the first reply, as a line in p: ``intercept + slope · p``."""

    choice: str
    intercept: float
    slope: float

    def at(self, p: float) -> float:
        return self.intercept + self.slope * p


def recorded_outcomes(train: Sequence[RoutingItem], recorded: str, price: ModelPrice | None = None) -> Recorded:
    """The recorded worker's outcome on each train task, at ``price`` (default: as the recording is priced)."""
    if not train:
        raise ValueError("the break-even probability needs train tasks with recorded outcomes; there are none")
    return [(item.outcomes[recorded].correct,
             price.cost(*item.outcomes[recorded].tokens) if price is not None else item.outcomes[recorded].usd)
            for item in train]  # fmt: skip


def choice_lines(first: Recorded, targets: Mapping[str, Recorded], reward: CostPenalty) -> list[Line]:
    """The lines of accepting the first reply (first) and of escalating to each target (see the module notes):
    a target's accuracy where the first worker is right and where it is wrong, and its cost with the first's."""
    count = len(first)
    first_usd = sum(usd for _, usd in first) / count
    accept = 1.0 - reward.weight * first_usd / reward.usd_scale
    if accept <= 0.0:
        raise ValueError(
            f"the first worker's mean cost (${first_usd:.6f} per task) outweighs a correct answer under the reward "
            f"(weight {reward.weight}, usd_scale {reward.usd_scale}): no decision pays"
        )
    right = sum(correct for correct, _ in first)
    if not 0 < right < count:
        raise ValueError(
            f"the break-even probability needs train tasks the first worker got right and wrong; of {count}, "
            f"it got {right} right"
        )
    lines = [Line(ACCEPT, accept, -accept)]
    for name, outcomes in targets.items():
        escalate = 1.0 - reward.weight * (first_usd + sum(usd for _, usd in outcomes) / count) / reward.usd_scale
        pairs = list(zip(first, outcomes, strict=True))
        if_right = sum(target for (correct, _), (target, _) in pairs if correct) / right
        if_wrong = sum(target for (correct, _), (target, _) in pairs if not correct) / (count - right)
        lines.append(Line(name, if_right * escalate, (if_wrong - if_right) * escalate))
    return lines


def escalation_edges(lines: Sequence[Line]) -> dict[str, float]:
    """Each escalation target that is the best choice somewhere in p ∈ [0, 1) → the probability from which it is,
    in rising order; accepting (``lines[0]``) is best below the first (a tie keeps the earlier choice). A target
    missing from the result never pays more than the others."""
    current, start, edges = max(lines, key=lambda line: line.at(0.0)), 0.0, {}
    if current is not lines[0]:
        edges[current.choice] = 0.0
    while True:
        crossings = [((current.intercept - line.intercept) / (line.slope - current.slope), -line.slope, index)
                     for index, line in enumerate(lines) if line.slope > current.slope]  # fmt: skip
        ahead = [crossing for crossing in crossings if start <= crossing[0] < 1.0]
        if not ahead:
            return edges
        start, _, index = min(ahead)
        current = lines[index]
        edges[current.choice] = start


def worker_edges(
    train: Sequence[RoutingItem], first: Worker, targets: Sequence[Worker], reward: CostPenalty
) -> dict[str, float]:
    """:func:`escalation_edges` after ``first``'s reply, each worker priced at its own price."""
    recorded = {worker.name: recorded_outcomes(train, str(worker.recorded), worker.price) for worker in targets}
    return escalation_edges(choice_lines(recorded_outcomes(train, str(first.recorded), first.price), recorded, reward))


def pair_edge(train: Sequence[RoutingItem], first: str, target: str, reward: CostPenalty) -> float:
    """The break-even probability of escalating from the recorded worker ``first`` to ``target`` (1: never)."""
    lines = choice_lines(recorded_outcomes(train, first), {target: recorded_outcomes(train, target)}, reward)
    return escalation_edges(lines).get(target, 1.0)


def priced_choice(edges: Mapping[str, float], p: float) -> str | None:
    """The choice at probability ``p``: the target whose edge is the highest one ``p`` exceeds (None: accept)."""
    passed = [(edge, target) for target, edge in edges.items() if p > edge]
    return max(passed)[1] if passed else None


def router_points(
    test: Sequence[RoutingItem],
    train: Sequence[RoutingItem],
    fitted: Mapping[str, FittedRouter],
    vectors: np.ndarray | None,
    reward: CostPenalty,
) -> dict[str, Point]:
    """Each fitted router's operating point under the reward: a question router asks the worker of the highest
    expected reward; a cascade escalates from each worker where its probability of a wrong reply passes that
    level's break-even."""
    points = {}
    for name, router in fitted.items():
        if isinstance(router, QuestionRouter) and vectors is not None:
            chosen = choose_by_reward(router.quality(vectors), router.costs, reward.weight, reward.usd_scale)
            points[name] = operating_point(test, [(router.workers[i],) for i in chosen])
        elif isinstance(router, CascadeRouter):
            chain = router.workers
            edges = [pair_edge(train, first, target, reward) for first, target in itertools.pairwise(chain)]
            stops = [cascade_stop(row, edges) for row in cascade_probabilities(test, router)]
            points[name] = operating_point(test, [tuple(chain[: stop + 1]) for stop in stops])
    return points


def orchestrator_point(run: OrchestratorRun, train: Sequence[RoutingItem], workers: Sequence[Worker],
                       reward: CostPenalty) -> Point:  # fmt: skip
    """The calibrated ``run``'s operating point under the reward: after the first reply, the worker whose line is
    the highest at its probability (:func:`priced_choice`), each priced at its own price in the run."""
    recorded = [worker for worker in workers if worker.recorded is not None]
    edges: dict[str, dict[str, float]] = {}
    escalations: list[Worker | None] = []
    by_name = {worker.name: worker for worker in recorded}
    for episode, score in zip(run.episodes, run.scores(), strict=True):
        if score is None:
            escalations.append(None)
            continue
        first = episode.asked[0]
        if first.name not in edges:
            edges[first.name] = worker_edges(train, first, [w for w in recorded if w.name != first.name], reward)
        target = priced_choice(edges[first.name], score)
        escalations.append(None if target is None else by_name[target])
    return run.point(escalations)


@dataclass(frozen=True)
class Calibration:
    """Platt scaling: P(first reply wrong) = σ(slope · logit(score) + bias)."""

    slope: float
    bias: float

    def __call__(self, score: float) -> float:
        return 1.0 / (1.0 + math.exp(-(self.slope * log_odds(score) + self.bias)))


def log_odds(score: float) -> float:
    """logit(score), the score kept 1e-6 away from 0 and 1 (a decoded probability can round to either)."""
    clipped = min(max(score, 1e-6), 1.0 - 1e-6)
    return math.log(clipped / (1.0 - clipped))


def score_threshold(breakeven: float, calibration: Calibration | None = None) -> float:
    """The escalation score above which the calibrated probability exceeds ``breakeven`` (Platt scaling keeps the
    order, so one threshold on the model's own score is the same rule: a run's ``escalate_above``). Without a
    calibration the score is taken as the probability itself."""
    if breakeven >= 1.0 or breakeven <= 0.0:
        return min(max(breakeven, 0.0), 1.0)  # never, or wherever the score is above 0
    if calibration is None:
        return breakeven
    return 1.0 / (1.0 + math.exp(-(log_odds(breakeven) - calibration.bias) / calibration.slope))


def fit_calibration(run: OrchestratorRun) -> Calibration:
    """The calibration of ``run``'s escalation scores (a run over the validation split) against whether the first
    reply it read was wrong."""
    pairs = [(score, not episode.item.outcomes[str(episode.asked[0].recorded)].correct)
             for episode, score in zip(run.episodes, run.scores(), strict=True) if score is not None]  # fmt: skip
    wrong = sum(label for _, label in pairs)
    if not 0 < wrong < len(pairs):
        raise ValueError(
            f"{run.name}: calibrating its escalation probability needs decisions after right and wrong first "
            f"replies; of its {len(pairs)} decisions, {wrong} followed a wrong one"
        )
    features = np.array([[log_odds(score)] for score, _ in pairs])
    slope, bias = fit_logreg(features, np.array([label for _, label in pairs], dtype=float))
    if slope <= 0.0:
        raise ValueError(
            f"{run.name}: its escalation probability does not rise with the first reply's errors on the "
            f"{len(pairs)} calibration tasks (Platt slope {slope:.3f}): it cannot be read as a probability"
        )
    return Calibration(float(slope), float(bias))


def calibrated(run: OrchestratorRun, calibration: Calibration) -> OrchestratorRun:
    """``run`` with every escalation score mapped through ``calibration`` (the order, and so the curve, kept)."""
    episodes = [
        dataclasses.replace(episode, escalation=calibration(episode.escalation))
        if episode.escalation is not None
        else episode
        for episode in run.episodes
    ]
    return dataclasses.replace(run, episodes=episodes)
