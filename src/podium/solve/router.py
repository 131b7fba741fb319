"""Router systems (``kind: router``): a router fitted on a recording's train split, deciding which worker of a pool
answers, as a system like any other — evaluated with ``podium eval``, run with ``podium run --system``, served with
``podium serve``, checked with ``podium check``. It runs as the orchestrator of the ``escalate`` policy
(:class:`~podium.routers.backend.RouterBackend`), so its episodes are budgeted and traced as an orchestrator's.

:func:`load_system` builds the system of any file that ``podium run`` and ``podium serve`` take.

Example (a question router over the recorded pool's live workers)::

    kind: router
    name: knn-router
    router: knn
    recording: runs/mine/recording
    pool: pool.yaml
    cost_weight: 50        # accuracy points one USD is worth: 0 asks the worker most likely right

The router is fitted once and saved (``fitted``, default ``RECORDING/routers/NAME.npz``); it is fitted again when the
recording, the router's settings or the price sheet changed since (the file records what it was fitted on).
"""

import hashlib
import json
from pathlib import Path
from typing import Any, ClassVar, Literal, Self

from pydantic import Field, PositiveFloat, model_validator

from podium.config import MAX_USD_SPLIT, read_structured_file
from podium.costs.prices import PriceCatalog
from podium.errors import ConfigError
from podium.pool.config import PoolConfig
from podium.recording import OUTCOMES, TASKS, Recording, read_manifest
from podium.routers.backend import RouterBackend
from podium.routers.data import routing_set
from podium.routers.fit import fit_router
from podium.routers.models import CASCADES, FittedRouter, RouterKind, load_router
from podium.solve.config import NamedSystem, SystemConfig
from podium.solve.system import System


class RouterSystemConfig(NamedSystem):
    """A fitted router choosing the worker that answers each task."""

    moved: ClassVar[dict[str, str]] = MAX_USD_SPLIT

    kind: Literal["router"] = "router"
    """Selects this system."""
    router: RouterKind
    """``knn``, ``logreg`` or ``mf`` (from the question), ``cascade`` or ``cascade_checks`` (from the replies)."""
    recording: str
    """The recording (``podium routing record``) whose train split the router is fitted on."""
    pool: str | PoolConfig | None = None
    """The workers it routes to (a pool YAML path or an inline pool); default: the recording's workers, replayed.
    It must hold every worker the router was fitted on, under the same names."""
    replay: str | None = None
    """A recording whose workers answer instead of being called (evaluating the router offline), as in an
    orchestrator system."""
    prices: str | None = None
    """A price sheet the router's worker costs are computed under (default: the prices they were recorded at)."""
    cost_weight: float = 0.0
    """A question router asks the worker of the highest predicted accuracy less ``cost_weight`` times its mean USD
    per task: the accuracy one USD is worth (0: the worker most likely right; large: the cheapest)."""
    threshold: float | list[float] = 0.5
    """A cascade escalates from a worker where the probability that its reply is wrong is above this (one value,
    or one per worker but the last)."""
    order: list[str] | None = None
    """A cascade's workers in the order asked; default: from the cheapest to the dearest on the train split."""
    params: dict[str, int | float] = Field(default_factory=dict)
    """The router's own settings (knn ``k``; logreg ``l2``; mf ``dimension``, ``steps``, ``learning_rate``,
    ``l2``, ``seed``; cascades ``l2``)."""
    fitted: str | None = None
    """Where the fitted router is saved and loaded; default ``RECORDING/routers/NAME.npz``."""
    max_episode_usd: PositiveFloat | None = None
    """Most US dollars per episode (calls refused beforehand when they could cross it)."""
    max_seconds: PositiveFloat | None = None
    """Wall-clock deadline of an episode."""

    @model_validator(mode="after")
    def _settings(self) -> Self:
        if isinstance(self.threshold, list) and self.router not in CASCADES:
            raise ValueError("threshold: one value per worker is a cascade's setting")
        return self

    def system_config(self) -> SystemConfig:
        """The escalate-policy system it runs as, over its pool (with the ``standard_reasoner`` role, through which
        the policy asks a worker); its orchestrator is the router, set at :meth:`build`."""
        chosen = SystemConfig(pool=self.pool if self.pool is not None else replay_pool(self.recording),
                              replay=self.replay).pool_config()  # fmt: skip
        if "standard_reasoner" not in chosen.roles:
            chosen = chosen.model_copy(update={"roles": [*chosen.roles, "standard_reasoner"]})
        return SystemConfig(
            name=self.name or f"router:{self.router}",
            pool=chosen,
            policy="escalate",
            max_turns=len(chosen.workers) + 1,
            max_episode_usd=self.max_episode_usd,
            max_seconds=self.max_seconds,
        )

    def build(self, source: str | None = None) -> System:
        """The router system, the router fitted (or loaded, where it was fitted on the same data) first."""
        config = self.system_config()
        pool = config.pool_config()
        where = source or f"router '{config.name}'"
        router = self.fitted_router()
        missing = sorted(set(router.workers) - {worker.name for worker in pool.workers})
        if missing:
            raise ConfigError(f"{where}: pool: the router was fitted on workers {router.workers}; it lacks {missing}")
        if pool.blind.enabled:
            raise ConfigError(f"{where}: pool: a router picks workers by name; blind labels hide them")
        backend = RouterBackend(router, cost_weight=self.cost_weight, threshold=self.threshold)
        # the router's settings and the data it was fitted on decide its episodes as an orchestrator's weights do
        parts = [self.model_dump(mode="json", exclude={"pool", "name"}), self.fingerprint()]
        return System.build(config, source=where, orchestrator=backend, version_parts=parts)

    def fitted_router(self) -> FittedRouter:
        """The router fitted on the recording's train split, from ``fitted`` when it was fitted on the same data."""
        path = Path(self.fitted or Path(self.recording) / "routers" / f"{self.name or self.router}.npz")
        fingerprint = self.fingerprint()
        if path.is_file():
            router = load_router(path)
            if router.params.get("fingerprint") == fingerprint:
                return router
        sheet = PriceCatalog.from_file(self.prices) if self.prices is not None else None
        data = routing_set(Recording.load(self.recording), sheet)
        train = data.split("train")
        router = fit_router(self.router, train, list(data.workers), data.answer_kind, order=self.order,
                            params=dict(self.params))  # fmt: skip
        router.params["fingerprint"] = fingerprint
        router.save(path)
        return router

    def fingerprint(self) -> str:
        """What the fitted router depends on: the recording's tasks and outcomes, its settings, the price sheet."""
        digest = hashlib.sha256()
        for file in (Path(self.recording) / TASKS, Path(self.recording) / OUTCOMES):
            digest.update(file.read_bytes() if file.is_file() else b"")
        if self.prices is not None:
            digest.update(Path(self.prices).read_bytes())
        digest.update(json.dumps([self.router, self.order, self.params], sort_keys=True).encode())
        return digest.hexdigest()


def replay_pool(recording: str) -> PoolConfig:
    """A pool of the recording's workers, each answering from it (at its recorded price)."""
    workers: list[dict[str, Any]] = [
        {"name": worker.name, "backend": "replay", "model": worker.model, "path": recording}
        for worker in read_manifest(recording).workers
    ]
    return PoolConfig.from_dict({"workers": workers, "tools": [], "workers_as_tools": False},
                                source=f"the workers of {recording}")  # fmt: skip


def load_system(path: str | Path) -> System:
    """The system a file describes, built: an orchestrator (``kind: orchestrator``, the default) or a router
    (``kind: router``); what ``podium run --system`` and ``podium serve --system`` read."""
    data = read_structured_file(path)
    if isinstance(data, dict) and data.get("kind") == "router":
        return RouterSystemConfig.from_dict(data, source=str(path)).build(source=str(path))
    return System.build(SystemConfig.from_dict(data, source=str(path)), source=str(path))
