"""``podium train grpo``: GRPO on TRL's GRPOTrainer with rollouts from Podium's executor.

Only TRL's public extension points are used: its ``rollout_func`` hook runs our executor (multi-turn, tools,
prices) and returns each rollout as one token sequence with an environment mask that keeps observations out of
the loss; a reward function returns our design's reward, or ``None`` for a rollout ToolOrchestra's filters drop
(TRL leaves such rows out of the group baseline and gives them no advantage; their mask is zeroed too, and a
dropped group has every row dropped); and for turn-level credit (Agentic-GRPO, MT-GRPO) ``compute_loss`` hands
TRL's loss per-token advantages, a shape its loss documents for subclasses. The group normalisation of
trajectory-level advantages, the clipped surrogate with ε_low/ε_high, the k3 KL to a frozen reference, the
sequence-level ratio over policy tokens (``importance_sampling_level="sequence"``) and the masked token mean are
TRL's own.
"""

import asyncio
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypedDict, Unpack

from podium.backends.base import ChatBackend
from podium.core.trajectory import Trajectory
from podium.datasets.items import BenchmarkItem
from podium.errors import ConfigError
from podium.extras import require_extra
from podium.train.batches import GroupMaker, batch_plan, call_shares, row_weights
from podium.train.config import GRPOConfig
from podium.train.curves import CurvesCallback
from podium.train.decision_loss import add_averages, grpo_decision_loss, grpo_decision_loss_applies
from podium.train.model import load_model, model_source, resolve_device, trainer_arguments
from podium.train.rollouts import ExecutorRollouts, RayRollouts, RolloutSource, policy_backend
from podium.train.samples import NO_TURN, ChatFormat, TrainingSample, chat_dicts, single_sample
from podium.train.scoring import RewardScorer, Scored
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
        policy: ChatBackend | None = None,
    ) -> None:
        datasets = require_extra("train", "datasets")
        datasets.disable_progress_bars()
        self.tasks = list(tasks)
        self.task_of = task_index(self.tasks)
        self.groups = GroupMaker(rollouts, scorer, config, self.tasks)
        self.podium = config
        self.policy = policy
        self.chat = ChatFormat(tokenizer)
        self.turn_advantages: dict[tuple[int, ...], list[float]] = {}
        self.decision_metrics: dict[str, list[float]] = {}
        super().__init__(
            model=model,
            reward_funcs=[podium_reward],
            args=args,
            train_dataset=datasets.Dataset.from_list([{"prompt": task.question} for task in self.tasks]),
            processing_class=tokenizer,
            rollout_func=self.podium_rollouts,
            callbacks=[CurvesCallback(Path(config.output_dir))] if config.curves else None,
        )

    def podium_rollouts(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        """TRL's rollout hook: run the batch through the executor with the current weights, score it, and return
        each rollout as prompt tokens, completion tokens and the mask of the policy's own tokens, with the reward
        of each row (``None`` where a filter dropped it) for :func:`podium_reward`."""
        if self.accelerator.num_processes > 1:
            raise NotImplementedError("Podium's GRPO runs in one process; multi-GPU and multi-node go through verl")
        items = [self.tasks[self.task_of[prompt]] for prompt in prompts]
        size = self.podium.group_size
        if any(len({item.id for item in items[start : start + size]}) != 1 for start in range(0, len(items), size)):
            raise RuntimeError("a generation batch must hold whole groups, one task each")
        groups = self._groups(items[::size])
        scored = [item for group in groups for item in group]
        decisions = self.podium.loss_tokens == "decisions"
        samples = [rollout_sample(item.trajectory, self.chat, decisions) for item in scored]
        completions = [sample.input_ids[sample.prompt_length :] for sample in samples]
        plan = batch_plan(scored, [sample.turns[sample.prompt_length :] for sample in samples], self.podium)
        self.turn_advantages = {tuple(ids): row for ids, row in zip(completions, plan.advantages, strict=True)}
        weights = row_weights(groups, self.podium)
        sheets = [None if k is None else Path(self.podium.rollout.price_sheets[k]).stem for k in self.groups.sheets]
        metrics = {
            "reward": sum(w * item.reward for w, item in zip(weights, scored, strict=True)),
            "accuracy": sum(w * item.correct for w, item in zip(weights, scored, strict=True)),
            "usd": sum(w * item.trajectory.usage.usd for w, item in zip(weights, scored, strict=True)),
            "groups_dropped": plan.groups_dropped,
            "groups_replaced": self.groups.replaced / len(groups),
            **call_shares(groups, weights, sheets),
        }
        return {
            "prompt_ids": [sample.input_ids[: sample.prompt_length] for sample in samples],
            "completion_ids": completions,
            "logprobs": None,
            "env_mask": plan.masks,
            "podium_reward": plan.rewards,
            "podium_metrics": [metrics] * len(scored),
        }

    def _groups(self, tasks: list[BenchmarkItem]) -> list[list[Scored]]:
        """The scored groups of the batch's tasks, played with the current weights in eval mode."""
        if self.policy is not None:
            self.policy.weights_changed()
        model = self.accelerator.unwrap_model(self.model)
        training = model.training
        model.eval()
        try:
            return asyncio.run(self.groups.batch(tasks))
        finally:
            model.train(training)

    def compute_loss(
        self, model: Any, inputs: dict[str, Any], return_outputs: bool = False, num_items_in_batch: Any = None
    ) -> Any:
        """TRL's loss; in turn-level modes with each token's own turn advantage in place of the rollout's; with
        ``loss_tokens: decisions``, computed with the LM head at the decision positions only
        (:mod:`podium.train.decision_loss`)."""
        inputs = self.loss_inputs(inputs)
        if (
            self.podium.loss_tokens == "decisions"
            and not return_outputs
            and grpo_decision_loss_applies(self, model, inputs)
        ):
            return grpo_decision_loss(self, model, inputs, self.decision_metrics)
        return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        """TRL's log, with the metrics of the decision loss where it ran (as TRL's own loss reports them)."""
        add_averages(logs, self.decision_metrics)
        super().log(logs, start_time)

    def loss_inputs(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """A mini-batch as the loss reads it: in turn-level modes, with each token's own turn advantage."""
        if self.podium.advantage == "trajectory":
            return inputs
        return {**inputs, "advantages": self._per_token_advantages(inputs)}

    def _per_token_advantages(self, inputs: dict[str, Any]) -> Any:
        """The (rows × tokens) advantages of a mini-batch, found by each row's completion tokens (TRL may
        shuffle and split the generation batch, but a row's tokens travel with it)."""
        ids, mask = inputs["completion_ids"], inputs["completion_mask"]
        advantages = torch.zeros(ids.shape, dtype=torch.float32, device=ids.device)
        for row in range(ids.shape[0]):
            length = int(mask[row].sum())
            values = self.turn_advantages[tuple(ids[row, :length].tolist())]
            advantages[row, :length] = torch.tensor(values, dtype=torch.float32)
        return advantages


def task_index(tasks: Sequence[BenchmarkItem]) -> dict[str, int]:
    """Question → task; TRL hands the rollout hook only the prompts, so questions must identify tasks."""
    index: dict[str, int] = {}
    for position, task in enumerate(tasks):
        if task.question in index:
            raise ConfigError(f"tasks {tasks[index[task.question]].id} and {task.id} have the same question")
        index[task.question] = position
    return index


def podium_reward(
    prompts: list[Any], completions: list[Any], *, podium_reward: list[float | None], log_metric: Any, **fields: Any
) -> list[float | None]:
    """The reward TRL normalises per group: the design's reward computed with the rollouts (where the trajectories
    are), ``None`` for rows the filters dropped. Logs the batch's metrics (the policy's expected reward, accuracy,
    USD and share of episodes calling each worker under ``expected``; means over rollouts otherwise)."""
    for name, value in fields["podium_metrics"][0].items():
        log_metric(f"podium/{name}", value)
    return podium_reward


def rollout_sample(trajectory: Trajectory, chat: ChatFormat, decisions: bool = False) -> TrainingSample:
    """A rollout as one sequence. When the orchestrator never produced a turn (its backend failed), the rollout
    still needs a row in the batch: an end-of-turn token outside the loss, and the scorer marks it unanswered."""
    if any(message.role == "assistant" for message in trajectory.messages):
        return single_sample(trajectory, chat, decisions=decisions)
    conversation = chat_dicts(trajectory.messages) or [{"role": "user", "content": trajectory.question}]
    prompt = chat.encode(chat.render(conversation, generation_prompt=True))
    return TrainingSample(
        [*prompt, min(chat.stop_ids)], [0] * (len(prompt) + 1), [NO_TURN] * (len(prompt) + 1), len(prompt)
    )


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


class GivenInputs(TypedDict, total=False):
    """What a GRPO run may be given in place of what its config names."""

    rollouts: RolloutSource
    """Replaces the executor (tests script trajectories)."""
    tools: Sequence[str]
    """The tools of ToolOrchestra's metric vector, with ``rollouts`` (otherwise they come from the pool)."""
    model: Any
    """An in-memory policy, with ``tokenizer`` (otherwise ``config.model`` is loaded)."""
    tokenizer: Any


def grpo_trainer(config: GRPOConfig, **given: Unpack[GivenInputs]) -> PodiumGRPOTrainer:
    """The trainer of ``config.model`` (or the given in-memory ``model``), ready to train (see :func:`run_grpo`)."""
    rollouts, tools = given.get("rollouts"), given.get("tools")
    model, tokenizer = given.get("model"), given.get("tokenizer")
    device = resolve_device(config.device)
    if model is None or tokenizer is None:
        model, tokenizer = load_model(config.model, device)
    backend = None
    if rollouts is None:
        backend = policy_backend(config.rollout, model, tokenizer, config.model.name, str(model_source(config.model)))
        executor_rollouts = ExecutorRollouts.from_config(config.rollout, backend)
        rollouts, tools = executor_rollouts, tools or executor_rollouts.pool.registry.names()
        if config.rollout.ray is not None:
            rollouts = RayRollouts(config.rollout, str(model_source(config.model)))
    with warnings.catch_warnings():
        # rollout_func is marked experimental in TRL; Podium pins the TRL version it was built against.
        warnings.filterwarnings("ignore", message="You are using 'rollout_func'")
        return PodiumGRPOTrainer(
            model=model,
            tokenizer=tokenizer,
            args=grpo_arguments(config, trainer_arguments(config, device)),
            tasks=load_tasks(config),
            rollouts=rollouts,
            scorer=RewardScorer(config.reward, tools or []),
            config=config,
            policy=backend,
        )


def run_grpo(config: GRPOConfig, **given: Unpack[GivenInputs]) -> TrainResult:
    """Train ``config.model`` (or the given in-memory ``model``) with GRPO and save it in ``config.output_dir``.

    ``rollouts`` replaces the executor (tests script trajectories); ``tools`` then names the tools of ToolOrchestra's
    metric vector, which otherwise come from the pool. With ``kl_beta`` > 0 the frozen reference is loaded from the
    policy's checkpoint directory, so an in-memory model must have been loaded from one.
    """
    trainer = grpo_trainer(config, **given)
    trainer.train()
    output = Path(config.output_dir)
    trainer.save_model(str(output))
    trainer.processing_class.save_pretrained(str(output))
    return TrainResult(output, trainer.state.global_step, list(trainer.state.log_history))
