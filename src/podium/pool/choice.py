"""The pool a command works with and what it changes of it (a price sheet, sandbox limits, running code without
isolation), and the worker it picks: one definition of these settings for every command that opens a pool
(``podium run``, ``ask``, ``tools``, ``env run``, ``mcp serve``, ``serve-model``), each a field, a flag and a
``--config`` key."""

from pydantic import NonNegativeFloat, PositiveInt

from podium.backends.base import ChatBackend
from podium.config import Config
from podium.costs.prices import PriceCatalog
from podium.errors import ConfigError
from podium.pool.config import PoolConfig
from podium.pool.pool import Pool, build_pool, resolve_pool_config
from podium.sandbox import SandboxConfig


class PoolOverrides(Config):
    """What a command changes of the pool it opens."""

    prices: str | None = None
    """Price sheet (YAML/JSON) merged over the pool's prices and Podium's sheet."""
    sandbox_config: str | None = None
    """Sandbox limits (a SandboxConfig YAML/JSON file) in place of the pool's."""
    allow_unisolated: bool = False
    """Run code without isolation if bubblewrap is unavailable (unsafe)."""

    def overridden(self, pool: PoolConfig) -> PoolConfig:
        """``pool`` with the sandbox these settings ask for."""
        sandbox = SandboxConfig.from_file(self.sandbox_config) if self.sandbox_config is not None else pool.sandbox
        if self.allow_unisolated:
            sandbox = sandbox.model_copy(update={"allow_unisolated": True})
        return pool.model_copy(update={"sandbox": sandbox})

    def price_sheet(self) -> PriceCatalog | None:
        """The price sheet given, if any."""
        return PriceCatalog.from_file(self.prices) if self.prices is not None else None

    def open(self, pool: PoolConfig) -> Pool:
        """``pool`` built with these overrides."""
        return build_pool(self.overridden(pool), self.price_sheet())


class PoolChoice(PoolOverrides):
    """The pool a command opens, and what it changes of it."""

    pool: str | PoolConfig | None = None
    """Pool YAML (PoolConfig); default: the embedded offline pool."""

    def open_pool(self) -> Pool:
        """The pool chosen, with the overrides."""
        return self.open(resolve_pool_config(self.pool))


class WorkerChoice(PoolChoice):
    """One worker of the pool."""

    worker: str | None = None
    """Worker of the pool; default: its first."""

    def backend(self, pool: Pool, flag: str = "--worker") -> ChatBackend:
        """The chosen worker's backend in ``pool`` (an unknown one named by ``flag``)."""
        name = self.worker or pool.config.workers[0].name
        if name not in pool.backends:
            raise ConfigError(f"{flag}: no worker '{name}' (workers: {', '.join(pool.backends)})")
        return pool.backends[name]


class AskConfig(WorkerChoice):
    """One worker answers one question, no tools (the no-tools baseline)."""

    max_tokens: PositiveInt = 256
    """Completion budget, in tokens."""
    temperature: NonNegativeFloat = 0.0
    """Sampling temperature; 0 is greedy."""


class ToolCallConfig(PoolChoice):
    """One call of a pool tool."""

    args: str = "{}"
    """Arguments as a JSON object."""
