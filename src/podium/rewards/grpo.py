"""GRPO group advantages and ToolOrchestra's rollout filters (SPEC §7).

A = (R − mean_G) / (std_G + δ) over the G rollouts of one question. Before that, rollouts whose output broke
the tool-call format or gave no valid answer are dropped, and a group whose remaining rewards barely differ
(std < 0.1) is dropped whole: it carries no learning signal, only noise.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass

EPSILON = 1e-6
"""δ: keeps the division finite when every reward is equal."""
MIN_GROUP_STD = 0.1
"""Homogeneity filter threshold (ToolOrchestra)."""


def mean_and_std(values: Sequence[float]) -> tuple[float, float]:
    """Mean and population standard deviation (a one-element list has std 0)."""
    if not values:
        raise ValueError("mean and std of an empty list")
    mean = sum(values) / len(values)
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))


def group_advantages(rewards: Sequence[float], *, delta: float = EPSILON) -> list[float]:
    """(R − mean) / (std + δ) within one group; all-equal rewards (or a single rollout) give zeros."""
    if not rewards:
        return []
    mean, std = mean_and_std(rewards)
    return [(reward - mean) / (std + delta) for reward in rewards]


@dataclass(frozen=True)
class Rollout:
    """What the filters need to know about one rollout."""

    reward: float
    """Its scalar reward."""
    well_formed: bool = True
    """Every turn followed the tool-call format."""
    answered: bool = True
    """It ended with a valid answer."""


@dataclass(frozen=True)
class GroupAdvantages:
    """The outcome for one group: which rollouts train, with what advantage, or why none do."""

    kept: list[int]
    """Indices (into the group) of the rollouts that train."""
    advantages: list[float]
    """Advantage of each kept rollout, aligned with ``kept``."""
    dropped: str | None = None
    """Why the whole group was dropped, if it was."""


def filtered_group_advantages(
    group: Sequence[Rollout], *, min_std: float = MIN_GROUP_STD, delta: float = EPSILON
) -> GroupAdvantages:
    """Drop malformed and unanswered rollouts, then the group if its rewards are homogeneous, then normalise."""
    kept = [i for i, rollout in enumerate(group) if rollout.well_formed and rollout.answered]
    if not kept:
        return GroupAdvantages([], [], dropped="no well-formed, answered rollout")
    rewards = [group[i].reward for i in kept]
    _, std = mean_and_std(rewards)
    if std < min_std:
        return GroupAdvantages([], [], dropped=f"homogeneous rewards (std {std:.3g} < {min_std:g})")
    return GroupAdvantages(kept, group_advantages(rewards, delta=delta))
