"""The run configuration: policy, budget, sampling, constrained decoding and tool lists of an episode."""

from typing import ClassVar, Literal

from pydantic import Field, NonNegativeFloat, PositiveFloat, PositiveInt, model_validator

from podium.config import MAX_USD_SPLIT, Config
from podium.policies import POLICIES, POLICY_NAMES, PolicySettings, SerialConfig

POLICY_SETTING = "a setting of the {policy} policy now, under policy: policy: {{name: {policy}, {key}: …}}"
"""What a key that was a run setting once and is a policy's now is refused with (a policy owns its settings)."""


class RunConfig(Config):
    """How the orchestrator runs one episode. Unset limits take the policy's defaults (turns: serial 50,
    parallel 12, dag 8; calls per round: 1, 4, 16)."""

    moved: ClassVar[dict[str, str]] = {
        **MAX_USD_SPLIT,
        **{key: POLICY_SETTING.format(policy=name, key=key)
           for name, config in zip(POLICY_NAMES, POLICIES, strict=True) for key in config.settings()},
    }  # fmt: skip

    policy: PolicySettings = Field(default_factory=SerialConfig)
    """Action space and its own settings: ``serial`` (ToolOrchestra), ``parallel`` (ParaManager rounds), ``dag``
    (Uno-Orchestra) or ``escalate`` (one word a turn: a worker to answer, then accept its reply or escalate to
    another), by name, or as a mapping of its name and settings (``{name: escalate, verify: check_arithmetic}``;
    each policy's settings: :mod:`podium.policies`)."""
    orchestrator: str | None = None
    """Worker (by name) that plays the orchestrator; default: the pool's first worker."""
    summarizer: str | None = None
    """Worker (by name) that writes the answer when the parallel policy calls final_answer; default: the pool's
    role worker, else its first worker."""
    max_turns: PositiveInt | None = None
    """Most orchestrator turns (rounds); default: the policy's."""
    max_calls_per_round: PositiveInt | None = None
    """Most calls one turn may dispatch; more are refused with PARSE_ERR. Default: the policy's."""
    max_total_tokens: PositiveInt | None = None
    """Most tokens of the whole episode, orchestrator and workers, prompt and completion."""
    max_episode_usd: PositiveFloat | None = None
    """Most US dollars for the episode; a generation or call whose cost bound exceeds what is left is refused
    before it runs, so the cap is never crossed."""
    max_seconds: PositiveFloat | None = None
    """Wall-clock deadline of the episode, in seconds; calls still running then end as TIMEOUT."""
    max_parse_errors: PositiveInt = 3
    """Unparseable orchestrator outputs tolerated per episode; each one gets a PARSE_ERR observation and
    another turn, and the next one past the limit ends the episode."""
    summarize_on_stop: bool | None = None
    """When turns or parse errors run out before an answer, the summarizer writes one from the history (the
    trajectory keeps the limit as its stop reason). Default: on for ``parallel`` (ParaManager's termination
    instruction), off otherwise."""
    answer_from_observations: bool = True
    """When a limit ends the episode before an answer (and the summarizer, if on, gave none), the final value
    the newest successful call printed is the answer (``metadata["answer_source"]`` names the call; the stop
    reason stays the limit)."""
    max_tokens: PositiveInt = 1024
    """Completion budget of one orchestrator turn, in tokens; actions are sized to fit it."""
    temperature: NonNegativeFloat = 0.0
    """Sampling temperature of the orchestrator (0 in evaluation; above 0 for RL rollouts)."""
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    """Nucleus sampling of the orchestrator (with a temperature above 0): the smallest set of tokens whose
    probability reaches ``top_p``."""
    sampling_seed: int | None = None
    """Seed of the orchestrator's sampled turns (turn t uses ``sampling_seed + t``); default: the backend's own."""
    summarizer_max_tokens: PositiveInt | None = None
    """Most tokens of the summarizer's reply (the answer it writes); default: its worker's ``max_tokens``."""
    max_history_tokens: PositiveInt = 4096
    """Most prompt tokens of earlier conversation turns shown to the orchestrator before the task (a served
    chat's history); the oldest turns are left out first."""
    constrained: Literal["auto", "always", "never"] = "auto"
    """Grammar-constrained actions: ``auto`` uses the policy's grammar when the orchestrator's backend can
    constrain (local models; vLLM servers with ``structured_outputs: vllm``), ``always`` fails when it cannot."""
    allow: list[str] | None = None
    """Only these tools, roles and workers (by name) may be used; default: all of the pool."""
    deny: list[str] = Field(default_factory=list)
    """These tools, roles and workers (by name) may not be used."""

    @model_validator(mode="after")
    def _check_sampling(self) -> "RunConfig":
        problem = self.sampling_problem()
        if problem is not None:
            raise ValueError(problem)
        return self

    def sampling_problem(self) -> str | None:
        """Why these settings cannot sample as they say (``None``: they can); checked again where an episode is
        set up, since a sampled attempt copies the settings with its own temperature."""
        return self.policy.sampling_problem(self.temperature)
