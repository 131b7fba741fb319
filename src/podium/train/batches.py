"""A GRPO generation batch, group by group: rollouts (sampled, or every path of the action tree for the
``expected`` advantage), their rewards, dynamic sampling of groups the filters drop, and what each row trains on.

**Dynamic sampling.** A group whose rewards do not vary teaches nothing (its advantages are 0) yet takes its
place in the batch. With ``resample_groups`` > 0 such a group is replaced by the group of a fresh question, up to
that many replacements per batch (DAPO's dynamic sampling; ToolOrchestra drops such groups): the step then trains
on groups that carry a signal, and the rows TRL receives belong to the replacement questions.

**Seeds.** Each group gets a seed that no other group of the run gets (the instance: tools, prices, blind labels);
sampling seeds come from the policy backend, which advances its own per request, so no two rollouts of a run
share a random stream. With ``rollout.price_contrast`` a question's groups (one per price sheet) share its seed:
only their prices differ.
"""

import asyncio
import random
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Protocol

from podium.core.preference import Preference
from podium.core.trajectory import Trajectory
from podium.datasets.items import BenchmarkItem
from podium.errors import ConfigError
from podium.train.config import GRPOConfig
from podium.train.rollouts import RolloutSource, Task, collect
from podium.train.samples import NO_TURN
from podium.train.scoring import RewardScorer, Scored, group_result, path_probability, task_preference


class ExploringSource(Protocol):
    """A rollout source that can play every path of an episode's action tree (``advantage: expected``)."""

    async def explore(
        self, task: Task, seed: int, preference: Preference | None = None, sheet: int | None = None
    ) -> list[Trajectory]: ...


class GroupMaker:
    """Makes the scored groups of generation batches."""

    def __init__(
        self, rollouts: RolloutSource, scorer: RewardScorer, config: GRPOConfig, tasks: Sequence[BenchmarkItem]
    ) -> None:
        self.rollouts = rollouts
        self.scorer = scorer
        self.config = config
        self.tasks = list(tasks)
        self.rng = random.Random(config.seed)
        self.groups_started = 0
        self.replaced = 0
        """Groups replaced by dynamic sampling in the last batch."""
        self.sheets: list[int | None] = []
        """The price sheet (index into ``rollout.price_sheets``) of each group of the last batch; None: drawn at
        random by the instance."""

    def next_seed(self) -> int:
        self.groups_started += 1
        return self.config.seed * 1_000_003 + self.groups_started

    def plan(self, tasks: Sequence[BenchmarkItem]) -> list[tuple[BenchmarkItem, int, int | None]]:
        """Each group's task, instance seed and price sheet: one group per task, or with ``price_contrast`` the
        first 1/k of the tasks under each of the k sheets (the rest of the generation batch's prompts are not
        played, so a step costs the same)."""
        if not self.config.rollout.price_contrast:
            return [(task, self.next_seed(), None) for task in tasks]
        count = len(self.config.rollout.price_sheets)
        return [(task, seed, sheet) for task in tasks[: len(tasks) // count]
                for seed in [self.next_seed()] for sheet in range(count)]  # fmt: skip

    async def batch(self, tasks: Sequence[BenchmarkItem]) -> list[list[Scored]]:
        """One scored group per task (or per task and sheet), dropped groups replaced as far as allowed."""
        plan = self.plan(tasks)
        self.sheets = [sheet for _, _, sheet in plan]
        trajectories = await asyncio.gather(*(self.play(task, seed, sheet) for task, seed, sheet in plan))
        flat = [trajectory for group in trajectories for trajectory in group]
        items = [task for (task, _, _), group in zip(plan, trajectories, strict=True) for _ in group]
        scored = await self.scorer.score(items, flat)  # toolorchestra normalises over the whole batch
        size = self.config.group_size
        groups = [scored[start : start + size] for start in range(0, len(scored), size)]
        return await self.replace_dropped(groups, {task.id for task in tasks})

    async def replace_dropped(self, groups: list[list[Scored]], in_batch: set[str]) -> list[list[Scored]]:
        """Dynamic sampling: a question whose group the filters drop is replaced by a fresh question, up to
        ``resample_groups`` groups per batch. With ``price_contrast`` the question's groups under every sheet are
        replaced together, so the batch's questions stay paired across prices."""
        width = len(self.config.rollout.price_sheets) if self.config.rollout.price_contrast else 1
        self.replaced = 0
        for start in range(0, len(groups), width):
            block, sheets = groups[start : start + width], self.sheets[start : start + width]
            while any(group_result(group, self.config).dropped for group in block):
                fresh = [task for task in self.tasks if task.id not in in_batch]
                if not fresh or self.replaced + width > self.config.resample_groups:
                    break
                task, seed = self.rng.choice(fresh), self.next_seed()
                in_batch.add(task.id)
                self.replaced += width
                played = [await self.play(task, seed, sheet) for sheet in sheets]
                block = [await self.scorer.score([task] * len(paths), paths) for paths in played]
            groups[start : start + width] = block
        return groups

    async def play(self, task: BenchmarkItem, seed: int, sheet: int | None = None) -> list[Trajectory]:
        """The group of one task: ``group_size`` sampled rollouts, or every path of its action tree (priced by
        ``sheet`` when given)."""
        size, preference = self.config.group_size, task_preference(task)
        priced = {} if sheet is None else {"sheet": sheet}
        if self.config.advantage != "expected":
            count, source = self.config.rollout.concurrency, partial(self.rollouts, **priced)
            return await collect(source, [task] * size, [seed] * size, [preference] * size, count)
        explorer = getattr(self.rollouts, "explore", None)
        if explorer is None:
            raise ConfigError("advantage 'expected' needs a rollout source that explores (Podium's executor rollouts)")
        paths: list[Trajectory] = await explorer(task, seed, preference, **priced)
        if len(paths) != size:
            raise ConfigError(f"task {task.id} has {len(paths)} action paths; with advantage 'expected' set group_size "
                              f"to {len(paths)} (every path is one row)")  # fmt: skip
        return paths


@dataclass(frozen=True)
class BatchPlan:
    """What a generation batch trains on, row by row."""

    rewards: list[float | None]
    """The design's reward of each kept rollout; ``None`` for a rollout or group the filters dropped."""
    masks: list[list[int]]
    """Per completion token: 1 where it trains (the orchestrator generated it, it is a decision when only
    decisions train, and its rollout is kept), else 0."""
    advantages: list[list[float]]
    """Per completion token: its turn's advantage (turn-level and expected modes), else 0."""
    groups_dropped: float
    """Share of the batch's groups dropped whole."""


def batch_plan(scored: Sequence[Scored], turn_ids: Sequence[Sequence[int]], config: GRPOConfig) -> BatchPlan:
    """Rewards, loss masks and per-token advantages of a generation batch (consecutive groups of
    ``config.group_size``): the filters decide which rollouts train, and a token trains only when the
    orchestrator generated it (and it is a decision, where only decisions train)."""
    size = config.group_size
    rewards: list[float | None] = [None] * len(scored)
    masks = [[0] * len(turns) for turns in turn_ids]
    advantages = [[0.0] * len(turns) for turns in turn_ids]
    dropped = 0
    for start in range(0, len(scored), size):
        result = group_result(scored[start : start + size], config)
        dropped += result.dropped is not None
        for offset, per_turn in result.kept.items():
            row = start + offset
            rewards[row] = scored[row].reward
            for position, turn in enumerate(turn_ids[row]):
                if turn != NO_TURN:
                    masks[row][position] = 1
                    advantages[row][position] = per_turn[min(turn, len(per_turn) - 1)]
    return BatchPlan(rewards, masks, advantages, dropped / (len(scored) // size))


def row_weights(groups: Sequence[Sequence[Scored]], config: GRPOConfig) -> list[float]:
    """Each row's weight in the batch's metrics: equal for sampled rollouts; a path's probability (over the number
    of groups) with the ``expected`` advantage, so the metrics are the policy's expectations."""
    weights = []
    for group in groups:
        for scored in group:
            share = path_probability(scored.trajectory) if config.advantage == "expected" else 1.0 / len(group)
            weights.append(share / len(groups))
    return weights


def called_workers(trajectory: Trajectory) -> set[str]:
    """The tools and workers an episode called (a role's call counts for the worker it named in ``model``)."""
    names = set()
    for result in trajectory.results:
        arguments = result.call.arguments if isinstance(result.call.arguments, dict) else {}
        model = arguments.get("model")
        names.add(model if isinstance(model, str) else result.call.name)
    return names


def call_shares(
    groups: Sequence[Sequence[Scored]], weights: Sequence[float], sheets: Sequence[str | None]
) -> dict[str, float]:
    """The batch's share of episodes that called each worker (``calls/NAME``), and, for groups priced by a named
    sheet, the share among that sheet's groups (``calls/NAME@SHEET``)."""
    called = [called_workers(scored.trajectory) for group in groups for scored in group]
    labels = [sheet for group, sheet in zip(groups, sheets, strict=True) for _ in group]
    shares = {}
    for label in [None, *sorted({sheet for sheet in sheets if sheet is not None})]:
        rows = [n for n, row_label in enumerate(labels) if label is None or row_label == label]
        total = sum(weights[n] for n in rows)
        suffix = "" if label is None else f"@{label}"
        for name in sorted(set().union(*called)):
            shares[f"calls/{name}{suffix}"] = sum(weights[n] for n in rows if name in called[n]) / total
    return shares
