"""The configuration of an orchestrator system: one file format for every command that runs one (``podium eval``
as kind ``orchestrator``, the teachers and solvers of ``podium data``, ``podium serve``, GRPO rollouts).

Example::

    name: qwen3-8b-parallel
    policy: parallel
    max_episode_usd: 0.50
    orchestrator: qwen3-8b
    pool: pool.yaml          # a pool YAML path, an inline pool, or omitted for the embedded offline pool
"""

from typing import Literal

from pydantic import Field, PositiveInt

from podium.config import Config
from podium.envs.conversation import UserSimulatorConfig
from podium.envs.domain import DomainData
from podium.errors import ConfigError
from podium.pool.choice import PoolOverrides
from podium.pool.config import PoolConfig, WorkerConfig
from podium.pool.pool import resolve_pool_config
from podium.runtime.config import RunConfig


class NamedSystem(Config):
    """What every system file has, whatever its kind."""

    kind: str
    """Which system: ``orchestrator`` here; ``podium eval`` also knows model-only baselines and ``tools_model``."""
    name: str | None = None
    """Name in results, reports, provenance and served model ids; default ``<kind>:<model>``
    (``orchestrator:<policy>:<model>`` for an orchestrator)."""


class SystemConfig(NamedSystem, RunConfig):
    """An orchestrator system: how its episodes run (every field of the run config), the pool it runs over, the
    simulated user of tool-use items, and text for its system prompt."""

    kind: Literal["orchestrator"] = "orchestrator"
    """Selects this system (the same file serves every command)."""
    pool: str | PoolConfig | None = None
    """Pool YAML path (relative to the current directory) or an inline pool; default: the embedded offline pool."""
    replay: str | None = None
    """A recording (``podium routing record``, relative to the current directory): the pool's workers it holds
    answer from it, as they answered when recorded, instead of being called (training and evaluating on recorded
    workers: free, fast and repeatable); the pool's other workers and tools are unchanged."""
    orchestrator: str | WorkerConfig | None = None  # type: ignore[assignment]
    """Worker (by name) that plays the orchestrator, or a worker of its own that is not in the pool (e.g. ``{name:
    orchestrator, backend: local, model: my-orchestrator, adapter: runs/sft}``, an adapter path relative to the
    current directory); default: the pool's first worker."""
    user: UserSimulatorConfig = Field(default_factory=UserSimulatorConfig)
    """The simulated user of tool-use (tau2) items."""
    instructions: str | None = None
    """Text added to the orchestrator's system prompt (for instance a domain note)."""

    def pool_config(self) -> PoolConfig:
        """The pool this system names: a YAML path, an inline config, or the embedded pool; with ``replay``, its
        recorded workers answering from the recording."""
        pool = resolve_pool_config(self.pool)
        return pool.replayed(self.replay) if self.replay is not None else pool

    def run_config(self) -> RunConfig:
        """The run-config part (an orchestrator of its own is the system's, not the run's: :meth:`own_orchestrator`)."""
        fields = self.model_dump(include=set(RunConfig.model_fields))
        fields["orchestrator"] = self.orchestrator if isinstance(self.orchestrator, str) else None
        return RunConfig.model_validate(fields)

    def own_orchestrator(self) -> WorkerConfig | None:
        """The orchestrator's worker when it is not one of the pool's."""
        return self.orchestrator if isinstance(self.orchestrator, WorkerConfig) else None


class Traced(Config):
    """Where a command keeps the trajectory it played."""

    trace: str | None = None
    """Append the full trajectory to this JSONL file."""


class QuestionConfig(SystemConfig, PoolOverrides, Traced):
    """One question solved by an orchestrator system (``podium run``): the system's fields, or a whole system file
    (``system``), and the episode's seed and preference."""

    system: str | None = None
    """A system file (an orchestrator, or a router: kind router) instead of the system's fields and the pool's."""
    preference: str | None = None
    """Preference instruction for the task."""
    seed: int | None = None
    """Seed of the blind worker labels."""


class TaskUserConfig(UserSimulatorConfig):
    """The simulated user of one task played from the command line (shorter than an evaluation's)."""

    max_turns: PositiveInt = 10
    """Most user messages; the conversation ends after the last one."""
    max_tokens: PositiveInt = 128
    """Completion budget of one user message, in tokens."""


class DomainTaskConfig(SystemConfig, PoolOverrides, DomainData, Traced):
    """One task of a tau2-format domain played by an orchestrator system against a simulated user (``podium env
    run``): the system's fields, with limits for one conversation."""

    task: str
    """Task id."""
    max_turns: PositiveInt | None = 10
    """Most orchestrator turns, all replies."""
    max_tokens: PositiveInt = 256
    """Completion budget of one orchestrator turn, in tokens."""
    user: TaskUserConfig = Field(default_factory=TaskUserConfig)
    """The simulated user."""


def orchestrator_model(pool: PoolConfig, config: RunConfig) -> str:
    """The model name of the worker that plays the orchestrator."""
    if isinstance(config.orchestrator, WorkerConfig):
        return config.orchestrator.model
    name = config.orchestrator or pool.workers[0].name
    worker = next((worker for worker in pool.workers if worker.name == name), None)
    if worker is None:
        raise ConfigError(f"orchestrator: '{name}' is not a worker of the pool ({[w.name for w in pool.workers]})")
    return worker.model


def default_name(pool: PoolConfig, config: RunConfig) -> str:
    """``orchestrator:<policy>:<model>``, the name of an unnamed system."""
    return f"orchestrator:{config.policy.name}:{orchestrator_model(pool, config)}"
