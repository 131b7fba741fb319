"""Candidates served in shadow (``podium serve --system A --shadow B``), and promotion.

A shadow system runs beside the live one on the same requests: each new episode of the live system starts one of
the shadow's, on the same task under the same request's limits, whose answer is never returned but recorded in the
traffic directory (role ``shadow``, graded against the request's gold as the live one is). The client waits for the
live answer only. A shadow does not run for a request that hands client tools to the orchestrator (only the client
could answer the shadow's calls), when ``max_shadow`` shadow episodes run already, or when the request's limits do
not fit it; each skip is counted (``podium_shadow_total{model,outcome}``). What a shadow spends is the server's,
not the key's.

Promotion (``POST /v1/models/{model}/promote``, ``podium promote``) makes the shadow the live system: requests that
arrive afterwards are answered by it; episodes already running, or waiting for client tools, finish on the system
they started on, and their records say which.
"""

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict

from podium.core.trajectory import Trajectory
from podium.errors import ConfigError
from podium.graders.grader import Grader
from podium.serve.conversation import Conversation
from podium.serve.http import ApiError
from podium.serve.operations import Metrics
from podium.serve.records import EpisodeFacts, solved
from podium.serve.requests import EpisodeRequest, request_config
from podium.solve.system import Chat, System

log = logging.getLogger(__name__)
Record = Callable[[EpisodeFacts, Trajectory], None]
"""What the server does with an ended shadow episode: record it."""


@dataclass
class Deployment:
    """What answers a served model id: the live system, and the candidate in its shadow, if any."""

    live: System
    shadow: System | None = None

    def show(self, metrics: Metrics, model: str) -> None:
        """Show the versions serving ``model`` in ``metrics``."""
        metrics.serving(model, self.live.version, "live")
        if self.shadow is not None:
            metrics.serving(model, self.shadow.version, "shadow")

    def promote(self, model: str, version: str, metrics: Metrics) -> System:
        """Make the shadow, which must be ``version``, the live system (and ``metrics`` say so); the one it
        replaces."""
        if self.shadow is None:
            raise ApiError(
                409, f"model '{model}' has no shadow to promote (start the server with --shadow)",
                "invalid_request_error", param="model", code="no_shadow",
            )  # fmt: skip
        if self.shadow.version != version:
            raise ApiError(
                409, f"the shadow of model '{model}' is version {self.shadow.version}, not {version}",
                "invalid_request_error", param="version", code="version_mismatch",
            )  # fmt: skip
        replaced, self.live, self.shadow = self.live, self.shadow, None
        metrics.serving(model, version, "shadow", serves=False)
        metrics.serving(model, replaced.version, "live", serves=False)
        self.show(metrics, model)
        return replaced


def deployments(systems: Sequence[System], shadows: Mapping[str, System]) -> dict[str, Deployment]:
    """Served model id (each system's name) → its deployment, with the candidates of ``shadows`` beside them."""
    if not systems:
        raise ConfigError("no orchestrator to serve")
    deployed = {system.name: Deployment(system) for system in systems}
    if len(deployed) != len(systems):
        raise ConfigError(f"served orchestrators need distinct names: {[s.name for s in systems]}")
    for model, shadow in shadows.items():
        if model not in deployed:
            raise ConfigError(f"shadow {shadow.name}: no served model '{model}' to run beside")
        deployed[model].shadow = shadow
    return deployed


class ShadowRuns:
    """The shadow episodes running, at most ``limit`` at once."""

    def __init__(self, limit: int, grader: Grader, metrics: Metrics, record: Record) -> None:
        self.limit = limit
        self.grader = grader
        self.metrics = metrics
        self.record = record
        self.running: set[asyncio.Task[Trajectory]] = set()

    def start(
        self, shadow: System, facts: EpisodeFacts, body: EpisodeRequest, conversation: Conversation, request_id: str
    ) -> None:
        """Start ``shadow`` on the request the live episode of ``facts`` answers, unless it cannot run beside it."""
        model = facts.model
        if body.tools or body.requires_call():
            self.metrics.shadow.labels(self.metrics.labels.model(model), "client_tools").inc()
            return
        if len(self.running) >= self.limit:
            self.metrics.shadow.labels(self.metrics.labels.model(model), "busy").inc()
            return
        try:
            config = request_config(shadow.config, shadow.executor().budget, body, None)
        except (ConfigError, ApiError) as error:
            log.warning("shadow %s skipped for %s: %s", shadow.name, request_id, error)
            self.metrics.shadow.labels(self.metrics.labels.model(model), "refused").inc()
            return
        shadowed = facts.for_system(shadow, config)
        chat = Chat(
            history=conversation.history, instructions=conversation.instructions, answer_schema=body.answer_schema()
        )
        metadata = {**(body.metadata or {}), "request_id": request_id, "served_model": model, "role": "shadow"}
        instruction = body.response_format.instruction() if body.response_format else None
        task = asyncio.create_task(
            solved(shadowed, self.grader, request_id, config, chat, seed=body.podium.seed, metadata=metadata,
                   instruction=instruction)
        )  # fmt: skip
        self.running.add(task)
        self.metrics.shadow.labels(self.metrics.labels.model(model), "started").inc()
        task.add_done_callback(lambda done: self._ended(done, shadowed))

    def _ended(self, task: "asyncio.Task[Trajectory]", facts: EpisodeFacts) -> None:
        self.running.discard(task)
        model = self.metrics.labels.model(facts.model)
        if task.cancelled() or task.exception() is not None:
            log.warning(
                "shadow episode of %s failed: %s", facts.response_ids, None if task.cancelled() else task.exception()
            )
            self.metrics.shadow.labels(model, "failed").inc()
            return
        self.record(facts, task.result())


def model_object(name: str, deployment: Deployment) -> dict[str, Any]:
    """A served orchestrator as OpenAI's ``model`` object, with the version serving it and, in ``podium``, its
    system and the candidate in its shadow."""
    shadow = deployment.shadow
    served = {
        "system": deployment.live.name,
        "version": deployment.live.version,
        "shadow": None if shadow is None else {"system": shadow.name, "version": shadow.version},
    }
    return {
        "id": name, "object": "model", "created": 0, "owned_by": "podium", "version": deployment.live.version,
        "podium": served,
    }  # fmt: skip


class Promotion(BaseModel):
    """The body of ``POST /v1/models/{model}/promote``."""

    model_config = ConfigDict(extra="forbid")
    version: str
    """The version of the shadow to promote (what the gate compared)."""
