"""The configuration of an orchestrator system: one file format for every command that runs one (``podium eval``
as kind ``orchestrator``, the teachers and solvers of ``podium data``, ``podium serve``, GRPO rollouts).

Example::

    name: qwen3-8b-parallel
    policy: parallel
    max_usd: 0.50
    orchestrator: qwen3-8b
    pool: pool.yaml          # a pool YAML path, an inline pool, or omitted for the embedded offline pool
"""

from typing import Literal

from pydantic import Field

from podium.config import Config
from podium.envs.conversation import UserSimulatorConfig
from podium.errors import ConfigError
from podium.pool.config import PoolConfig
from podium.pool.pool import embedded_pool_config, load_pool_config
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
    user: UserSimulatorConfig = Field(default_factory=UserSimulatorConfig)
    """The simulated user of tool-use (tau2) items."""
    instructions: str | None = None
    """Text added to the orchestrator's system prompt (for instance a domain note)."""

    def pool_config(self) -> PoolConfig:
        """The pool this system names: a YAML path, an inline config, or the embedded pool."""
        if self.pool is None:
            return embedded_pool_config()
        if isinstance(self.pool, PoolConfig):
            return self.pool
        return load_pool_config(self.pool)

    def run_config(self) -> RunConfig:
        """The run-config part."""
        return RunConfig.model_validate(self.model_dump(include=set(RunConfig.model_fields)))


def orchestrator_model(pool: PoolConfig, config: RunConfig) -> str:
    """The model name of the worker that plays the orchestrator."""
    name = config.orchestrator or pool.workers[0].name
    worker = next((worker for worker in pool.workers if worker.name == name), None)
    if worker is None:
        raise ConfigError(f"orchestrator: '{name}' is not a worker of the pool ({[w.name for w in pool.workers]})")
    return worker.model


def default_name(pool: PoolConfig, config: RunConfig) -> str:
    """``orchestrator:<policy>:<model>``, the name of an unnamed system."""
    return f"orchestrator:{config.policy}:{orchestrator_model(pool, config)}"
