"""Rollouts through the real executor (scripted orchestrator, sandboxed python tool) become training sequences, and
each instance can get its own tools and prices."""

import asyncio
import json
import re
import shutil

import pytest

pytest.importorskip("trl")

from podium.backends.scripted import ScriptedBackend
from podium.core.messages import Message
from podium.costs.prices import ModelPrice, PriceCatalog, ToolPrice
from podium.errors import ConfigError
from podium.pool.config import BlindConfig, PoolConfig, WorkerConfig
from podium.pool.pool import build_pool
from podium.train.config import RolloutConfig, default_rollout_pool
from podium.train.rollouts import ExecutorRollouts, collect
from podium.train.samples import ChatFormat, masked_spans, single_sample
from tests.test_train_support import tiny_tokenizer

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="the python tool runs in bubblewrap")


def orchestrator_reply(messages: list[Message]) -> str:
    """Call python on the question's numbers, then answer with what it printed."""
    last = messages[-1].content
    if "<tool_response" in last:
        printed = re.search(r"\n(\S+)\n", last).group(1)
        return f"<answer>{printed}</answer>"
    a, b = re.findall(r"\d+", last)[:2]
    return f'<tool_call>{{"name": "python", "arguments": {{"code": "print({a}*{b})"}}}}</tool_call>'


@needs_bwrap
def test_executor_rollouts_train_on_what_the_orchestrator_wrote() -> None:
    backend = ScriptedBackend([orchestrator_reply], repeat_last=True, model="policy")
    rollouts = ExecutorRollouts(build_pool(default_rollout_pool()), backend, RolloutConfig(max_turns=4))
    [trajectory] = asyncio.run(collect(rollouts, ["What is 123456 * 789?"], [7], [None], concurrency=2))
    assert trajectory.answer == str(123456 * 789)
    assert [m.role for m in trajectory.messages] == ["system", "user", "assistant", "user", "assistant"]
    tokenizer = tiny_tokenizer()
    sample = single_sample(trajectory, ChatFormat(tokenizer))
    spans = [tokenizer.decode(span, skip_special_tokens=True) for span in masked_spans(sample)]
    assert spans == [turn.output for turn in trajectory.turns]


@needs_bwrap
def test_instances_draw_their_own_tools_and_prices() -> None:
    pool = build_pool(default_rollout_pool().model_copy(update={"tools": ["python", "symbolic_math"]}))
    sheet = PriceCatalog(
        models={"policy": ModelPrice(input_per_mtok=1e6, output_per_mtok=0.0)},
        tools={"python": ToolPrice(per_call_usd=0.5)},
    )
    config = RolloutConfig(max_turns=4, tool_subset=True)
    rollouts = ExecutorRollouts(
        pool, ScriptedBackend([orchestrator_reply], repeat_last=True, model="policy"), config, [sheet]
    )
    subsets = {tuple(rollouts.instance(seed)[2].allow or []) for seed in range(20)}
    assert {("python",), ("symbolic_math",), ("python", "symbolic_math")} == subsets
    instance_pool, priced_backend, _ = rollouts.instance(0)
    assert priced_backend.price.input_per_mtok == 1e6
    assert instance_pool.prices.tool_price("python").per_call_usd == 0.5
    assert pool.prices.tool_price("python").per_call_usd != 0.5  # the base pool is untouched
    plain = ExecutorRollouts(
        pool, ScriptedBackend([orchestrator_reply], repeat_last=True, model="policy"), RolloutConfig()
    )
    seed = next(seed for seed in range(20) if rollouts.instance(seed)[2].allow == ["python"])
    [priced] = asyncio.run(collect(rollouts, ["What is 12 * 34?"], [seed], [None], 1))
    [unpriced] = asyncio.run(collect(plain, ["What is 12 * 34?"], [seed], [None], 1))
    assert priced.answer == unpriced.answer == "408"
    assert priced.usage.usd > 0.5 > unpriced.usage.usd  # a python call at $0.5 plus the orchestrator's tokens
    assert "symbolic_math" in unpriced.messages[0].content and "symbolic_math" not in priced.messages[0].content


def test_blind_labels_follow_the_instance_seed() -> None:
    workers = [
        WorkerConfig(
            name=name,
            backend="scripted",
            model=name,
            replies=["ok"],
            price=ModelPrice(input_per_mtok=1, output_per_mtok=1),
        )
        for name in ("alpha", "beta", "gamma")
    ]
    pool = build_pool(PoolConfig(workers=workers, tools=[], blind=BlindConfig(enabled=True)))
    rollouts = ExecutorRollouts(pool, ScriptedBackend(["<answer>1</answer>"], repeat_last=True), RolloutConfig())
    labels = [t.metadata["labels"] for t in asyncio.run(collect(rollouts, ["q"] * 4, [1, 1, 4, 5], [None] * 4, 4))]
    assert labels[0] == labels[1]  # one group, one instance
    assert len({json.dumps(mapping, sort_keys=True) for mapping in labels}) > 1
    assert all(set(mapping.values()) <= {"Worker1", "Worker2", "Worker3"} for mapping in labels)


def test_rollouts_are_checked_when_built_unless_each_episode_brings_its_orchestrator() -> None:
    pool = build_pool(default_rollout_pool())
    config = RolloutConfig(user={"worker": "nobody"})
    with pytest.raises(ConfigError, match=r"user\.worker: 'nobody'"):
        ExecutorRollouts(pool, ScriptedBackend(["<answer>1</answer>"], model="policy"), config)
    per_episode = ExecutorRollouts(pool, None, config)  # verl: each rollout brings its own server session
    assert per_episode.system.name == "rollouts"
