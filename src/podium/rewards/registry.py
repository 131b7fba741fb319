"""One reward interface: a reward function maps a batch of trajectories and their verifier outcomes to one
scalar each (the shape of TRL's reward functions, with trajectories in place of completions). Designs are
found by name; training and evaluation build them here.

    reward = build_reward("uno", alpha=0.1)
    rewards = reward(trajectories, correct)
"""

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from podium.core.preference import Preference
from podium.core.trajectory import Trajectory
from podium.rewards.paramanager import ParaManagerWeights, paramanager_reward
from podium.rewards.shaping import format_shaping
from podium.rewards.toolorchestra import batch_rewards
from podium.rewards.uno import ALPHA, WINDOW, CostBracket, uno_reward


class RewardFunction(Protocol):
    """R(τ) for each rollout of a batch (some designs normalise over the batch, so they see it whole)."""

    def __call__(self, trajectories: Sequence[Trajectory], correct: Sequence[bool]) -> list[float]: ...


def toolorchestra(tools: Sequence[str], preference: Preference | None = None) -> RewardFunction:
    """ToolOrchestra (SPEC §5.1): M_norm · P when solved, normalised over the batch; ``tools`` orders the
    per-tool counts, ``preference`` applies to trajectories that carry none."""

    def reward(trajectories: Sequence[Trajectory], correct: Sequence[bool]) -> list[float]:
        with_preference = [
            t if t.preference is not None or preference is None else t.model_copy(update={"preference": preference})
            for t in trajectories
        ]
        return batch_rewards(with_preference, correct, list(tools))

    return reward


def paramanager(target_tokens: int = 12_288, target_cost_units: float = 8.0, diversity: bool = True) -> RewardFunction:
    """ParaManager (SPEC §5.2): R_task + R_fmt + R_div + R_eff with the length and cost targets; ``diversity=False``
    drops R_div (the ablation)."""
    weights = ParaManagerWeights(target_tokens=target_tokens, target_cost_units=target_cost_units, diversity=diversity)

    def reward(trajectories: Sequence[Trajectory], correct: Sequence[bool]) -> list[float]:
        return [paramanager_reward(t, ok, weights).total for t, ok in zip(trajectories, correct, strict=True)]

    return reward


def uno(alpha: float = ALPHA, window: int = WINDOW) -> RewardFunction:
    """Uno-Orchestra (SPEC §5.3): b·[(1−α) + α(1 − ĉ)] + (1−b)·S, with ĉ from a rolling bracket of the last
    ``window`` episodes' √USD (the function keeps that window between batches)."""
    bracket = CostBracket(window=window)

    def reward(trajectories: Sequence[Trajectory], correct: Sequence[bool]) -> list[float]:
        costs = bracket.normalise_batch([trajectory.usage.usd for trajectory in trajectories])
        return [
            uno_reward(ok, cost, format_shaping(trajectory), alpha=alpha)
            for trajectory, ok, cost in zip(trajectories, correct, costs, strict=True)
        ]

    return reward


def cost_penalty(weight: float = 1.0, usd_scale: float = 0.01) -> RewardFunction:
    """Success-gated cost penalty: 1 − weight · USD / ``usd_scale`` when correct, else 0, so a correct answer is
    always worth more than a wrong one and, among correct ones, the cheaper is better. A trajectory whose
    preference sets a ``compute`` weight uses that weight instead of ``weight``."""

    def reward(trajectories: Sequence[Trajectory], correct: Sequence[bool]) -> list[float]:
        rewards = []
        for trajectory, ok in zip(trajectories, correct, strict=True):
            own = trajectory.preference.weights.get("compute") if trajectory.preference is not None else None
            penalty = (weight if own is None else own) * trajectory.usage.usd / usd_scale
            rewards.append(1.0 - penalty if ok else 0.0)
        return rewards

    return reward


REWARDS: dict[str, Callable[..., RewardFunction]] = {
    "cost_penalty": cost_penalty,
    "toolorchestra": toolorchestra,
    "paramanager": paramanager,
    "uno": uno,
}
"""Reward design name → a factory taking the design's options."""


def build_reward(name: str, **options: Any) -> RewardFunction:
    """The reward function of design ``name`` with ``options``."""
    if name not in REWARDS:
        raise ValueError(f"unknown reward design '{name}'; choose from {sorted(REWARDS)}")
    return REWARDS[name](**options)
