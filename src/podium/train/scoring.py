"""Scoring a generation batch of rollouts for GRPO: verdicts, the chosen reward design, the ToolOrchestra filters
and the advantages. The rewards and advantages themselves are the pure functions of ``podium.rewards``; this module
only gathers their inputs from trajectories."""

from collections.abc import Sequence
from dataclasses import dataclass

from podium.core.preference import Preference
from podium.core.trajectory import Trajectory
from podium.datasets.items import BenchmarkItem
from podium.graders.grader import Grader
from podium.rewards.expected import Step, expected_advantages
from podium.rewards.grpo import Rollout, filtered_group_advantages, mean_and_std
from podium.rewards.shaping import turn_shaping, well_formed
from podium.rewards.uno import TurnRollout, agentic_grpo_advantages, mt_grpo_advantages
from podium.train.config import GRPOConfig, RewardConfig
from podium.train.samples import TrainingDataError


@dataclass(frozen=True)
class Scored:
    """One rollout with what training needs to know about it."""

    trajectory: Trajectory
    correct: bool
    """The verifier's outcome b."""
    reward: float
    """The scalar reward of the chosen design."""
    well_formed: bool
    """Every turn followed the action format (no parse error, no PARSE_ERR call)."""
    answered: bool
    """The episode ended with a final answer."""


class RewardScorer:
    """Verdicts and rewards of a batch, with the configured design's reward function (which may keep state
    between batches, as Uno's rolling cost bracket does)."""

    def __init__(self, config: RewardConfig, tools: Sequence[str], grader: Grader | None = None) -> None:
        self.config = config
        self.tools = list(tools)
        """Tool names of the pool, in the order of ToolOrchestra's metric vector."""
        self.grader = grader or Grader()
        self.reward = config.reward_function(self.tools)

    async def score(self, items: Sequence[BenchmarkItem], trajectories: Sequence[Trajectory]) -> list[Scored]:
        """Each rollout's verdict and reward (the reward of some designs depends on the whole batch)."""
        verdicts = [
            await self.grader.grade(item, trajectory) for item, trajectory in zip(items, trajectories, strict=True)
        ]
        correct = [verdict.correct for verdict in verdicts]
        rewards = self.reward(trajectories, correct)
        return [
            Scored(trajectory, ok, reward, well_formed(trajectory), trajectory.answer is not None)
            for trajectory, ok, reward in zip(trajectories, correct, rewards, strict=True)
        ]


@dataclass(frozen=True)
class GroupResult:
    """The advantages of one group: per kept rollout, one value per turn (one turn-wide value in trajectory mode)."""

    kept: dict[int, list[float]]
    """Index in the group → advantage per turn."""
    dropped: str | None = None
    """Why the whole group was dropped, if it was."""


def group_result(group: Sequence[Scored], config: GRPOConfig) -> GroupResult:
    """Filters, then trajectory-level GRPO advantages or turn-level ones (Agentic-GRPO, MT-GRPO) over the kept
    rollouts; or, with ``expected``, the exact per-turn advantages of every path of the group's action tree."""
    if config.advantage == "expected":
        return expected_group(group, config.min_group_std)
    rollouts = [
        Rollout(
            reward=scored.reward,
            well_formed=scored.well_formed or not config.drop_malformed,
            answered=scored.answered or not config.drop_unanswered,
        )
        for scored in group
    ]
    filtered = filtered_group_advantages(rollouts, min_std=config.min_group_std)
    if filtered.dropped is not None:
        return GroupResult({}, filtered.dropped)
    if config.advantage == "trajectory":
        return GroupResult(
            {
                index: [advantage] * max(1, len(group[index].trajectory.turns))
                for index, advantage in zip(filtered.kept, filtered.advantages, strict=True)
            }
        )
    shaped = [turn_shaping(group[index].trajectory, config.turn_eta) for index in filtered.kept]
    rewards = [group[index].reward for index in filtered.kept]
    if config.advantage == "mt_grpo":
        per_turn = mt_grpo_advantages(rewards, [shaping for shaping, _ in shaped], rho=config.mt_grpo_rho)
    else:
        turn_rollouts = [
            TurnRollout(reward, shaping, kinds) for reward, (shaping, kinds) in zip(rewards, shaped, strict=True)
        ]
        per_turn = agentic_grpo_advantages(turn_rollouts, gamma=config.turn_gamma, eta=config.turn_eta)
    return GroupResult(dict(zip(filtered.kept, per_turn, strict=True)))


def expected_group(group: Sequence[Scored], min_std: float) -> GroupResult:
    """Exact advantages of the paths of one episode's tree (every path kept), unless their rewards barely differ."""
    rewards = [scored.reward for scored in group]
    _, std = mean_and_std(rewards)
    if std < min_std:
        return GroupResult({}, f"homogeneous rewards (std {std:.3g} < {min_std:g})")
    result = expected_advantages([path_steps(scored.trajectory) for scored in group], rewards)
    return GroupResult(dict(enumerate(result.per_turn)))


def path_steps(trajectory: Trajectory) -> list[Step]:
    """The choices offered, their probabilities under the policy and the word taken, turn by turn."""
    steps = []
    for turn in trajectory.turns:
        if turn.choice_probs is None:
            raise TrainingDataError(
                f"trajectory {trajectory.id}, turn {turn.index}: no choice probabilities; advantage 'expected' needs "
                "a policy whose every action is one of a few words (route) and a local policy model that scores them"
            )
        steps.append((turn.choice_probs, turn.output))
    return steps


def path_probability(trajectory: Trajectory) -> float:
    """The probability of a path under the policy that explored it (1 for a sampled rollout)."""
    probability = 1.0
    for probabilities, word in path_steps(trajectory) if trajectory.turns else []:
        probability *= probabilities[word] / sum(probabilities.values())
    return probability


def task_preference(item: BenchmarkItem) -> Preference | None:
    """A task's own preference, when its metadata carries one."""
    raw = item.metadata.get("preference")
    return Preference.model_validate(raw) if raw is not None else None
