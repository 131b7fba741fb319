"""Typed configs of ``podium train sft`` and ``podium train grpo`` (SPEC §7). Defaults follow the papers where they
agree; each field says which paper a default comes from."""

from typing import Any, Literal, Self

from pydantic import Field, NonNegativeFloat, NonNegativeInt, PositiveFloat, PositiveInt, model_validator

from podium.backends.embedded import EMBEDDED_MODEL
from podium.config import Config
from podium.core.answers import VerifierKind
from podium.core.preference import Preference
from podium.pool.config import PoolConfig, WorkerConfig
from podium.rewards.registry import RewardFunction, build_reward
from podium.solve.config import SystemConfig


class ModelConfig(Config):
    """The orchestrator model being trained."""

    path: str | None = None
    """Checkpoint directory (Hugging Face format); ``None`` means the embedded SmolLM2-135M-Instruct."""
    adapter: str | None = None
    """A LoRA adapter directory (``podium train sft`` with ``lora:`` writes one) loaded over the model and trained
    further; the result is that adapter."""
    name: str = "orchestrator"
    """Name of the model in records and prices while it is trained."""
    dtype: Literal["auto", "float32", "bfloat16"] = "auto"
    """Training dtype: ``auto`` is bfloat16 on CUDA and float32 on CPU."""
    cpu_threads: PositiveInt = 1
    """Torch CPU threads (process-wide) when training on a CPU."""


class TrainerConfig(Config):
    """Optimisation and checkpointing shared by SFT and GRPO."""

    output_dir: str
    """Where checkpoints and the final model are written."""
    learning_rate: PositiveFloat
    """Peak learning rate."""
    lr_scheduler: Literal["cosine", "linear", "constant", "constant_with_warmup"] = "cosine"
    """Learning-rate schedule after warm-up."""
    warmup_steps: NonNegativeInt = 0
    """Linear warm-up steps."""
    batch_size: PositiveInt = 8
    """Sequences per device per optimiser micro-step."""
    gradient_accumulation_steps: PositiveInt = 1
    """Micro-steps accumulated into one optimiser step. The loss is normalised over all of their tokens (SFT; GRPO's
    ``dapo`` and ``grpo`` losses), so a smaller ``batch_size`` with more accumulation takes the same gradient with
    less padding: faster on a CPU (the claim's SFT feeds 1 × 8, its GRPO 4 × 4)."""
    max_steps: PositiveInt | None = None
    """Stop after this many optimiser steps (overrides epochs)."""
    save_steps: PositiveInt | None = None
    """Write a checkpoint every N steps; ``None``: only the final model."""
    save_total_limit: PositiveInt | None = 2
    """Keep at most this many intermediate checkpoints."""
    logging_steps: PositiveInt = 10
    """Log the loss every N steps."""
    max_grad_norm: PositiveFloat = 1.0
    """Gradient clipping norm."""
    seed: int = 0
    """Seed of data order, initialisation of new heads and sampling."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """Where to train: ``auto`` picks CUDA when available."""


class LoraConfig(Config):
    """A LoRA adapter trained instead of the full weights: a few MB to ship rather than the whole model."""

    rank: PositiveInt = 8
    """Rank r of each adapter matrix pair."""
    alpha: PositiveFloat = 16.0
    """Scaling numerator: the update is (alpha / r) · B·A."""
    dropout: NonNegativeFloat = Field(0.0, lt=1.0)
    """Dropout on the adapter's input during training."""
    target_modules: list[str] = Field(default_factory=lambda: ["q_proj", "v_proj"], min_length=1)
    """Names of the linear layers that get an adapter."""
    layers: list[NonNegativeInt] | None = None
    """Only these decoder layers (0-based) get adapters; default: all. Adapting only the top layers of a model stops
    the backward pass there: on a CPU a training step then costs little more than a forward pass."""


LossTokens = Literal["generated", "decisions"]
"""Which of the orchestrator's tokens carry the loss: every token it generated, or only its decisions: where its
action was one of a few words (a policy with finite choices), the tokens at which those words branch; the rest of
such a word is forced and teaches nothing, and a turn with one choice has no decision. Free-text turns keep every
token. With ``decisions``, SFT runs the LM head only at the labelled positions (:mod:`podium.train.decision_loss`)."""


class SFTConfig(TrainerConfig):
    """Supervised fine-tuning on trajectories, loss only on the orchestrator's own tokens (SPEC §7)."""

    trajectories: list[str] = Field(min_length=1)
    """Trajectory JSONL files (``podium eval`` results or synthesised teacher runs)."""
    model: ModelConfig = Field(default_factory=ModelConfig)
    """The model to fine-tune."""
    learning_rate: PositiveFloat = 2e-5
    """Peak learning rate (Uno: 2e-5; ParaManager: 1e-5)."""
    warmup_steps: NonNegativeInt = 100
    """Linear warm-up steps (Uno: 100)."""
    epochs: PositiveFloat = 2.0
    """Passes over the data (Uno: 2)."""
    max_length: PositiveInt = 16_384
    """Longest sequence in tokens; longer samples keep their start (Uno packs to 16,384)."""
    packing: bool = False
    """Pack several samples into one ``max_length`` row (padding-free); worth it on GPU with many short samples."""
    answered_only: bool = False
    """Skip trajectories that ended without a final answer."""
    loss_tokens: LossTokens = "generated"
    """``generated``: the loss on every token the orchestrator generated; ``decisions``: only on its decision
    tokens (see :data:`LossTokens`)."""
    lora: LoraConfig | None = None
    """Train a LoRA adapter (saved alone in ``output_dir``; load it with a local worker's ``adapter:``) instead
    of the full weights."""


class RewardConfig(Config):
    """The reward: one of the three designs of SPEC §5, all pure functions in ``podium.rewards``."""

    design: Literal["uno", "toolorchestra", "paramanager", "cost_penalty"] = "uno"
    """Uno-Orchestra's cost-blended reward, ToolOrchestra's preference-weighted vector, ParaManager's sum, or the
    success-gated cost penalty (1 − weight · USD / usd_scale when correct, else 0)."""
    uno_alpha: NonNegativeFloat = Field(0.1, le=1.0)
    """Uno α: weight of the cost term inside a correct answer's reward."""
    uno_window: PositiveInt = 1000
    """Uno: episodes in the rolling √cost percentile bracket."""
    preference: Preference = Field(
        default_factory=lambda: Preference(weights={"outcome": 1.0, "compute": 0.5, "latency": 0.0})
    )
    """ToolOrchestra: the preference P of tasks that carry none (weights over tools, outcome, compute, latency)."""
    paramanager_target_tokens: PositiveInt = 12_288
    """ParaManager L_tar."""
    paramanager_target_cost_units: PositiveFloat = 8.0
    """ParaManager C_tar (the paper sweeps 4, 8, 12, 16)."""
    paramanager_diversity: bool = True
    """ParaManager: include the diversity reward R_div; false is the paper's ablation without it."""
    cost_weight: NonNegativeFloat = 1.0
    """cost_penalty: reward points lost per ``cost_usd_scale`` USD spent by a correct episode (a task's preference
    weight ``compute`` overrides it)."""
    cost_usd_scale: PositiveFloat = 0.01
    """cost_penalty: the USD that costs ``cost_weight`` reward points."""

    def reward_function(self, tools: list[str]) -> RewardFunction:
        """This design's reward function from the registry; ``tools`` orders ToolOrchestra's call counts."""
        options: dict[str, object] = {
            "uno": {"alpha": self.uno_alpha, "window": self.uno_window},
            "toolorchestra": {"tools": tools, "preference": self.preference},
            "paramanager": {
                "target_tokens": self.paramanager_target_tokens,
                "target_cost_units": self.paramanager_target_cost_units,
                "diversity": self.paramanager_diversity,
            },
            "cost_penalty": {"weight": self.cost_weight, "usd_scale": self.cost_usd_scale},
        }[self.design]
        return build_reward(self.design, **options)


ROLLOUT_DEFAULTS: dict[str, object] = {"max_turns": 8, "temperature": 1.0, "constrained": "never"}
"""Where rollouts differ from an inference run unless the config says otherwise: 8 orchestrator turns (Uno's
T_max), sampling at temperature 1.0 (ParaManager), and unconstrained decoding: the grammar reshapes the sampling
distribution, while the GRPO ratio and KL are computed for the unconstrained policy. Blind labels need no switch
here: with ``blind.enabled`` in the pool, each group's instance seed draws a fresh mapping."""


def default_rollout_pool() -> PoolConfig:
    """The python tool alone (the embedded model is listed as the pool's worker but offered to no one)."""
    worker = WorkerConfig(name="smollm2", backend="local", model=EMBEDDED_MODEL, max_retries=0)
    return PoolConfig(workers=[worker], tools=["python"], workers_as_tools=False)


class RolloutConfig(SystemConfig):
    """How rollouts are produced: an orchestrator system (every field of
    :class:`~podium.solve.config.SystemConfig`, with :data:`ROLLOUT_DEFAULTS`) whose orchestrator is the policy
    being trained, solving each task through :meth:`~podium.solve.system.System.solve`, the code path of
    inference and evaluation. Without a ``pool`` the rollouts offer the python tool alone."""

    backend: Literal["local", "vllm"] = "local"
    """``local``: generate with the model being trained, in-process. ``vllm``: generate on a ``trl vllm-serve``
    server (OpenAI-compatible) whose weights the trainer updates after every step."""
    vllm_base_url: str = "http://127.0.0.1:8000"
    """For ``vllm``: root of the server started with ``trl vllm-serve --model PATH``."""
    ray: str | None = None
    """Run rollouts on Ray workers (needs ``backend: vllm`` at an address they reach, and ``podium[ray]``):
    ``local``, ``auto`` or a cluster address (see :mod:`podium.runtime.cluster`)."""
    concurrency: PositiveInt = 8
    """Rollouts run at once (a local model still generates one at a time)."""
    tool_subset: bool = False
    """ToolOrchestra knob: offer each instance a random non-empty subset of the allowed tools and workers."""
    price_sheets: list[str] = Field(default_factory=list)
    """ToolOrchestra knob: price files (PriceCatalog YAML/JSON); each instance draws one and prices by it."""
    price_contrast: bool = False
    """GRPO: instead of a random sheet per instance, play each question of a generation batch under every sheet of
    ``price_sheets`` (one group per sheet, one instance seed: only the prices differ), so every step compares the
    same question at each price, the contrast a policy needs to learn to read prices. A generation batch then holds
    1/len(price_sheets) as many questions."""

    @model_validator(mode="before")
    @classmethod
    def _rollout_defaults(cls, data: Any) -> Any:
        return {**ROLLOUT_DEFAULTS, **data} if isinstance(data, dict) else data

    def pool_config(self) -> PoolConfig:
        """The pool file or inline pool given, else :func:`default_rollout_pool`."""
        return default_rollout_pool() if self.pool is None else super().pool_config()


class GRPOConfig(TrainerConfig):
    """Group-relative policy optimisation on the executor's own rollouts (SPEC §7)."""

    tasks: str | None = None
    """JSONL of tasks: ``id``, ``question``, ``gold``, ``verifier`` (math, qa, multiple_choice, code),
    optional ``metadata`` with a ``preference``."""
    benchmark: str | None = None
    """Or a Podium benchmark name (gsm8k, math500…) read from the shared data directory."""
    limit: PositiveInt | None = None
    """Only the first N tasks."""
    model: ModelConfig = Field(default_factory=ModelConfig)
    """The policy to train (normally the SFT checkpoint: RL from a base model collapses to no tool use)."""
    rollout: RolloutConfig = Field(default_factory=RolloutConfig)
    """Where rollouts come from."""
    reward: RewardConfig = Field(default_factory=RewardConfig)
    """The reward design."""
    learning_rate: PositiveFloat = 1e-6
    """Peak learning rate (ToolOrchestra, Uno: 1e-6; ParaManager: 2e-6)."""
    lr_scheduler: Literal["cosine", "linear", "constant", "constant_with_warmup"] = "constant"
    """Learning-rate schedule."""
    group_size: int = Field(8, ge=2)
    """G: rollouts per question (8 in all three papers)."""
    batch_size: PositiveInt = 16
    """Rollouts per optimiser micro-step (a multiple of ``group_size`` per generation batch)."""
    iterations: PositiveInt = 1
    """μ: optimisation passes over each generation batch (more than one makes the clipped ratio bite)."""
    epsilon_low: NonNegativeFloat = 0.2
    """ε_low of the clipped ratio."""
    epsilon_high: NonNegativeFloat = 0.28
    """ε_high of the clipped ratio (clip-higher; ToolOrchestra and ParaManager: 0.28)."""
    kl_beta: NonNegativeFloat = 0.0
    """β of the k3 KL estimator to the starting checkpoint (ToolOrchestra 1e-4, Uno 1e-3, ParaManager 0)."""
    ratio_level: Literal["token", "sequence"] = "token"
    """Importance ratio per token, or ParaManager's sequence-level ratio over policy tokens only (eq. 20)."""
    loss_type: Literal["dapo", "bnpo", "grpo"] = "dapo"
    """Normalisation: token mean over the batch (``dapo``), over the micro-batch (``bnpo``), per sequence (``grpo``)."""
    advantage: Literal["trajectory", "turn", "mt_grpo", "expected"] = "trajectory"
    """One advantage per rollout (GRPO); per turn with Agentic-GRPO (Uno eq. 6: discounted returns with per-turn
    shaping, normalised over comparable turns, plus the trajectory baseline); per turn with MT-GRPO (Uno
    appendix B: A_g + ρ·B_t, B_t the turn's shaping standardised over the group's turns at its index); or
    ``expected``: no sampling, every path of the episode's action tree is played once and weighted by its
    probability, the exact policy gradient (:mod:`podium.rewards.expected`). ``expected`` needs a policy whose
    every action is one of a few words (``escalate``) and a pool whose outcomes do not vary between plays (replay
    workers); ``group_size`` must equal the number of paths."""
    loss_tokens: LossTokens = "generated"
    """``generated``: the loss on every token the orchestrator generated; ``decisions``: only on its decision
    tokens (see :data:`LossTokens`)."""
    resample_groups: NonNegativeInt = 0
    """Dynamic sampling: a group the filters drop (homogeneous rewards, nothing left) is replaced by a fresh
    question's group, up to this many replacements per generation batch, so every step trains on groups that
    carry a signal; 0 keeps the dropped groups out of the loss only."""
    curves: bool = True
    """Write ``curves.jsonl`` in ``output_dir`` after every step (mean reward, accuracy, USD per rollout, each
    worker's share of calls, groups dropped) and plot it as ``curves.svg`` at the end (the ``report`` extra)."""
    mt_grpo_rho: NonNegativeFloat = 0.5
    """ρ of MT-GRPO: weight of the standardised turn score."""
    turn_gamma: PositiveFloat = Field(1.0, le=1.0)
    """γ of the turn-level returns."""
    turn_eta: NonNegativeFloat = 0.05
    """η: bound of the per-turn shaping (schema validity, repair) in turn-level returns."""
    min_group_std: NonNegativeFloat = 0.1
    """Drop a group whose kept rewards have a smaller standard deviation (ToolOrchestra: 0.1)."""
    drop_malformed: bool = True
    """Drop rollouts whose output broke the action format (ToolOrchestra filter)."""
    drop_unanswered: bool = True
    """Drop rollouts that gave no final answer (ToolOrchestra filter)."""
    epochs: PositiveFloat = 1.0
    """Passes over the tasks (``max_steps`` overrides)."""

    @property
    def generation_groups(self) -> int:
        """Groups (questions, or question and sheet pairs) in one generation batch."""
        return self.batch_size * self.gradient_accumulation_steps // self.group_size

    @model_validator(mode="after")
    def _one_task_source(self) -> Self:
        if (self.tasks is None) == (self.benchmark is None):
            raise ValueError("give exactly one of tasks (a JSONL file) or benchmark (a name)")
        if self.rollout.temperature <= 0:
            raise ValueError("rollout.temperature must be above 0: GRPO learns from differences between samples")
        if self.advantage == "expected" and self.rollout.temperature != 1.0:
            raise ValueError("advantage 'expected' weighs paths by the policy's probabilities at temperature 1: set "
                             "rollout.temperature to 1")  # fmt: skip
        if self.advantage == "expected" and (self.drop_malformed or self.drop_unanswered):
            raise ValueError("advantage 'expected' needs every path of the tree: set drop_malformed and "
                             "drop_unanswered to false")  # fmt: skip
        if self.batch_size * self.gradient_accumulation_steps % self.group_size:
            raise ValueError("batch_size × gradient_accumulation_steps must be a multiple of group_size")
        sheets = len(self.rollout.price_sheets)
        if self.rollout.price_contrast and (sheets < 2 or self.generation_groups % sheets):
            raise ValueError(f"rollout.price_contrast plays each question under every price sheet: it needs at least "
                             f"2 price_sheets and groups per generation batch ({self.generation_groups}) a multiple "
                             f"of their number ({sheets})")  # fmt: skip
        return self


VERIFIER_KINDS: tuple[VerifierKind, ...] = ("math", "qa", "multiple_choice", "code")
"""Verifiers a GRPO task may name (environment tasks need a domain and are not RL targets here)."""
