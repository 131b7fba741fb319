"""The operating point a price sheet picks on an orchestrator's curve: escalate exactly where escalating is worth
more than accepting under the success-gated cost penalty reward (``cost_penalty``: 1 − w · USD / s when correct,
else 0), at the sheet's prices.

The escalation score p (1 − P(accept) at the first decision after the weak reply) is read as the probability that
the weak reply is wrong: supervised on oracle labels (escalate exactly where the weak model failed), cross-entropy
makes it that. With c_w and c_s the weak and strong models' mean USD per question, and a_r and a_w the strong
model's accuracy where the weak one is right and where it is wrong, all from the train split's recorded outcomes
priced by the sheet, the expected rewards are

    accept:    (1 − p) · L,                     L = 1 − w · c_w / s
    escalate:  (a_r + p · (a_w − a_r)) · K,     K = 1 − w · (c_w + c_s) / s

so escalating pays where p exceeds the break-even probability p* = (L − a_r · K) / ((a_w − a_r) · K + L). A dearer
strong model lowers K and raises p*: fewer questions pass it, whatever the orchestrator read in its prompt. Where
the strong model's cost alone outweighs a correct answer (K ≤ 0), p* is 1 and it is never called.

With several workers to escalate to (say GPT-4's replies sold under two names at two prices), each has its own line
from its own recorded outcomes and price, and the best choice at p is the highest line: p ∈ [0, 1) splits into
intervals, accept below the first edge, then each worker that is best somewhere from its edge on
(:func:`escalation_edges`; a worker that never pays more than the others has none). So an unseen worker is used
exactly where its price and its recorded accuracy make it pay.

The rule needs p to be that probability, not merely to rank questions. A router's logistic regression is fitted to
it; an orchestrator's escalation probability, after reinforcement learning, need not be (the claim's GRPO adapter
says about 0.29 on test questions whose weak reply is wrong 16 % of the time), so it is calibrated first on a run
over the validation split (Platt scaling: a logistic regression of "the weak reply was wrong" on the log-odds of its
score), which keeps its order, so its curve is unchanged.
"""

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from podium.evaluate.routing.data import STRONG, WEAK, RoutingItem
from podium.evaluate.routing.metrics import Point
from podium.evaluate.routing.orchestrators import OrchestratorRun, Worker
from podium.evaluate.routing.routers import fit_logreg
from podium.policies.escalate import ACCEPT


@dataclass(frozen=True)
class CostPenalty:
    """The ``cost_penalty`` reward's parameters (a GRPO config's ``reward.cost_weight`` and ``cost_usd_scale``)."""

    weight: float
    usd_scale: float


@dataclass(frozen=True)
class Priced:
    """A price sheet's break-even probability and what it places: the routers whose score is a probability, and
    the calibrated orchestrators."""

    breakeven: float
    routers: dict[str, Point] = field(default_factory=dict)
    """Router → its operating point where it calls the strong model above ``breakeven``."""
    orchestrators: dict[str, OrchestratorRun] = field(default_factory=dict)
    """Orchestrator → its run with calibrated escalation probabilities (:func:`calibrated`)."""


Recorded = Sequence[tuple[bool, float]]
"""A worker's recorded outcomes on the train questions, one (correct, USD at its price) per question."""


@dataclass(frozen=True)
class Line:
    """The expected reward of one choice after the weak reply, as a line in p: ``intercept + slope · p``."""

    choice: str
    intercept: float
    slope: float

    def at(self, p: float) -> float:
        return self.intercept + self.slope * p


def breakeven(train: Sequence[RoutingItem], reward: CostPenalty) -> float:
    """p*: the least probability that the weak reply is wrong at which escalating to the strong model pays."""
    if not train:
        raise ValueError("the break-even probability needs train questions with recorded outcomes; there are none")
    recorded = {model: [(item.outcomes[model].correct, item.outcomes[model].usd) for item in train]
                for model in (WEAK, STRONG)}  # fmt: skip
    return escalation_edges(choice_lines(recorded[WEAK], {STRONG: recorded[STRONG]}, reward)).get(STRONG, 1.0)


def worker_edges(train: Sequence[RoutingItem], workers: Mapping[str, Worker], reward: CostPenalty) -> dict[str, float]:
    """:func:`escalation_edges` of a pool's replay workers, each priced at its own price: the weak model's worker
    answers first, every other one is a worker to escalate to."""
    first = [worker for worker in workers.values() if worker.model == WEAK]
    if len(first) != 1 or len(workers) < 2:
        raise ValueError(
            f"pricing escalations per worker needs one replay worker of the weak model {WEAK} and others to escalate "
            f"to; the pool's replay workers are {sorted(workers)}"
        )
    if not train:
        raise ValueError("the break-even probability needs train questions with recorded outcomes; there are none")
    recorded = {name: recorded_outcomes(train, worker) for name, worker in workers.items()}
    targets = {name: outcomes for name, outcomes in recorded.items() if name != first[0].name}
    return escalation_edges(choice_lines(recorded[first[0].name], targets, reward))


def recorded_outcomes(train: Sequence[RoutingItem], worker: Worker) -> Recorded:
    """``worker``'s outcome on each train question, at its price; an error where its model's is not recorded."""
    missing = [item.item.id for item in train if worker.model not in item.outcomes]
    if missing:
        raise ValueError(
            f"worker {worker.name} replays {worker.model}, whose outcome is not recorded on {len(missing)} of the "
            f"{len(train)} train questions (first: {missing[0]}); record them with `podium routing record --split "
            "train`"
        )
    return [(item.outcomes[worker.model].correct, worker.usd(item.outcomes[worker.model])) for item in train]


def choice_lines(weak: Recorded, targets: Mapping[str, Recorded], reward: CostPenalty) -> list[Line]:
    """The lines of accepting the weak reply (first) and of escalating to each target (see the module notes):
    a target's accuracy where the weak model is right and where it is wrong, and its cost with the weak one's."""
    count = len(weak)
    weak_usd = sum(usd for _, usd in weak) / count
    accept = 1.0 - reward.weight * weak_usd / reward.usd_scale
    if accept <= 0.0:
        raise ValueError(
            f"the weak model's mean cost (${weak_usd:.6f} per question) outweighs a correct answer under the reward "
            f"(weight {reward.weight}, usd_scale {reward.usd_scale}): no decision pays"
        )
    right = sum(correct for correct, _ in weak)
    if not 0 < right < count:
        raise ValueError(
            f"the break-even probability needs train questions the weak model got right and wrong; of {count}, "
            f"it got {right} right"
        )
    lines = [Line(ACCEPT, accept, -accept)]
    for name, outcomes in targets.items():
        escalate = 1.0 - reward.weight * (weak_usd + sum(usd for _, usd in outcomes) / count) / reward.usd_scale
        pairs = list(zip(weak, outcomes, strict=True))
        if_right = sum(target for (first, _), (target, _) in pairs if first) / right
        if_wrong = sum(target for (first, _), (target, _) in pairs if not first) / (count - right)
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


@dataclass(frozen=True)
class Calibration:
    """Platt scaling: P(weak reply wrong) = σ(slope · logit(score) + bias)."""

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
    """The calibration of ``run``'s escalation scores (a run over the validation split) against whether the weak
    reply it read was wrong."""
    pairs = [(score, not episode.item.outcomes[WEAK].correct)
             for episode, score in zip(run.episodes, run.scores(), strict=True) if score is not None]  # fmt: skip
    wrong = sum(label for _, label in pairs)
    if not 0 < wrong < len(pairs):
        raise ValueError(
            f"{run.name}: calibrating its escalation probability needs decisions after right and wrong weak replies; "
            f"of its {len(pairs)} decisions, {wrong} followed a wrong one"
        )
    features = np.array([[log_odds(score)] for score, _ in pairs])
    slope, bias = fit_logreg(features, np.array([label for _, label in pairs], dtype=float))
    if slope <= 0.0:
        raise ValueError(
            f"{run.name}: its escalation probability does not rise with the weak reply's errors on the "
            f"{len(pairs)} calibration questions (Platt slope {slope:.3f}): it cannot be read as a probability"
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
    return OrchestratorRun(run.name, episodes)
