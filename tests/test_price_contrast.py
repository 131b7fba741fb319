"""GRPO's price contrast: each question of a generation batch played under every price sheet, one instance seed,
so a step compares the same question at each price; per-sheet call shares in the learning curves."""

import asyncio

import pytest

from podium.costs.prices import ModelPrice, PriceCatalog
from podium.datasets.items import BenchmarkItem
from podium.errors import ConfigError
from podium.train.config import RolloutConfig
from podium.train.rollouts import ExecutorRollouts
from tests.test_explore import UniformScorer
from tests.test_routers import cat_pool

pytest.importorskip("trl")

CAT = "How many legs has a cat?"


def sheets() -> list[PriceCatalog]:
    """The strong worker ``s`` cheap, then dear."""
    return [PriceCatalog(models={"s": ModelPrice(input_per_mtok=p, output_per_mtok=p)}) for p in (1.0, 1000.0)]


def contrast_config(**changes: object):
    from podium.train.config import GRPOConfig

    rollout = {"policy": {"name": "escalate", "verify": "check_arithmetic"}, "max_tokens": 16, "temperature": 1.0,
               "price_sheets": ["cheap.yaml", "dear.yaml"], "price_contrast": True}  # fmt: skip
    settings = {"tasks": "t.jsonl", "output_dir": "o", "group_size": 4, "batch_size": 8, "advantage": "expected",
                "drop_malformed": False, "drop_unanswered": False, "min_group_std": 0.0, "rollout": rollout,
                "reward": {"design": "cost_penalty", "cost_usd_scale": 0.01}}  # fmt: skip
    return GRPOConfig.model_validate({**settings, **changes})


def test_each_question_is_played_under_every_sheet_with_one_seed_and_only_the_prices_differ(tmp_path) -> None:
    from podium.train.batches import GroupMaker, call_shares, row_weights
    from podium.train.config import RewardConfig
    from podium.train.scoring import RewardScorer

    config = contrast_config()
    rollouts = ExecutorRollouts(cat_pool(tmp_path, tools=["check_arithmetic"]), UniformScorer("policy"),
                                RolloutConfig.model_validate(config.rollout.model_dump()), sheets())  # fmt: skip
    tasks = [BenchmarkItem(id=f"t{n}", question=q, gold="4", verifier="math") for n, q in enumerate([CAT, "Other?"])]
    maker = GroupMaker(rollouts, RewardScorer(RewardConfig(design="cost_penalty", cost_usd_scale=0.01), []), config,
                       tasks)  # fmt: skip
    plan = maker.plan(tasks)
    assert [(task.id, sheet) for task, _, sheet in plan] == [("t0", 0), ("t0", 1)]  # "Other?" is not played
    assert plan[0][1] == plan[1][1]  # one instance seed

    cheap, dear = asyncio.run(maker.batch(tasks))
    assert maker.sheets == [0, 1]
    paths = {tuple(t.output for t in scored.trajectory.turns): scored for scored in cheap}
    dear_paths = {tuple(t.output for t in scored.trajectory.turns): scored for scored in dear}
    assert paths.keys() == dear_paths.keys() and len(paths) == 4
    weak_only = ("w", "accept")
    assert paths[weak_only].trajectory.usage.usd == dear_paths[weak_only].trajectory.usage.usd  # w's price unchanged
    escalated = ("w", "s", "accept")
    assert dear_paths[escalated].trajectory.usage.usd > 100 * paths[escalated].trajectory.usage.usd
    assert paths[escalated].correct and dear_paths[escalated].correct
    assert dear_paths[escalated].reward < paths[escalated].reward  # the same right answer, dearer

    shares = call_shares([cheap, dear], row_weights([cheap, dear], config), ["cheap", "dear"])
    assert shares["calls/s@cheap"] == shares["calls/s@dear"] == pytest.approx(0.75)  # uniform policy: 3 of 4 paths
    assert shares["calls/s"] == pytest.approx(0.75) and shares["calls/w@dear"] == pytest.approx(0.75)


def test_a_dropped_question_is_replaced_under_every_sheet_so_the_batch_stays_paired() -> None:
    from podium.core.trajectory import Trajectory, Turn
    from podium.train.batches import GroupMaker
    from podium.train.config import RewardConfig
    from podium.train.scoring import RewardScorer

    tasks = [BenchmarkItem(id=f"t{n}", question=f"What is {n} + {n}?", gold=str(2 * n), verifier="math")
             for n in range(4)]  # fmt: skip
    played: list[tuple[str, int, int | None]] = []

    async def rollout(task, seed: int, preference=None, sheet: int | None = None) -> Trajectory:
        played.append((task.id, seed, sheet))
        value = int(task.question.split()[2])  # t0: every rollout right (a group that teaches nothing)
        answer = str(2 * value) if value == 0 or len(played) % 2 else "0"
        return Trajectory(question=task.question, answer=answer, turns=[Turn(index=0, output=answer)])

    config = contrast_config(advantage="trajectory", group_size=2, batch_size=4, resample_groups=4,
                             min_group_std=0.1, drop_malformed=True, drop_unanswered=True)  # fmt: skip
    maker = GroupMaker(rollout, RewardScorer(RewardConfig(design="cost_penalty"), []), config, tasks)
    groups = asyncio.run(maker.batch(tasks[:2]))  # one question (t0) under two sheets
    assert maker.replaced == 2 and maker.sheets == [0, 1]
    first, second = ({scored.trajectory.question for scored in group} for group in groups)
    assert first == second and first != {tasks[0].question}  # t0 replaced by one fresh question under both sheets
    replacement = [(seed, sheet) for task_id, seed, sheet in played if task_id != "t0"]
    assert {sheet for _, sheet in replacement} == {0, 1} and len({seed for seed, _ in replacement}) == 1


def test_an_instance_priced_by_a_named_sheet_keeps_its_seed_draws(tmp_path) -> None:
    pool = cat_pool(tmp_path)
    config = RolloutConfig(tool_subset=True, price_sheets=["cheap.yaml", "dear.yaml"])
    rollouts = ExecutorRollouts(pool, UniformScorer("policy"), config, sheets())
    for seed in range(6):
        _, _, drawn_settings = rollouts.instance(seed)
        for sheet, price in ((0, 1.0), (1, 1000.0)):
            priced_pool, _, settings = rollouts.instance(seed, sheet=sheet)
            assert priced_pool.prices.model_price("s").input_per_mtok == price
            assert settings.allow == drawn_settings.allow  # the tool subset does not depend on the sheet
    with pytest.raises(ConfigError, match="price sheet 2 asked for; the rollouts have 2"):
        rollouts.instance(0, sheet=2)


def test_price_contrast_needs_sheets_and_whole_pairs_and_is_not_silently_dropped_by_verl() -> None:
    from podium.train.verl import verl_overrides

    with pytest.raises(ValueError, match="at least 2 price_sheets"):
        contrast_config(rollout={"temperature": 1.0, "price_sheets": ["one.yaml"], "price_contrast": True})
    with pytest.raises(ValueError, match=r"groups per generation batch \(3\) a multiple of their number \(2\)"):
        contrast_config(batch_size=12)
    config = contrast_config(advantage="trajectory", model={"path": "ckpt"})
    with pytest.raises(ConfigError, match="price_contrast"):
        verl_overrides(config, train_files="t.parquet", agent_loops="a.yaml")
