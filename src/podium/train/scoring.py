"""Scoring a generation batch of rollouts for GRPO: verdicts, the chosen reward design, the ToolOrchestra filters
and the advantages. The rewards and advantages themselves are the pure functions of ``podium.rewards``; this module
only gathers their inputs from trajectories."""

from collections.abc import Sequence
from dataclasses import dataclass

from podium.core.calls import Status
from podium.core.preference import Preference
from podium.core.trajectory import Trajectory, Turn
from podium.evaluate.benchmarks import BenchmarkItem
from podium.evaluate.grading import Grader
from podium.rewards import (
    CostBracket,
    ParaManagerWeights,
    Rollout,
    TurnRollout,
    agentic_grpo_advantages,
    batch_rewards,
    filtered_group_advantages,
    paramanager_reward,
    uno_reward,
)
from podium.rewards.uno import MAX_SHAPING
from podium.train.config import GRPOConfig, RewardConfig


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


def turn_well_formed(turn: Turn) -> bool:
    """The turn parsed, and no call of it was refused as malformed."""
    return turn.parse_error is None and all(result.status is not Status.PARSE_ERR for result in turn.results)


def turn_failed(turn: Turn) -> bool:
    """Something in the turn went wrong: it did not parse, or a call did not return OK."""
    return not turn_well_formed(turn) or any(not result.ok for result in turn.results)


def well_formed(trajectory: Trajectory) -> bool:
    """Every turn followed the format."""
    return all(turn_well_formed(turn) for turn in trajectory.turns)


class RewardScorer:
    """Verdicts and rewards of a batch; holds the one stateful piece (Uno's rolling cost bracket)."""

    def __init__(self, config: RewardConfig, tools: Sequence[str], grader: Grader | None = None) -> None:
        self.config = config
        self.tools = list(tools)
        """Tool names of the pool, in the order of ToolOrchestra's metric vector."""
        self.grader = grader or Grader()
        self.bracket = CostBracket(window=config.uno_window)

    async def score(self, items: Sequence[BenchmarkItem], trajectories: Sequence[Trajectory]) -> list[Scored]:
        """Each rollout's verdict and reward (the reward of some designs depends on the whole batch)."""
        verdicts = [
            await self.grader.grade(item, trajectory) for item, trajectory in zip(items, trajectories, strict=True)
        ]
        correct = [verdict.correct for verdict in verdicts]
        rewards = self.rewards(trajectories, correct)
        return [
            Scored(trajectory, ok, reward, well_formed(trajectory), trajectory.answer is not None)
            for trajectory, ok, reward in zip(trajectories, correct, rewards, strict=True)
        ]

    def rewards(self, trajectories: Sequence[Trajectory], correct: Sequence[bool]) -> list[float]:
        """R(τ) of each rollout under the configured design."""
        config = self.config
        if config.design == "uno":
            costs = self.bracket.normalise_batch([trajectory.usage.usd for trajectory in trajectories])
            return [
                uno_reward(ok, cost, format_shaping(trajectory), alpha=config.uno_alpha)
                for trajectory, ok, cost in zip(trajectories, correct, costs, strict=True)
            ]
        if config.design == "toolorchestra":
            with_preference = [
                t if t.preference is not None else t.model_copy(update={"preference": config.preference})
                for t in trajectories
            ]
            return batch_rewards(with_preference, correct, self.tools)
        weights = ParaManagerWeights(
            target_tokens=config.paramanager_target_tokens, target_cost_units=config.paramanager_target_cost_units
        )
        return [
            paramanager_reward(trajectory, ok, weights).total
            for trajectory, ok in zip(trajectories, correct, strict=True)
        ]


def format_shaping(trajectory: Trajectory) -> float:
    """Uno's S(τ) for a wrong answer: the consolation grows with the share of well-formed turns."""
    if not trajectory.turns:
        return 0.0
    return MAX_SHAPING * sum(turn_well_formed(turn) for turn in trajectory.turns) / len(trajectory.turns)


def turn_shaping(trajectory: Trajectory, eta: float) -> tuple[list[float], list[str]]:
    """Per-turn shaping r_t and action type for Agentic-GRPO: −η for a malformed turn, +η for a turn that repaired
    the failure of the turn before it, else 0; types ``invalid``, ``answer`` (no call) or ``call``."""
    shaping: list[float] = []
    kinds: list[str] = []
    for index, turn in enumerate(trajectory.turns):
        if not turn_well_formed(turn):
            shaping.append(-eta)
            kinds.append("invalid")
            continue
        repaired = index > 0 and turn_failed(trajectory.turns[index - 1])
        shaping.append(eta if repaired else 0.0)
        kinds.append("call" if turn.results else "answer")
    return shaping, kinds


@dataclass(frozen=True)
class GroupResult:
    """The advantages of one group: per kept rollout, one value per turn (one turn-wide value in trajectory mode)."""

    kept: dict[int, list[float]]
    """Index in the group → advantage per turn."""
    dropped: str | None = None
    """Why the whole group was dropped, if it was."""


def group_result(group: Sequence[Scored], config: GRPOConfig) -> GroupResult:
    """Filters, then trajectory-level GRPO advantages or Agentic-GRPO turn-level ones over the kept rollouts."""
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
    turn_rollouts = []
    for index in filtered.kept:
        shaping, kinds = turn_shaping(group[index].trajectory, config.turn_eta)
        turn_rollouts.append(TurnRollout(group[index].reward, shaping, kinds))
    per_turn = agentic_grpo_advantages(turn_rollouts, gamma=config.turn_gamma, eta=config.turn_eta)
    return GroupResult(dict(zip(filtered.kept, per_turn, strict=True)))


def task_preference(item: BenchmarkItem) -> Preference | None:
    """A task's own preference, when its metadata carries one."""
    raw = item.metadata.get("preference")
    return Preference.model_validate(raw) if raw is not None else None
