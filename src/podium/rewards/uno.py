"""Uno-Orchestra's cost-blended reward and turn-level credit (SPEC §5.3; seed 003 §4.1–4.2 and appendix B).

Terminal reward: R(τ) = b·[(1−α) + α(1 − ĉ(τ))] + (1−b)·S(τ) with S ∈ [0, 0.10] and ĉ the trajectory's √cost
placed in a rolling percentile bracket of recent episodes (:class:`CostBracket`, the one stateful piece).
Turn level (Agentic-GRPO): R̃_{i,t} = γ^{T_i−t} R(τ_i) + Σ_{s≥t} γ^{s−t} r_{i,s}, standardised over comparable
turns (same query group, same turn index, same action type) and added to the trajectory-level GRPO advantage.
"""

import math
from collections import defaultdict, deque
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass

from podium.rewards.grpo import EPSILON, group_advantages, mean_and_std

ALPHA = 0.1
"""Weight of the cost term inside a verified-correct reward."""
MAX_SHAPING = 0.10
"""Cap of S(τ), the consolation for a schema-valid plan when the verifier says wrong."""
WINDOW = 1_000
"""Episodes in the rolling cost bracket."""


def uno_reward(correct: bool, normalised_cost: float, shaping: float = 0.0, *, alpha: float = ALPHA) -> float:
    """R(τ): verifier-gated cost reward when correct, bounded shaping (clipped to [0, 0.10]) when wrong."""
    if not 0.0 <= normalised_cost <= 1.0:
        raise ValueError(f"the normalised cost ĉ must lie in [0, 1], got {normalised_cost}")
    if correct:
        return (1 - alpha) + alpha * (1 - normalised_cost)
    return min(max(shaping, 0.0), MAX_SHAPING)


def _percentile(ordered: Sequence[float], q: float) -> float:
    """Linear-interpolation percentile (q in [0, 100]) of already sorted values."""
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


class CostBracket:
    """ĉ = √c clipped to a [p_low, p_high] percentile bracket of the last ``window`` episodes' √c, scaled to [0, 1].

    The 5th/95th percentiles (the defaults) keep one outlier episode from flattening everyone else's ĉ. A batch
    joins the window before it is normalised, so the very first batch is placed against itself rather than
    against nothing. When the bracket is degenerate (all recent costs equal), ĉ is 0 at or below it and 1 above.
    """

    def __init__(self, window: int = WINDOW, low_percentile: float = 5.0, high_percentile: float = 95.0) -> None:
        if window < 1:
            raise ValueError("the window must hold at least one episode")
        if not 0.0 <= low_percentile < high_percentile <= 100.0:
            raise ValueError("percentiles must satisfy 0 <= low < high <= 100")
        self.low_percentile = low_percentile
        self.high_percentile = high_percentile
        self._roots: deque[float] = deque(maxlen=window)

    def __len__(self) -> int:
        return len(self._roots)

    def observe(self, costs: Iterable[float]) -> None:
        """Add episodes' costs (USD or any non-negative unit, used consistently) to the window."""
        for cost in costs:
            if cost < 0:
                raise ValueError(f"a trajectory cost cannot be negative, got {cost}")
            self._roots.append(math.sqrt(cost))

    def bracket(self) -> tuple[float, float]:
        """The current (low, high) bracket of √cost."""
        if not self._roots:
            raise ValueError("no episode observed yet")
        ordered = sorted(self._roots)
        return _percentile(ordered, self.low_percentile), _percentile(ordered, self.high_percentile)

    def normalise(self, cost: float) -> float:
        """ĉ of one cost against the current window."""
        if cost < 0:
            raise ValueError(f"a trajectory cost cannot be negative, got {cost}")
        low, high = self.bracket()
        root = math.sqrt(cost)
        if high <= low:
            return 0.0 if root <= high else 1.0
        return min(1.0, max(0.0, (root - low) / (high - low)))

    def normalise_batch(self, costs: Sequence[float]) -> list[float]:
        """Add a batch to the window, then return each cost's ĉ."""
        self.observe(costs)
        return [self.normalise(cost) for cost in costs]


@dataclass(frozen=True)
class TurnRollout:
    """One rollout of a query's group, as the turn-level credit needs it."""

    reward: float
    """Terminal reward R(τ_i) (:func:`uno_reward`)."""
    shaping: Sequence[float]
    """r_{i,t} per turn (schema validity, repair indicator…); clipped to [−η, η]."""
    action_types: Sequence[Hashable]
    """Action type per turn (e.g. ``lazy``, ``plan``, ``repair``, ``answer``); same length as ``shaping``."""

    def __post_init__(self) -> None:
        if len(self.shaping) != len(self.action_types):
            raise ValueError("one shaping reward and one action type per turn are required")


def turn_returns(rollout: TurnRollout, *, gamma: float = 1.0, eta: float = 0.05) -> list[float]:
    """R̃_t = γ^{T−t} R + Σ_{s≥t} γ^{s−t} r_s for each turn t (turns counted from 1 to T as in eq. 6)."""
    if eta < 0:
        raise ValueError("η must be non-negative")
    horizon = len(rollout.shaping)
    shaped = [min(max(r, -eta), eta) for r in rollout.shaping]
    returns = [0.0] * horizon
    tail = 0.0
    for t in reversed(range(horizon)):
        tail = shaped[t] + gamma * tail
        returns[t] = gamma ** (horizon - 1 - t) * rollout.reward + tail
    return returns


def agentic_grpo_advantages(
    group: Sequence[TurnRollout],
    *,
    gamma: float = 1.0,
    eta: float = 0.05,
    epsilon: float = EPSILON,
    trajectory_weight: float = 1.0,
) -> list[list[float]]:
    """Per-turn advantages of a query's rollout group: A_i + (R̃_{i,t} − μ_{t,type}) / (σ_{t,type} + ε).

    μ and σ run over comparable turns (same turn index and action type) of the group. The trajectory-level
    GRPO advantage A_i is added (scaled by ``trajectory_weight``) because per-turn-index normalisation alone is
    biased when the policy decides when to stop: a lone late turn would get no signal at all.
    """
    returns = [turn_returns(rollout, gamma=gamma, eta=eta) for rollout in group]
    cohorts: dict[tuple[int, Hashable], list[float]] = defaultdict(list)
    for rollout, values in zip(group, returns, strict=True):
        for t, value in enumerate(values):
            cohorts[(t, rollout.action_types[t])].append(value)
    statistics = {key: mean_and_std(values) for key, values in cohorts.items()}
    baseline = group_advantages([rollout.reward for rollout in group], delta=epsilon)
    advantages = []
    for rollout, values, trajectory_advantage in zip(group, returns, baseline, strict=True):
        per_turn = []
        for t, value in enumerate(values):
            mean, std = statistics[(t, rollout.action_types[t])]
            per_turn.append(trajectory_weight * trajectory_advantage + (value - mean) / (std + epsilon))
        advantages.append(per_turn)
    return advantages


def mt_grpo_advantages(
    rewards: Sequence[float],
    turn_scores: Sequence[Sequence[float]],
    *,
    rho: float = 0.5,
    epsilon: float = EPSILON,
) -> list[list[float]]:
    """MT-GRPO (appendix B): Â_t = A_g + ρ·B_t, with B_t the turn score U_t standardised over the group's turns
    at the same index and A_g the trajectory-level group advantage."""
    if len(rewards) != len(turn_scores):
        raise ValueError("one list of turn scores per rollout is required")
    by_index: dict[int, list[float]] = defaultdict(list)
    for scores in turn_scores:
        for t, score in enumerate(scores):
            by_index[t].append(score)
    statistics = {t: mean_and_std(values) for t, values in by_index.items()}
    trajectory = group_advantages(rewards, delta=epsilon)
    return [
        [a_g + rho * (score - statistics[t][0]) / (statistics[t][1] + epsilon) for t, score in enumerate(scores)]
        for a_g, scores in zip(trajectory, turn_scores, strict=True)
    ]
