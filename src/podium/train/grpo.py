"""``podium train grpo``: GRPO on TRL's GRPOTrainer with rollouts from Podium's executor.

TRL fits once three things are swapped in: its ``rollout_func`` hook runs our executor (multi-turn, tools, prices)
and returns each rollout as one token sequence with an environment mask; the reward is our design's; and the
advantages are replaced after TRL computes them, so that ToolOrchestra's filters can drop rollouts and whole
groups (their loss mask is zeroed) and Agentic-GRPO can give each turn its own advantage (a per-token tensor,
which TRL's loss accepts). The clipped surrogate with ε_low/ε_high, the k3 KL to a frozen reference, the
sequence-level ratio over policy tokens (``importance_sampling_level="sequence"``) and the masked token mean are
TRL's own.
"""

import asyncio
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from podium.core.trajectory import Trajectory
from podium.evaluate.benchmarks import BenchmarkItem
from podium.extras import require_extra
from podium.train.config import GRPOConfig
from podium.train.model import load_model, model_source, resolve_device, trainer_arguments
from podium.train.rollouts import ExecutorRollouts, RolloutSource, collect, policy_backend
from podium.train.samples import NO_TURN, ChatFormat, TrainingSample, chat_dicts, single_sample
from podium.train.scoring import RewardScorer, Scored, group_result, task_preference
from podium.train.sft import TrainResult
from podium.train.tasks import load_tasks

trl = require_extra("train", "trl")
torch = require_extra("train", "torch")


class PodiumGRPOTrainer(trl.GRPOTrainer):
    """TRL's GRPOTrainer with Podium rollouts, rewards, filters and (optionally) turn-level advantages."""

    def __init__(
        self,
        *,
        model: Any,
        tokenizer: Any,
        args: Any,
        tasks: Sequence[BenchmarkItem],
        rollouts: RolloutSource,
        scorer: RewardScorer,
        config: GRPOConfig,
    ) -> None:
        datasets = require_extra("train", "datasets")
        datasets.disable_progress_bars()
        self.tasks = list(tasks)
        self.rollouts = rollouts
        self.scorer = scorer
        self.podium = config
        self.chat = ChatFormat(tokenizer)
        self.groups_started = 0
        self._rows: list[dict[str, Any]] = []
        self._scored: list[Scored] = []
        rows = [{"prompt": task.question, "task": index} for index, task in enumerate(self.tasks)]
        super().__init__(
            model=model,
            reward_funcs=[self.podium_reward],
            args=args,
            train_dataset=datasets.Dataset.from_list(rows),
            processing_class=tokenizer,
            rollout_func=self.podium_rollouts,
        )

    def podium_rollouts(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        """TRL's rollout hook: run the batch through the executor with the current weights, score it, and return
        each rollout as prompt tokens, completion tokens and the mask of the policy's own tokens."""
        items = [self.tasks[row["task"]] for row in self._rows]
        # One seed per group: its G rollouts see the same instance (tools, prices, blind labels), so their rewards
        # compare; the samples differ through the backend's own sampling.
        size = self.podium.group_size
        seeds = [self.args.seed * 1_000_003 + self.groups_started + index // size for index in range(len(items))]
        self.groups_started += len(items) // size
        model = self.accelerator.unwrap_model(self.model)
        training = model.training
        model.eval()
        try:
            trajectories = asyncio.run(
                collect(
                    self.rollouts,
                    [item.question for item in items],
                    seeds,
                    [task_preference(item) for item in items],
                    self.podium.rollout.concurrency,
                )
            )
        finally:
            model.train(training)
        self._scored = asyncio.run(self.scorer.score(items, trajectories))
        samples = [rollout_sample(trajectory, self.chat) for trajectory in trajectories]
        return {
            "prompt_ids": [sample.input_ids[: sample.prompt_length] for sample in samples],
            "completion_ids": [sample.input_ids[sample.prompt_length :] for sample in samples],
            "logprobs": None,
            "env_mask": [sample.mask[sample.prompt_length :] for sample in samples],
            "turn_ids": [sample.turns[sample.prompt_length :] for sample in samples],
        }

    def podium_reward(self, prompts: list[Any], completions: list[Any], **_: Any) -> list[float]:
        """The configured design's reward of each rollout (computed with the rollouts, where the trajectories are)."""
        return [scored.reward for scored in self._scored]

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        if self.accelerator.num_processes > 1:
            raise NotImplementedError("Podium's GRPO runs in one process; multi-GPU and multi-node go through verl")
        self._rows = inputs
        output = super()._generate_and_score_completions(inputs)
        tasks, size = [row["task"] for row in inputs], self.podium.group_size
        if any(len(set(tasks[start : start + size])) != 1 for start in range(0, len(tasks), size)):
            raise RuntimeError("a generation batch must hold whole groups, one task each")
        advantages, mask, dropped = batch_advantages(
            self._scored, [row["turn_ids"] for row in inputs], output["completion_mask"], self.podium
        )
        output["advantages"] = advantages
        output["tool_mask"] = mask
        output["num_items_in_batch"] = (output["completion_mask"] * mask).sum()
        mode = "train" if self.model.training else "eval"
        self._metrics[mode]["podium/groups_dropped"].append(dropped)
        self._metrics[mode]["podium/accuracy"].append(sum(s.correct for s in self._scored) / len(self._scored))
        self._metrics[mode]["podium/usd"].append(sum(s.trajectory.usage.usd for s in self._scored) / len(self._scored))
        return output


def rollout_sample(trajectory: Trajectory, chat: ChatFormat) -> TrainingSample:
    """A rollout as one sequence. When the orchestrator never produced a turn (its backend failed), the rollout
    still needs a row in the batch: an end-of-turn token outside the loss, and the scorer marks it unanswered."""
    if any(message.role == "assistant" for message in trajectory.messages):
        return single_sample(trajectory, chat)
    conversation = chat_dicts(trajectory.messages) or [{"role": "user", "content": trajectory.question}]
    prompt = chat.encode(chat.render(conversation, generation_prompt=True))
    return TrainingSample(
        [*prompt, min(chat.stop_ids)], [0] * (len(prompt) + 1), [NO_TURN] * (len(prompt) + 1), len(prompt)
    )


def batch_advantages(
    scored: Sequence[Scored], turn_ids: Sequence[Sequence[int]], completion_mask: Any, config: GRPOConfig
) -> tuple[Any, Any, float]:
    """Per-token advantages and loss mask of a generation batch (consecutive groups of ``config.group_size``), and
    the share of groups the filters dropped. A token gets its turn's advantage when the orchestrator generated it
    and its rollout survived the filters; every other token is out of the loss."""
    size = config.group_size
    advantages = torch.zeros(completion_mask.shape, dtype=torch.float32, device=completion_mask.device)
    mask = torch.zeros_like(completion_mask)
    dropped = 0
    for start in range(0, len(scored), size):
        result = group_result(scored[start : start + size], config)
        dropped += result.dropped is not None
        for offset, per_turn in result.kept.items():
            for position, turn in enumerate(turn_ids[start + offset]):
                if turn != NO_TURN:
                    advantages[start + offset, position] = per_turn[min(turn, len(per_turn) - 1)]
                    mask[start + offset, position] = 1
    return advantages, mask, dropped / (len(scored) // size)


def grpo_arguments(config: GRPOConfig, base: dict[str, Any]) -> Any:
    """TRL's GRPOConfig for ``config``: Podium's knobs mapped onto TRL's names."""
    vllm = config.rollout.backend == "vllm"
    return trl.GRPOConfig(
        **base,
        num_train_epochs=config.epochs,
        num_generations=config.group_size,
        num_iterations=config.iterations,
        epsilon=config.epsilon_low,
        epsilon_high=config.epsilon_high,
        beta=config.kl_beta,
        importance_sampling_level=config.ratio_level,
        loss_type=config.loss_type,
        # The logits are divided by this before log-probabilities are taken: it must be the sampling temperature.
        temperature=config.rollout.temperature,
        scale_rewards="group",
        mask_truncated_completions=False,
        log_completions=False,
        use_vllm=vllm,
        vllm_mode="server",
        vllm_server_base_url=config.rollout.vllm_base_url if vllm else None,
        # Executor rollouts do not return sampling log-probabilities, so there is nothing to correct against.
        vllm_importance_sampling_correction=False,
        model_init_kwargs=None,
        shuffle_dataset=True,
    )


def run_grpo(
    config: GRPOConfig,
    *,
    rollouts: RolloutSource | None = None,
    tools: Sequence[str] | None = None,
    model: Any = None,
    tokenizer: Any = None,
) -> TrainResult:
    """Train ``config.model`` (or the given in-memory ``model``) with GRPO and save it in ``config.output_dir``.

    ``rollouts`` replaces the executor (tests script trajectories); ``tools`` then names the tools of ToolOrchestra's
    metric vector, which otherwise come from the pool. With ``kl_beta`` > 0 the frozen reference is loaded from the
    policy's checkpoint directory, so an in-memory model must have been loaded from one.
    """
    device = resolve_device(config.device)
    if model is None or tokenizer is None:
        model, tokenizer = load_model(config.model, device)
    if rollouts is None:
        backend = policy_backend(config.rollout, model, tokenizer, config.model.name, str(model_source(config.model)))
        executor_rollouts = ExecutorRollouts.from_config(config.rollout, backend)
        rollouts, tools = executor_rollouts, tools or executor_rollouts.pool.registry.names()
    with warnings.catch_warnings():
        # rollout_func is marked experimental in TRL; Podium pins the TRL version it was built against.
        warnings.filterwarnings("ignore", message="You are using 'rollout_func'")
        trainer = PodiumGRPOTrainer(
            model=model,
            tokenizer=tokenizer,
            args=grpo_arguments(config, trainer_arguments(config, device)),
            tasks=load_tasks(config),
            rollouts=rollouts,
            scorer=RewardScorer(config.reward, tools or []),
            config=config,
        )
    trainer.train()
    output = Path(config.output_dir)
    trainer.save_model(str(output))
    tokenizer.save_pretrained(str(output))
    return TrainResult(output, trainer.state.global_step, list(trainer.state.log_history))
