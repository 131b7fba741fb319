"""A system whose samples are solved on Ray workers (`podium eval --ray`): each replica builds the system from its
config; the runner, its lock, its resume and its USD cap stay in the driver, and answers are graded there."""

from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

from podium.core.answers import VerifierKind
from podium.core.trajectory import Trajectory
from podium.costs.prices import PriceCatalog
from podium.datasets.items import BenchmarkItem
from podium.errors import ConfigError
from podium.evaluate.system_config import EvalSystemConfig, build_system, system_config_from_dict
from podium.evaluate.systems import ItemSolver, attempt_bound, attempt_seed
from podium.runtime.cluster import Replicas, connect, replica_count, shutdown


def build_from_config(data: dict[str, Any]) -> ItemSolver:
    """The system a config dump describes (what a replica builds)."""
    return build_system(system_config_from_dict(data))


class RaySystem:
    """``local`` (built in the driver, for its name and what it supports) solved by replicas on the cluster."""

    def __init__(self, local: ItemSolver, config: dict[str, Any], concurrency: int) -> None:
        self.local = local
        self.name = local.name
        count, per_replica = replica_count(concurrency)
        self.replicas = Replicas(partial(build_from_config, config), count, per_replica=per_replica)

    def supports(self, verifier: VerifierKind) -> bool:
        return self.local.supports(verifier)

    def cost_bound(self, item: BenchmarkItem) -> float | None:
        return attempt_bound(self.local, item)

    def episode_seed(self, item_id: str, sample: int) -> int | None:
        return attempt_seed(self.local, item_id, sample)

    async def solve(self, item: BenchmarkItem, *, seed: int | None = None) -> Trajectory:
        trajectory: Trajectory = await self.replicas.call("solve", item, **({} if seed is None else {"seed": seed}))
        return trajectory

    def stop(self) -> None:
        self.replicas.stop()


@contextmanager
def solving_system(
    config: EvalSystemConfig, ray: str | None, concurrency: int, prices: PriceCatalog | None = None
) -> Iterator[ItemSolver]:
    """The system ``config`` describes, built here (its pool priced by ``prices`` merged over its own sheet); with
    a Ray address (``local``, ``auto``, ``HOST:PORT``) its samples are solved by replicas on that cluster, stopped
    afterwards (and a cluster started here shut down)."""
    built = build_system(config)
    if prices is not None:
        if ray is not None:
            raise ConfigError("--prices is applied where the system is built; it does not reach Ray replicas")
        pool = getattr(built, "pool", None)
        if pool is None:
            raise ConfigError(f"--prices reprices a system's pool; {config.kind} systems have none")
        built.pool = pool.repriced(prices)  # type: ignore[attr-defined]
    if ray is None:
        yield built
        return
    started = connect(ray)
    try:
        remote = RaySystem(built, config.model_dump(mode="json"), concurrency)
        try:
            yield remote
        finally:
            remote.stop()
    finally:
        shutdown(started)
