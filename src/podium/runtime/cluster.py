"""Work spread over a Ray cluster (extra ``podium[ray]``): replicas of one object — an evaluated system, a rollout
source — each built once on a Ray worker from a picklable recipe, whose coroutine methods the driver calls.

The driver keeps everything stateful: which units are done, the results file and its lock, the spend and the
USD cap. Replicas only run units and return their results, so a run on Ray resumes, locks and stops at its
cap exactly as a local one (`podium eval --ray`, GRPO rollouts with ``rollout.ray``).

Addresses: ``local`` starts a Ray instance on this machine (and shuts it down at the end); ``auto`` joins the
cluster this machine belongs to (``ray start --head`` here, or ``RAY_ADDRESS``); ``HOST:6379`` or
``ray://HOST:10001`` join a remote one. On a real cluster, files the configs name (pool YAML, prices, data)
must exist at the same paths on every node (a shared filesystem), and API keys must be set in the nodes'
environment (``ray start`` inherits the shell's); replicas start in the driver's directory where it exists.
"""

import os
from collections.abc import Callable
from typing import Any

from podium.errors import PodiumError
from podium.extras import require_extra


class RemoteError(PodiumError):
    """A replica failed for a reason the local path would also have reported as a failure (or it died)."""


def connect(address: str, *, num_cpus: int | None = None) -> bool:
    """Join (or with ``local`` start) a Ray cluster; returns whether this call started it."""
    ray = require_extra("ray", "ray")
    if ray.is_initialized():
        return False
    if address == "local":
        ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
    else:
        ray.init(address=address, log_to_driver=False)
    return True


class Replica:
    """A Ray actor's body: builds its object once, then runs its coroutine methods. Podium errors come back as
    values, so the driver tells them from bugs."""

    def __init__(self, build: Callable[[], Any], cwd: str) -> None:
        if os.path.isdir(cwd):
            os.chdir(cwd)
        self.target = build()

    async def call(self, method: str, *args: Any, **kwargs: Any) -> tuple[bool, Any]:
        try:
            return True, await getattr(self.target, method)(*args, **kwargs)
        except PodiumError as error:
            return False, f"{type(error).__name__}: {error}"


class Replicas:
    """``count`` replicas, each running up to ``per_replica`` calls at once; a call goes to the least busy one."""

    def __init__(self, build: Callable[[], Any], count: int, *, per_replica: int = 1, cpus: float = 1.0) -> None:
        ray = require_extra("ray", "ray")
        actor = ray.remote(Replica).options(num_cpus=cpus, max_concurrency=per_replica)
        self.ray = ray
        self.handles = [actor.remote(build, os.getcwd()) for _ in range(count)]
        self.busy = [0] * count
        try:  # every replica built (or the reason it could not be) before any call
            ray.get([handle.__ray_ready__.remote() for handle in self.handles])
        except ray.exceptions.RayActorError as error:
            self.stop()
            raise RemoteError(f"a Ray worker could not build its replica: {error}") from error

    async def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """``method(*args, **kwargs)`` on the least busy replica; a Podium error there, or the replica's death, raises
        :class:`RemoteError`."""
        index = min(range(len(self.handles)), key=self.busy.__getitem__)
        self.busy[index] += 1
        try:
            ok, value = await self.handles[index].call.remote(method, *args, **kwargs)
        except self.ray.exceptions.RayActorError as error:
            raise RemoteError(f"a Ray worker died: {error}") from error
        finally:
            self.busy[index] -= 1
        if not ok:
            raise RemoteError(value)
        return value

    def stop(self) -> None:
        """End the replicas."""
        for handle in self.handles:
            self.ray.kill(handle)


def replica_count(concurrency: int) -> tuple[int, int]:
    """How many replicas (one per CPU of the cluster, at most ``concurrency``) and how many calls each runs at once
    so that ``concurrency`` calls run in all."""
    ray = require_extra("ray", "ray")
    cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
    count = max(1, min(concurrency, cpus))
    return count, -(-concurrency // count)


def shutdown(started: bool) -> None:
    """Leave the cluster if this process started it (``connect`` returned True)."""
    if started:
        require_extra("ray", "ray").shutdown()
