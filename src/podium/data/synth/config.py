"""The settings of ``podium synth domain`` and the record of one LLM step."""

from typing import Any

from pydantic import Field, NonNegativeFloat, NonNegativeInt, PositiveInt

from podium.core.record import Record
from podium.data.common import LLMStageSettings
from podium.pool.config import PoolConfig
from podium.solve.config import SystemConfig


class SynthConfig(LLMStageSettings):
    """ToolScale synthesis of one tau2-format domain (ToolOrchestra §3.3, appendix 17-19)."""

    domain: str = Field(min_length=3)
    """The domain in words, e.g. ``a public library``."""
    name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,39}$")
    """The domain's name: its directory under ``out`` and its name in ``podium env`` (``tau2_<name>`` in eval)."""
    pool: str | PoolConfig | None = None
    """Pool holding the models of the LLM steps; default: the embedded offline pool."""
    worker: str | None = None
    """The model that writes (a worker of the pool); default: the pool's first worker."""
    validator: str | None = None
    """The model that validates records; default: ``worker``."""
    subjects: PositiveInt = 4
    """Most subjects (database tables)."""
    records: PositiveInt = 5
    """Records asked for per table."""
    functions: PositiveInt = 3
    """Functions asked for per table."""
    intents: PositiveInt = 8
    """Customer intents to turn into tasks (one task each)."""
    evolve: bool = True
    """Ask for a harder variant of every task (more constraints, more entities)."""
    solver: SystemConfig = Field(default_factory=SystemConfig)
    """The orchestrator (with the pool's models) that must solve a task for it to stay."""
    pass_k: NonNegativeInt = 8
    """Attempts of the solver per task (ToolScale: pass@8); 0 skips this filter."""
    pass_temperature: NonNegativeFloat = 1.0
    """Sampling temperature of those attempts."""
    test_fraction: float = Field(0.3, ge=0.0, lt=1.0)
    """Share of the tasks put in the test split of ``split_tasks.json``."""
    temperature: NonNegativeFloat = 0.7
    """Sampling temperature of the writing steps (validation runs at 0)."""
    max_tokens: PositiveInt = 1536
    """Completion budget of one step."""
    call_timeout_s: PositiveInt = 10
    """Seconds a golden call may run when the calls are executed."""


class StepResult(Record):
    """One LLM step (a unit of work): its JSON value or why it has none."""

    key: str
    """Which step (and which table, intent or task)."""
    value: Any = None
    """The validated reply."""
    reason: str = ""
    """Why there is no value."""
    usd: NonNegativeFloat = 0.0
    """What the step cost."""
    prompt: str = ""
    """The versioned prompt used."""
