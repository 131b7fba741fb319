"""An orchestrator system: a name, a pool and how its episodes run. ``podium eval --system`` (kinds
``orchestrator`` and ``tools_model``, which add what evaluation needs) and ``podium serve`` read this part.

Example::

    name: qwen3-8b-parallel
    policy: parallel
    max_usd: 0.50
    orchestrator: qwen3-8b
    pool: pool.yaml          # a pool YAML path, an inline pool, or omitted for the embedded offline pool
"""

from podium.errors import ConfigError
from podium.pool.config import PoolConfig
from podium.pool.pool import Pool, build_pool, embedded_pool_config, load_pool_config
from podium.runtime.config import RunConfig
from podium.runtime.executor import Executor


class SystemSpec(RunConfig):
    """An orchestrator over a pool: every field of the run config, a pool and a name."""

    name: str | None = None
    """Name in results, reports and served model ids; default ``orchestrator:<policy>:<model>``."""
    pool: str | PoolConfig | None = None
    """Pool YAML path (relative to the current directory) or an inline pool; default: the embedded offline pool."""

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


class OrchestratorSystem:
    """A built orchestrator system: its pool, built once, and a fresh :class:`Executor` per episode."""

    def __init__(self, name: str, pool: Pool, config: RunConfig) -> None:
        self.name = name
        self.pool = pool
        self.config = config
        self.executor()  # unknown orchestrator or summarizer names fail now

    @classmethod
    def build(cls, config: SystemSpec) -> "OrchestratorSystem":
        """Build the pool and check the run config against it."""
        chosen = config.pool_config()
        settings = config.run_config()
        return cls(config.name or default_name(chosen, settings), build_pool(chosen), settings)

    def executor(self, config: RunConfig | None = None) -> Executor:
        """A fresh executor over the pool (episodes never share state), under ``config`` if given."""
        return Executor(self.pool, config or self.config)
