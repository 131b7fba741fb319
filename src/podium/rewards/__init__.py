"""Rewards of the three designs as pure functions of trajectories and batches (SPEC §5), found by name in one
registry (:func:`build_reward`); GRPO advantages, trajectory- and turn-level."""

from podium.rewards.grpo import GroupAdvantages, Rollout, filtered_group_advantages, group_advantages
from podium.rewards.paramanager import ParaManagerReward, ParaManagerWeights, paramanager_reward
from podium.rewards.registry import REWARDS, RewardFunction, build_reward
from podium.rewards.toolorchestra import batch_rewards, evaluation_reward, metric_vector
from podium.rewards.uno import CostBracket, TurnRollout, agentic_grpo_advantages, mt_grpo_advantages, uno_reward

__all__ = [
    "REWARDS",
    "CostBracket",
    "GroupAdvantages",
    "ParaManagerReward",
    "ParaManagerWeights",
    "RewardFunction",
    "Rollout",
    "TurnRollout",
    "agentic_grpo_advantages",
    "batch_rewards",
    "build_reward",
    "evaluation_reward",
    "filtered_group_advantages",
    "group_advantages",
    "metric_vector",
    "mt_grpo_advantages",
    "paramanager_reward",
    "uno_reward",
]
