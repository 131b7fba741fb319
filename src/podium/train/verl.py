"""Multi-node GRPO through verl: the pieces that do not need verl installed.

verl runs rollouts in "agent loops" (one per sample) that talk to its vLLM/SGLang servers token-in/token-out, and
trains with FSDP or Megatron across nodes. Podium plugs in as an agent loop (:mod:`podium.train.verl_agent`) that
runs Podium's executor with a backend bound to verl's server manager, scores the trajectory with Podium's reward
and returns it as one token sequence with the policy mask. This module holds what that loop and its launch need:
the conversion of a trajectory to verl's output fields, the per-sample reward, the dataset rows, and the trainer
overrides that express a :class:`~podium.train.config.GRPOConfig` in verl's config keys.
"""

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import PositiveInt

from podium.config import Config
from podium.core.trajectory import Trajectory
from podium.datasets.items import BenchmarkItem
from podium.errors import ConfigError
from podium.extras import require_extra
from podium.train.config import GRPOConfig
from podium.train.samples import ChatFormat, single_sample
from podium.train.scoring import RewardScorer

AGENT_NAME = "podium_agent"
"""Name of Podium's agent loop in verl's registry (the ``agent_name`` column of the dataset)."""
AGENT_CLASS = "podium.train.verl_agent.PodiumAgentLoop"
"""Import path verl instantiates (through hydra) for that name."""
LOSS_AGGREGATION = {"dapo": "token-mean", "bnpo": "token-mean", "grpo": "seq-mean-token-mean"}
"""Podium's loss normalisation → verl's ``actor.loss_agg_mode``."""


class VerlLaunchConfig(Config):
    """``podium train verl-config``: where the verl launch of a GRPO config goes, and the cluster it runs on."""

    out: str
    """Directory for the parquet tasks, agent-loop file and script."""
    nodes: PositiveInt = 1
    """Nodes of the verl run."""
    gpus_per_node: PositiveInt = 8
    """GPUs per node."""


def agent_output(trajectory: Trajectory, chat: ChatFormat, response_length: int) -> dict[str, Any]:
    """verl's ``AgentLoopOutput`` fields for one trajectory: the first prompt, then every generated and
    observation token with ``response_mask`` 1 exactly on the generated ones, cut to ``response_length``."""
    sample = single_sample(trajectory, chat)
    start = sample.prompt_length
    return {
        "prompt_ids": sample.input_ids[:start],
        "response_ids": sample.input_ids[start:][:response_length],
        "response_mask": sample.mask[start:][:response_length],
        "num_turns": len(trajectory.messages),
    }


async def sample_reward(scorer: RewardScorer, item: BenchmarkItem, trajectory: Trajectory) -> float:
    """Podium's reward of one rollout, as an agent loop reports it (one sample at a time)."""
    if scorer.config.design == "toolorchestra":
        # Its min-max normalisation runs over the whole rollout batch, which a per-sample loop never sees.
        raise ConfigError("the toolorchestra reward needs the whole batch; with verl use uno or paramanager")
    [scored] = await scorer.score([item], [trajectory])
    return scored.reward


def dataset_rows(items: Sequence[BenchmarkItem]) -> list[dict[str, Any]]:
    """verl dataset rows (write them to parquet): the chat prompt verl tokenizes for its bookkeeping, the agent
    loop to run, and the task itself for Podium's executor and verifier."""
    return [
        {
            "data_source": "podium",
            "prompt": [{"role": "user", "content": item.question}],
            "agent_name": AGENT_NAME,
            "reward_model": {"style": "rule", "ground_truth": str(item.gold)},
            "extra_info": {"index": index, "task": item.model_dump_json()},
        }
        for index, item in enumerate(items)
    ]


def agent_loop_file(path: Path, podium_config: Path) -> Path:
    """The agent-loop registry file verl reads (``rollout.agent.agent_loop_config_path``); the loop reads the
    GRPO config (pool, rollout knobs, reward) from ``podium_config``."""
    entry = {"name": AGENT_NAME, "_target_": AGENT_CLASS, "podium_config": str(podium_config)}
    path.write_text(yaml.safe_dump([entry]))
    return path


def verl_overrides(
    config: GRPOConfig,
    *,
    train_files: str,
    agent_loops: str,
    nodes: int = 1,
    gpus_per_node: int = 8,
    max_prompt_length: int = 8192,
    max_response_length: int = 8192,
) -> list[str]:
    """Hydra overrides for ``python -m verl.trainer.main_ppo`` that train like ``config`` (GRPO advantages,
    ε_low/ε_high, k3 KL, loss aggregation, rollouts per question) with Podium's agent loop doing the rollouts."""
    if config.advantage != "trajectory":
        raise ConfigError(f"advantage {config.advantage!r} is computed by Podium's TRL trainer; verl's GRPO is "
                          "trajectory-level")  # fmt: skip
    if config.rollout.price_contrast:
        raise ConfigError("rollout.price_contrast pairs groups in Podium's TRL trainer; verl draws its own batches")
    if config.model.path is None:
        raise ConfigError("verl needs the policy as a checkpoint directory: set model.path")
    questions = config.generation_groups
    settings: dict[str, Any] = {
        "algorithm.adv_estimator": "grpo",
        "algorithm.norm_adv_by_std_in_grpo": True,
        "algorithm.use_kl_in_reward": False,
        "data.train_files": train_files,
        "data.val_files": train_files,
        "data.train_batch_size": questions * nodes * gpus_per_node,
        "data.max_prompt_length": max_prompt_length,
        "data.max_response_length": max_response_length,
        "data.return_raw_chat": True,
        "actor_rollout_ref.model.path": config.model.path,
        "actor_rollout_ref.actor.optim.lr": config.learning_rate,
        "actor_rollout_ref.actor.ppo_mini_batch_size": questions * nodes * gpus_per_node,
        "actor_rollout_ref.actor.ppo_epochs": config.iterations,
        "actor_rollout_ref.actor.clip_ratio_low": config.epsilon_low,
        "actor_rollout_ref.actor.clip_ratio_high": config.epsilon_high,
        "actor_rollout_ref.actor.loss_agg_mode": LOSS_AGGREGATION[config.loss_type],
        "actor_rollout_ref.actor.use_kl_loss": config.kl_beta > 0,
        "actor_rollout_ref.actor.kl_loss_coef": config.kl_beta,
        "actor_rollout_ref.actor.kl_loss_type": "low_var_kl",  # verl's name for k3
        "actor_rollout_ref.actor.policy_loss.loss_mode": "gspo" if config.ratio_level == "sequence" else "vanilla",
        "actor_rollout_ref.rollout.name": "vllm",
        "actor_rollout_ref.rollout.mode": "async",
        "actor_rollout_ref.rollout.n": config.group_size,
        "actor_rollout_ref.rollout.temperature": config.rollout.temperature,
        "actor_rollout_ref.rollout.response_length": max_response_length,
        "actor_rollout_ref.rollout.multi_turn.enable": True,
        "actor_rollout_ref.rollout.agent.agent_loop_config_path": agent_loops,
        "trainer.nnodes": nodes,
        "trainer.n_gpus_per_node": gpus_per_node,
        "trainer.default_local_dir": config.output_dir,
        "trainer.save_freq": config.save_steps or -1,
        "trainer.logger": "['console']",
        "trainer.val_before_train": False,
    }
    if config.max_steps:
        settings["trainer.total_training_steps"] = config.max_steps
    return [f"{key}={_hydra_value(value)}" for key, value in settings.items()]


def _hydra_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def write_verl_launch(
    config: GRPOConfig, config_path: Path, items: Sequence[BenchmarkItem], out: Path, *, nodes: int, gpus_per_node: int
) -> Path:
    """Write everything a verl run needs into ``out``: the tasks as parquet, the agent-loop file and a launch
    script with the overrides; returns the script."""
    datasets = require_extra("train", "datasets")
    out.mkdir(parents=True, exist_ok=True)
    train_files = out / "train.parquet"
    datasets.Dataset.from_list(dataset_rows(items)).to_parquet(str(train_files))
    loops = agent_loop_file(out / "agent_loops.yaml", config_path.resolve())
    overrides = verl_overrides(
        config, train_files=str(train_files), agent_loops=str(loops), nodes=nodes, gpus_per_node=gpus_per_node
    )
    script = out / "run_verl.sh"
    lines = ["#!/bin/sh", "# GRPO with verl; Podium's agent loop runs the executor for every rollout.", "set -e"]
    lines.append("python -m verl.trainer.main_ppo \\\n  " + " \\\n  ".join(f"'{o}'" for o in overrides))
    script.write_text("\n".join(lines) + "\n")
    script.chmod(0o755)
    return script
