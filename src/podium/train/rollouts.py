"""Where GRPO rollouts come from: :meth:`podium.solve.system.System.solve` (the code path of inference, evaluation
and serving) driving the policy being trained, with ToolOrchestra's per-instance knobs (random tool subset, random
price sheet), in this process or on Ray workers (:class:`RayRollouts`). A rollout solves its task as evaluation and
data collection do (the item's question with its answer format; the answer extracted for its verifier), so the
policy is trained on the prompts it is evaluated on. The source is injectable: anything that maps ``(task, seed,
preference)`` to a trajectory will do (tests script them)."""

import inspect
import random
from collections.abc import Awaitable, Sequence
from functools import partial
from typing import Any, Protocol

from podium.backends.base import FREE, ChatBackend
from podium.backends.factory import HttpBackendSpec, build_backend
from podium.backends.local import LocalBackend, LocalBackendConfig
from podium.core.preference import Preference
from podium.core.record import Record
from podium.core.trajectory import Trajectory
from podium.costs.prices import PriceCatalog
from podium.datasets.items import BenchmarkItem
from podium.errors import ConfigError
from podium.pool.pool import Pool, build_pool
from podium.runtime import RunConfig
from podium.runtime.cluster import Replicas, connect, replica_count, shutdown
from podium.solve.runner import BatchRunner, MemoryLog
from podium.solve.system import System
from podium.train.config import RolloutConfig

Task = BenchmarkItem | str
"""What a rollout solves: an RL task (an item with its gold and verifier) or a question as written."""


class RolloutSource(Protocol):
    """Produces one rollout: a trajectory of the current policy on ``task``. ``seed`` names the instance (its tool
    subset, price sheet and blind labels): the rollouts of one GRPO group share it, and differ only through
    sampling. Under ``rollout.price_contrast`` it is also given ``sheet=k``: price the instance by sheet k."""

    def __call__(
        self, task: Task, seed: int, preference: Preference | None = None
    ) -> Trajectory | Awaitable[Trajectory]: ...


class Placed(Record):
    """A rollout at its place in its generation batch."""

    index: int
    trajectory: Trajectory


async def collect(
    source: RolloutSource,
    tasks: Sequence[Task],
    seeds: Sequence[int],
    preferences: Sequence[Preference | None],
    concurrency: int,
) -> list[Trajectory]:
    """Every rollout of a generation batch, at most ``concurrency`` at once (a :class:`BatchRunner` without a
    cap, keeping them in memory), in order."""
    runs = list(zip(tasks, seeds, preferences, strict=True))

    async def one(index: int) -> Placed:
        result = source(*runs[index])
        return Placed(index=index, trajectory=await result if inspect.isawaitable(result) else result)

    runner = BatchRunner(concurrency=concurrency, progress=False)
    log: MemoryLog[Placed] = MemoryLog(lambda placed: placed.index)
    placed = await runner.run("rollouts", range(len(runs)), int, one, log, cost=lambda p: p.trajectory.usage.usd)
    return [rollout.trajectory for rollout in placed]


def rollout_pool(config: RolloutConfig) -> Pool:
    """The pool rollouts run against."""
    return build_pool(config.pool_config())


def policy_backend(config: RolloutConfig, model: Any, tokenizer: Any, name: str, served_model: str) -> ChatBackend:
    """The orchestrator's backend: the live in-memory model, or the vLLM server the trainer keeps in sync."""
    if config.backend == "local":
        return LocalBackend.from_loaded(model, tokenizer, LocalBackendConfig(model=name))
    spec = HttpBackendSpec(model=served_model, base_url=config.vllm_base_url.rstrip("/") + "/v1", price=FREE)
    return build_backend(spec)


class ExecutorRollouts:
    """Rollouts through :meth:`podium.solve.system.System.solve`; each instance may get its own tools and prices."""

    def __init__(
        self,
        pool: Pool,
        orchestrator: ChatBackend | None,
        config: RolloutConfig,
        price_sheets: Sequence[PriceCatalog] = (),
    ) -> None:
        # Checked at construction against the orchestrator given; under verl none is given: each episode brings one.
        self.system = System.build(
            config.model_copy(update={"name": config.name or "rollouts"}),
            pool=pool,
            source="rollout",
            orchestrator=orchestrator,
            orchestrator_per_episode=orchestrator is None,
        )
        self.orchestrator = orchestrator
        self.config = config
        self.price_sheets = list(price_sheets)
        self.allowed = None if config.allow is None else list(config.allow)

    @property
    def pool(self) -> Pool:
        return self.system.pool

    @classmethod
    def from_config(cls, config: RolloutConfig, orchestrator: ChatBackend | None = None) -> "ExecutorRollouts":
        """The pool and price sheets named by ``config``."""
        sheets = [PriceCatalog.from_file(path) for path in config.price_sheets]
        rollouts = cls(rollout_pool(config), orchestrator, config, sheets)
        if config.pool is None and config.allow is None:
            rollouts.allowed = rollouts.pool.registry.names()  # the default pool's worker is not on offer
        return rollouts

    def instance(
        self, seed: int, orchestrator: ChatBackend | None = None, sheet: int | None = None
    ) -> tuple[Pool, ChatBackend, RunConfig]:
        """This instance's pool (repriced by price sheet number ``sheet``, or by a random one), orchestrator
        (priced by it) and run config (its allowed tools)."""
        rng = random.Random(seed)
        pool, orchestrator = self.pool, orchestrator or self.orchestrator
        if orchestrator is None:
            raise ConfigError("no orchestrator backend: give one to ExecutorRollouts or to the call")
        if sheet is not None and not 0 <= sheet < len(self.price_sheets):
            raise ConfigError(f"price sheet {sheet} asked for; the rollouts have {len(self.price_sheets)}")
        if self.price_sheets:
            drawn = rng.choice(self.price_sheets)  # drawn even when given: the tool subset's draw stays the same
            prices = drawn if sheet is None else self.price_sheets[sheet]
            pool = pool.repriced(prices)
            orchestrator = orchestrator.repriced(prices.models.get(orchestrator.model, FREE))
        allow = self.allowed
        if self.config.tool_subset:
            names = sorted(self.allowed if self.allowed is not None else pool.registry.names())
            allow = sorted(rng.sample(names, rng.randint(1, len(names))))
        return pool, orchestrator, self.system.config.model_copy(update={"allow": allow})

    async def __call__(
        self,
        task: Task,
        seed: int,
        preference: Preference | None = None,
        sheet: int | None = None,
        *,
        orchestrator: ChatBackend | None = None,
    ) -> Trajectory:
        """One episode, priced by price sheet number ``sheet`` (None: a random one); ``orchestrator`` replaces
        the default backend for it (verl binds each rollout to its own server session)."""
        pool, orchestrator, settings = self.instance(seed, orchestrator, sheet)
        return await self.system.solve(
            task, seed=seed, preference=preference, settings=settings, pool=pool, orchestrator=orchestrator
        )

    async def explore(
        self, task: Task, seed: int, preference: Preference | None = None, sheet: int | None = None
    ) -> list[Trajectory]:
        """Every path of the episode's action tree (:mod:`podium.runtime.explore`), each turn scored by the
        current policy: the group of the ``expected`` advantage."""
        pool, orchestrator, settings = self.instance(seed, sheet=sheet)
        return await self.system.explore(
            task, seed=seed, preference=preference, settings=settings, pool=pool, scorer=orchestrator
        )


def served_policy_rollouts(config: RolloutConfig, served_model: str) -> ExecutorRollouts:
    """Rollouts whose orchestrator is the policy on its vLLM server (what a Ray replica builds)."""
    return ExecutorRollouts.from_config(config, policy_backend(config, None, None, served_model, served_model))


class RayRollouts:
    """Rollouts on Ray workers (``rollout.ray``): replicas of :class:`ExecutorRollouts` that reach the policy on
    its vLLM server, which the trainer keeps in sync; ``rollout.concurrency`` rollouts run at once in all."""

    def __init__(self, config: RolloutConfig, served_model: str) -> None:
        if config.backend != "vllm" or config.ray is None:
            raise ConfigError("rollouts on Ray need rollout.ray and rollout.backend: vllm (a policy workers reach)")
        self.started = connect(config.ray)
        count, per_replica = replica_count(config.concurrency)
        self.replicas = Replicas(partial(served_policy_rollouts, config, served_model), count, per_replica=per_replica)

    async def __call__(
        self, task: Task, seed: int, preference: Preference | None = None, sheet: int | None = None
    ) -> Trajectory:
        trajectory: Trajectory = await self.replicas.call("__call__", task, seed, preference, sheet)
        return trajectory

    def stop(self) -> None:
        """End the replicas (and a Ray instance started for them)."""
        self.replicas.stop()
        shutdown(self.started)
