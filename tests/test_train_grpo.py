"""GRPO: rewards and filters of a batch, per-token advantages, and a 2-step run on a tiny random model."""

import asyncio
import json
import random
import re

import pytest

pytest.importorskip("trl")

import torch
from transformers import AutoModelForCausalLM

from podium.core.calls import Status
from podium.core.preference import Preference
from podium.core.trajectory import Turn
from podium.datasets.items import BenchmarkItem
from podium.rewards.shaping import turn_shaping
from podium.solve.jsonl import RecordError
from podium.train.config import GRPOConfig, ModelConfig, RewardConfig
from podium.train.samples import NO_TURN, ChatFormat, single_sample
from podium.train.scoring import RewardScorer, Scored, group_result
from podium.train.tasks import load_tasks
from tests.test_train_support import arithmetic_trajectory, tiny_model, tiny_tokenizer, tool_turn


def grpo():
    """podium.train.grpo, imported when a test needs it: it loads TRL (seconds), which collection must not pay."""
    from podium.train import grpo as module

    return module


def grpo_config(tmp_path, **fields) -> GRPOConfig:
    tasks = tmp_path / "tasks.jsonl"
    rows = [{"question": f"What is {12 + i} * 34?", "gold": str((12 + i) * 34), "verifier": "math"} for i in range(4)]
    tasks.write_text("".join(json.dumps(row) + "\n" for row in rows))
    fields = {"group_size": 4, "batch_size": 8, "device": "cpu", **fields}
    return GRPOConfig(tasks=str(tasks), output_dir=str(tmp_path / "out"), **fields)


def scored(reward: float, *, well_formed: bool = True, answered: bool = True) -> Scored:
    return Scored(arithmetic_trajectory(12, 34), reward > 0.5, reward, well_formed, answered)


def test_each_design_prefers_the_correct_answer() -> None:
    right, wrong = arithmetic_trajectory(12, 34), arithmetic_trajectory(12, 34, answer=1)
    direct = right.model_copy(update={"turns": [Turn(index=0, output="<answer>408</answer>")]})
    item = BenchmarkItem(id="a", question=right.question, gold="408", verifier="math")
    for design in ("uno", "toolorchestra", "paramanager"):
        batch = asyncio.run(
            RewardScorer(RewardConfig(design=design), ["python"]).score([item] * 3, [right, wrong, direct])
        )
        assert [s.correct for s in batch] == [True, False, True]
        assert batch[0].reward > batch[1].reward, design
        assert batch[2].reward > batch[1].reward, design
    uno = asyncio.run(RewardScorer(RewardConfig(), ["python"]).score([item] * 2, [right, direct]))
    assert uno[1].reward > uno[0].reward  # same outcome, no tool cost
    keen = Preference(weights={"outcome": 1.0, "python": 1.0})
    pair = [right.model_copy(update={"preference": keen}), direct.model_copy(update={"preference": keen})]
    tool_orchestra = asyncio.run(RewardScorer(RewardConfig(design="toolorchestra"), ["python"]).score([item] * 2, pair))
    assert tool_orchestra[0].reward > tool_orchestra[1].reward  # this user wants the python tool used


def test_filters_drop_rollouts_and_homogeneous_groups() -> None:
    config = GRPOConfig(tasks="t.jsonl", output_dir="o", group_size=4, batch_size=4)
    kept = group_result([scored(1.0), scored(0.0), scored(1.0, well_formed=False), scored(0.0, answered=False)], config)
    assert kept.dropped is None and sorted(kept.kept) == [0, 1]
    assert kept.kept[0][0] > 0 > kept.kept[1][0]
    assert group_result([scored(1.0), scored(1.0), scored(0.95), scored(1.0)], config).dropped.startswith("homogeneous")
    lenient = config.model_copy(update={"drop_malformed": False})
    assert 2 in group_result([scored(1.0), scored(0.0), scored(1.0, well_formed=False), scored(0.0)], lenient).kept


def test_turn_shaping_penalises_malformed_turns_and_rewards_repairs() -> None:
    broken = tool_turn(0, "<tool_call>{oops</tool_call>", "", status=Status.PARSE_ERR)
    repaired = tool_turn(1, '<tool_call>{"name": "python"}</tool_call>', "408\n")
    trajectory = arithmetic_trajectory(12, 34).model_copy(
        update={"turns": [broken, repaired, Turn(index=2, output="<answer>408</answer>")]}
    )
    assert turn_shaping(trajectory, 0.05) == ([-0.05, 0.05, 0.0], ["invalid", "call", "answer"])


def test_advantages_reach_policy_tokens_only() -> None:
    tokenizer = tiny_tokenizer()
    chat = ChatFormat(tokenizer)
    group = [scored(1.0), scored(0.0), scored(0.0), scored(1.0, well_formed=False)]
    samples = [single_sample(item.trajectory, chat) for item in group]
    turn_ids = [sample.turns[sample.prompt_length :] for sample in samples]
    for mode in ("turn", "mt_grpo"):
        config = GRPOConfig(tasks="t.jsonl", output_dir="o", group_size=4, batch_size=4, advantage=mode)
        plan = grpo().batch_plan(group, turn_ids, config)
        assert plan.groups_dropped == 0.0 and plan.rewards == [1.0, 0.0, 0.0, None]
        advantages, mask = torch.tensor(plan.advantages), torch.tensor(plan.masks)
        policy = torch.tensor([[turn != NO_TURN for turn in row] for row in turn_ids])
        assert torch.equal(mask[:3].bool(), policy[:3])  # observations, prompts and template tokens are out
        assert not mask[3].any() and not advantages[3].any()  # the malformed rollout is dropped
        assert (advantages[0][policy[0]] > 0).all() and (advantages[1][policy[1]] < 0).all()
        first, second = (advantages[0][torch.tensor(turn_ids[0]) == turn] for turn in (0, 1))
        assert (first.unique().numel(), second.unique().numel()) == (1, 1)
    homogeneous = grpo().batch_plan([scored(1.0)] * 4, turn_ids, config)
    assert homogeneous.groups_dropped == 1.0 and not any(map(any, homogeneous.masks))
    assert homogeneous.rewards == [None] * 4


def test_tasks_file_errors_name_the_line(tmp_path) -> None:
    config = grpo_config(tmp_path)
    assert [item.gold for item in load_tasks(config)] == ["408", "442", "476", "510"]
    (tmp_path / "tasks.jsonl").write_text('{"question": "q"}\n')
    with pytest.raises(RecordError, match=r"tasks\.jsonl:1 is not a task"):
        load_tasks(config)


def scripted_rollouts(seen: list[tuple[str, int]]):
    """A rollout source where about half the rollouts answer right and the rest one too many; it records the
    (question, seed) of every rollout in ``seen``."""
    rng = random.Random(0)

    def rollout(task, seed: int, preference: Preference | None = None):
        question = task.question  # the trainer hands each rollout its task (question, gold, verifier)
        seen.append((question, seed))
        a, b = map(int, re.findall(r"\d+", question))
        return arithmetic_trajectory(a, b, answer=a * b + int(rng.random() < 0.5))

    return rollout


def completion_logprob(model, tokenizer, trajectory) -> float:
    sample = single_sample(trajectory, ChatFormat(tokenizer))
    ids = torch.tensor([sample.input_ids])
    with torch.no_grad():
        logits = model(ids).logits[0, :-1].log_softmax(-1)
    picked = logits.gather(1, ids[0, 1:, None])[:, 0]
    return float((picked * torch.tensor(sample.mask[1:])).sum())


def test_grpo_steps_move_the_policy_towards_rewarded_rollouts(tmp_path) -> None:
    tokenizer = tiny_tokenizer()
    start = tmp_path / "start"
    tiny_model(tokenizer).save_pretrained(start)
    tokenizer.save_pretrained(start)
    config = grpo_config(
        tmp_path,
        model=ModelConfig(path=str(start)),
        max_steps=2,
        learning_rate=3e-3,
        kl_beta=1e-3,
        advantage="turn",
        logging_steps=1,
    )
    seen: list[tuple[str, int]] = []
    result = grpo().run_grpo(config, rollouts=scripted_rollouts(seen), tools=["python"])
    assert result.steps == 2
    groups = [seen[start : start + 4] for start in range(0, len(seen), 4)]
    assert len(groups) == 4 and all(len(set(group)) == 1 for group in groups)  # a group shares its instance
    assert len({group[0][1] for group in groups}) == 4
    logged = [entry for entry in result.log if "podium/accuracy" in entry]
    assert len(logged) == 2 and all(0 < entry["podium/accuracy"] < 1 for entry in logged)
    before = AutoModelForCausalLM.from_pretrained(start)
    after = AutoModelForCausalLM.from_pretrained(result.path)
    right, wrong = arithmetic_trajectory(13, 34), arithmetic_trajectory(13, 34, answer=13 * 34 + 1)
    margin_before = completion_logprob(before, tokenizer, right) - completion_logprob(before, tokenizer, wrong)
    margin_after = completion_logprob(after, tokenizer, right) - completion_logprob(after, tokenizer, wrong)
    assert margin_after > margin_before


def test_a_rollout_without_any_turn_keeps_its_row_outside_the_loss() -> None:
    tokenizer = tiny_tokenizer()
    failed = arithmetic_trajectory(12, 34)
    failed = failed.model_copy(update={"messages": failed.messages[:2], "turns": [], "answer": None})
    sample = grpo().rollout_sample(failed, ChatFormat(tokenizer))
    assert sample.input_ids[-1] == tokenizer.eos_token_id and sum(sample.mask) == 0
    assert sample.prompt_length == len(sample.input_ids) - 1
