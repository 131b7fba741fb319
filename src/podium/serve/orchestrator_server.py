"""``podium serve``: orchestrators as OpenAI-compatible models. Each ``POST /v1/chat/completions`` runs one whole
episode through :meth:`podium.runtime.Executor.run` (the code path of ``podium run``, evaluation and rollouts);
``GET /v1/models`` lists the served orchestrators. Requests and responses: :mod:`podium.serve.episodes`.

Streaming (``stream: true``) sends Server-Sent Events of ``chat.completion.chunk`` objects: first the
assistant role with a ``podium.event`` of kind ``started``, then progress events (``running``, with the
seconds elapsed, every ``heartbeat_s`` while the episode works), the answer as one content delta, a chunk
with ``finish_reason`` and the ``podium`` summary, a usage chunk when ``stream_options.include_usage`` is
set, and ``data: [DONE]``. An episode that fails sends an ``error`` event instead of the answer.

At most ``max_concurrent`` episodes run at once; a request beyond them is answered 429 at once. With an API
key configured, requests without ``Authorization: Bearer <key>`` get 401. A streamed episode whose client
goes away is cancelled.
"""

import asyncio
import hmac
import json
import os
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.responses import StreamingResponse
from pydantic import PositiveFloat, PositiveInt

from podium.config import Config, read_structured_file
from podium.core.budget import StopReason
from podium.core.trajectory import Trajectory, write_trajectories
from podium.errors import ConfigError
from podium.runtime.executor import Executor
from podium.runtime.system import OrchestratorSystem, SystemSpec
from podium.serve.episodes import EpisodeRequest, chunk, completion_body, finish_reason, podium_body, request_config
from podium.serve.episodes import usage_body as usage_of
from podium.serve.http import ApiError, invalid_request, openai_app

EVAL_ONLY_FIELDS = ("kind", "user")
"""Fields of an ``orchestrator`` system file of ``podium eval`` that serving has no use for."""


class ServeConfig(Config):
    """How ``podium serve`` admits and records requests."""

    max_concurrent: PositiveInt = 4
    """Episodes run at once; a request beyond them is answered 429."""
    api_key_env: str | None = None
    """Environment variable holding the key clients must send as ``Authorization: Bearer <key>``; unset: no
    key is needed."""
    trace: str | None = None
    """Append every finished trajectory to this JSONL file."""
    heartbeat_s: PositiveFloat = 2.0
    """Seconds between progress events of a streamed episode."""


def load_system_spec(path: str | Path) -> SystemSpec:
    """A served orchestrator from a file: a :class:`SystemSpec`, or an ``orchestrator`` system file of
    ``podium eval`` (its ``kind`` and simulated ``user`` are then ignored)."""
    data = read_structured_file(path)
    if isinstance(data, dict):
        if data.get("kind", "orchestrator") != "orchestrator":
            raise ConfigError(f"{path}: serving needs an orchestrator system, not kind '{data['kind']}'")
        data = {key: value for key, value in data.items() if key not in EVAL_ONLY_FIELDS}
    return SystemSpec.from_dict(data, source=str(path))


class EpisodeServer:
    """The served orchestrators, the admission limit, the key and the trace."""

    def __init__(self, systems: Sequence[OrchestratorSystem], config: ServeConfig) -> None:
        if not systems:
            raise ConfigError("no orchestrator to serve")
        self.systems = {system.name: system for system in systems}
        if len(self.systems) != len(systems):
            raise ConfigError(f"served orchestrators need distinct names: {[s.name for s in systems]}")
        self.config = config
        self.api_key = None
        if config.api_key_env is not None:
            self.api_key = os.environ.get(config.api_key_env)
            if not self.api_key:
                raise ConfigError(f"api_key_env: the environment variable {config.api_key_env} is not set")
        self.running = 0

    def authorize(self, request: Request) -> None:
        """Refuse a request without the configured key (401)."""
        if self.api_key is None:
            return
        sent = request.headers.get("authorization", "")
        scheme, _, key = sent.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(key.strip().encode(), self.api_key.encode()):
            raise ApiError(401, "missing or wrong API key", "authentication_error", code="invalid_api_key")

    def models(self) -> dict[str, Any]:
        return {
            "object": "list",
            "data": [{"id": name, "object": "model", "created": 0, "owned_by": "podium"} for name in self.systems],
        }

    def executor(self, request: EpisodeRequest) -> tuple[OrchestratorSystem, Executor]:
        """The requested orchestrator (404 if unknown) and an executor under the request's limits."""
        system = self.systems.get(request.model)
        if system is None:
            raise ApiError(
                404, f"model '{request.model}' is not served here; served: {sorted(self.systems)}",
                "not_found_error", param="model", code="model_not_found",
            )  # fmt: skip
        try:
            config = request_config(system.config, system.executor().budget, request.podium)
            return system, system.executor(config)
        except ConfigError as error:
            raise invalid_request(str(error), "podium") from error

    def admit(self, episode: asyncio.Task[Trajectory]) -> None:
        """Count ``episode`` against the limit until it ends, however it ends."""
        self.running += 1

        def release(_: asyncio.Task[Trajectory]) -> None:
            self.running -= 1

        episode.add_done_callback(release)

    def check_capacity(self) -> None:
        if self.running >= self.config.max_concurrent:
            error = ApiError(
                429, f"{self.running} episodes are running, the most this server runs at once; retry later",
                "rate_limit_error", code="rate_limit_exceeded",
            )  # fmt: skip
            error.headers["Retry-After"] = "1"
            raise error

    async def episode(self, executor: Executor, request: EpisodeRequest, request_id: str) -> Trajectory:
        """Run the request's episode; a bad name in its options is a 400, a failed orchestrator a 502."""
        task, instructions = request.task()
        try:
            trajectory = await executor.run(
                task,
                preference=request.preference(),
                seed=request.podium.seed,
                instructions=instructions,
                metadata={"request_id": request_id, "served_model": request.model},
            )
        except ConfigError as error:
            raise invalid_request(str(error), "podium") from error
        if self.config.trace is not None:
            write_trajectories(self.config.trace, [trajectory])
        if trajectory.stop_reason is StopReason.ERROR:
            reason = trajectory.metadata.get("error", "the orchestrator's backend failed")
            raise ApiError(502, f"{reason} (trajectory {trajectory.id})", "backend_error", code="orchestrator_failed")
        return trajectory

    async def complete(self, request: EpisodeRequest) -> dict[str, Any] | StreamingResponse:
        system, executor = self.executor(request)
        request.task()  # a request without a task is refused before it takes a slot
        self.check_capacity()
        request_id = f"chatcmpl-{uuid.uuid4().hex}"
        episode = asyncio.create_task(self.episode(executor, request, request_id))
        self.admit(episode)
        if request.stream:
            return StreamingResponse(self.stream(episode, request, request_id), media_type="text/event-stream")
        return completion_body(request_id, system.name, await episode, request.podium)

    async def stream(
        self, episode: asyncio.Task[Trajectory], request: EpisodeRequest, request_id: str
    ) -> AsyncIterator[str]:
        """The episode as Server-Sent Events; leaving early (the client went away) cancels it."""
        model, started = request.model, time.perf_counter()
        try:
            yield sse(chunk(request_id, model, {"role": "assistant", "content": ""}, podium={"event": "started"}))
            while not episode.done():
                await asyncio.wait({episode}, timeout=self.config.heartbeat_s)
                if not episode.done():
                    progress = {"event": "running", "elapsed_s": round(time.perf_counter() - started, 1)}
                    yield sse(chunk(request_id, model, {}, podium=progress))
            try:
                trajectory = episode.result()
            except ApiError as error:
                yield sse(error.body())
                return
            except Exception as error:  # a bug: the client still gets an OpenAI-style error event
                yield sse(ApiError(500, f"{type(error).__name__}: {error}", "server_error").body())
                return
            for event in final_chunks(request_id, model, trajectory, request):
                yield sse(event)
            yield "data: [DONE]\n\n"
        finally:
            episode.cancel()


def final_chunks(request_id: str, model: str, trajectory: Trajectory, request: EpisodeRequest) -> list[dict[str, Any]]:
    """The answer, the finish chunk with the ``podium`` summary, and the usage chunk if it was asked for."""
    events = []
    if trajectory.answer:
        events.append(chunk(request_id, model, {"content": trajectory.answer}))
    summary = podium_body(trajectory, with_trajectory=request.podium.return_trajectory)
    events.append(chunk(request_id, model, {}, finish_reason=finish_reason(trajectory), podium=summary))
    if request.stream_options is not None and request.stream_options.include_usage:
        usage_chunk = chunk(request_id, model, {}, usage=usage_of(trajectory))
        usage_chunk["choices"] = []
        events.append(usage_chunk)
    return events


def sse(data: dict[str, Any]) -> str:
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n"


def create_orchestrator_app(systems: Sequence[OrchestratorSystem], config: ServeConfig | None = None) -> FastAPI:
    """The HTTP application serving ``systems`` (their names are the model ids)."""
    server = EpisodeServer(systems, config or ServeConfig())
    app = openai_app("Podium orchestrator server")
    authorized = [Depends(server.authorize)]

    @app.get("/v1/models", dependencies=authorized)
    async def models() -> dict[str, Any]:
        return server.models()

    @app.post("/v1/chat/completions", dependencies=authorized, response_model=None)
    async def chat_completions(request: EpisodeRequest) -> dict[str, Any] | StreamingResponse:
        return await server.complete(request)

    return app
