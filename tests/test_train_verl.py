"""The verl adapter's verl-free half: trajectory → agent-loop output, per-sample reward, dataset rows, launch files."""

import asyncio
import json

import pytest

pytest.importorskip("trl")

import pyarrow.parquet as pq
import yaml
from typer.testing import CliRunner

from podium.cli.train import app as train_app
from podium.datasets.items import BenchmarkItem
from podium.errors import ConfigError
from podium.train.config import GRPOConfig, ModelConfig, RewardConfig
from podium.train.samples import ChatFormat, single_sample
from podium.train.scoring import RewardScorer
from podium.train.verl import AGENT_CLASS, AGENT_NAME, agent_output, dataset_rows, sample_reward, verl_overrides
from tests.test_train_support import arithmetic_trajectory, tiny_tokenizer


def test_agent_output_is_the_masked_sequence() -> None:
    chat = ChatFormat(tiny_tokenizer())
    trajectory = arithmetic_trajectory(12, 34)
    sample = single_sample(trajectory, chat)
    output = agent_output(trajectory, chat, response_length=10_000)
    assert output["prompt_ids"] + output["response_ids"] == sample.input_ids
    assert output["response_mask"] == sample.mask[sample.prompt_length :]
    assert output["num_turns"] == 5
    cut = agent_output(trajectory, chat, response_length=5)
    assert len(cut["response_ids"]) == len(cut["response_mask"]) == 5


def test_sample_reward_uses_podium_designs() -> None:
    item = BenchmarkItem(id="a", question="What is 12 * 34?", gold="408", verifier="math")
    right, wrong = arithmetic_trajectory(12, 34), arithmetic_trajectory(12, 34, answer=1)
    scorer = RewardScorer(RewardConfig(design="paramanager"), [])
    assert asyncio.run(sample_reward(scorer, item, right)) > asyncio.run(sample_reward(scorer, item, wrong))
    with pytest.raises(ConfigError, match="whole batch"):
        asyncio.run(sample_reward(RewardScorer(RewardConfig(design="toolorchestra"), []), item, right))


def test_overrides_carry_the_grpo_settings() -> None:
    config = GRPOConfig(
        tasks="t.jsonl",
        output_dir="ckpt",
        model=ModelConfig(path="/models/sft"),
        group_size=8,
        batch_size=16,
        kl_beta=1e-3,
        ratio_level="sequence",
        max_steps=100,
    )
    overrides = dict(
        o.split("=", 1) for o in verl_overrides(config, train_files="t.parquet", agent_loops="a.yaml", nodes=2)
    )
    assert overrides["actor_rollout_ref.rollout.n"] == "8"
    assert overrides["data.train_batch_size"] == str(16 // 8 * 2 * 8)
    assert (
        overrides["actor_rollout_ref.actor.clip_ratio_low"],
        overrides["actor_rollout_ref.actor.clip_ratio_high"],
    ) == (
        "0.2",
        "0.28",
    )
    assert overrides["actor_rollout_ref.actor.use_kl_loss"] == "true"
    assert overrides["actor_rollout_ref.actor.kl_loss_type"] == "low_var_kl"
    assert overrides["actor_rollout_ref.actor.policy_loss.loss_mode"] == "gspo"
    assert overrides["trainer.nnodes"] == "2" and overrides["trainer.total_training_steps"] == "100"
    for advantage in ("turn", "mt_grpo", "expected"):
        with pytest.raises(ConfigError, match=f"advantage '{advantage}' is computed by Podium's TRL trainer"):
            verl_overrides(config.model_copy(update={"advantage": advantage}), train_files="t", agent_loops="a")


def test_verl_config_command_writes_a_launch(tmp_path) -> None:
    (tmp_path / "tasks.jsonl").write_text(
        json.dumps({"question": "What is 12 * 34?", "gold": "408", "verifier": "math"})
    )
    config = tmp_path / "grpo.yaml"
    config.write_text(
        yaml.safe_dump({"tasks": str(tmp_path / "tasks.jsonl"), "output_dir": "ckpt", "model": {"path": "/models/sft"}})
    )
    result = CliRunner().invoke(train_app, ["verl-config", "--config", str(config), "--out", str(tmp_path / "verl")])
    assert result.exit_code == 0, result.output
    [row] = pq.read_table(tmp_path / "verl" / "train.parquet").to_pylist()
    assert row["agent_name"] == AGENT_NAME and row["reward_model"]["ground_truth"] == "408"
    assert BenchmarkItem.model_validate_json(row["extra_info"]["task"]).question == "What is 12 * 34?"
    [loop] = yaml.safe_load((tmp_path / "verl" / "agent_loops.yaml").read_text())
    assert loop["_target_"] == AGENT_CLASS and loop["podium_config"] == str(config.resolve())
    script = (tmp_path / "verl" / "run_verl.sh").read_text()
    assert "verl.trainer.main_ppo" in script and "actor_rollout_ref.rollout.agent.agent_loop_config_path" in script
    assert dataset_rows([BenchmarkItem.model_validate_json(row["extra_info"]["task"])])[0]["prompt"] == row["prompt"]
