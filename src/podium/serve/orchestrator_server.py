"""``podium serve``: orchestrators as OpenAI-compatible models. Each conversation runs as an episode through
:meth:`podium.solve.system.System.solve` (the code path of evaluation, data collection and rollouts); ``GET /v1/models``
lists the served orchestrators and ``GET /metrics`` reports in Prometheus text format.

Requests (:mod:`podium.serve.requests`), how messages become the episode's context
(:mod:`podium.serve.conversation`), client tools (:mod:`podium.serve.sessions`), responses and streams
(:mod:`podium.serve.legs`), the queue (:mod:`podium.serve.admission`), API keys and their daily USD limits
(:mod:`podium.serve.accounts`), metrics and request logs (:mod:`podium.serve.operations`).

A client that goes away while its response is being worked on cancels the episode: its calls are cancelled, what
it spent (and the bounds of the work cut short) is charged to its key, and the trajectory is traced with stop
reason ``cancelled``.
"""

import asyncio
import json
import time
import uuid
from collections.abc import Coroutine, Sequence
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.responses import Response, StreamingResponse
from pydantic import Field, NonNegativeInt, PositiveFloat, PositiveInt, ValidationError

from podium.config import Config
from podium.core.trajectory import Trajectory, write_trajectories
from podium.errors import ConfigError
from podium.runtime.config import RunConfig
from podium.serve.accounts import Accounts, ApiKey
from podium.serve.admission import Admission
from podium.serve.conversation import Conversation, read_conversation
from podium.serve.http import DEFAULT_MAX_BODY_BYTES, ApiError, describe_errors, invalid_request, openai_app
from podium.serve.legs import LegRequest, collect, json_text, stream
from podium.serve.operations import Metrics, RequestLog, episode_record
from podium.serve.requests import EpisodeRequest, request_config
from podium.serve.sessions import ClientCalls, ServedEpisode
from podium.solve.system import Chat, System

RESERVED_TOOL_NAMES = ("final_answer",)
"""Names a client tool may not take: the parallel policy's summarizer answers to it."""


class ServeConfig(Config):
    """How ``podium serve`` admits, accounts for and records requests."""

    max_concurrent: PositiveInt = 4
    """Responses worked on at once; more requests wait in the queue."""
    max_queued: NonNegativeInt = 64
    """Requests that may wait for a slot; a request beyond them is answered 429 with Retry-After."""
    queue_timeout_s: PositiveFloat = 60.0
    """Longest wait in the queue; a request that waited this long is answered 503 with Retry-After."""
    client_tool_timeout_s: PositiveFloat = 300.0
    """How long an episode waits for the results of the client calls it handed out before it is cancelled."""
    max_request_bytes: PositiveInt = DEFAULT_MAX_BODY_BYTES
    """Largest request body read; a larger one is answered 413."""
    api_key_env: str | None = None
    """Environment variable holding one key clients must send as ``Authorization: Bearer <key>`` (named
    ``default``, no limit); unset, and without ``keys``: no key is needed."""
    keys: list[ApiKey] = Field(default_factory=list)
    """API keys, each with a name and an optional USD limit per UTC day."""
    spend_file: str | None = None
    """JSONL file where each key's spend is appended and read back at start (limits survive a restart)."""
    trace: str | None = None
    """Append every ended trajectory to this JSONL file."""
    request_log: str | None = None
    """Append one JSON line per response and per ended episode to this file (``-``: stderr)."""
    heartbeat_s: PositiveFloat = 2.0
    """Seconds between heartbeat events of a stream while the episode works without news."""


class EpisodeServer:
    """The served orchestrators, the queue, the keys, the episodes waiting on client tools, and what is
    recorded."""

    def __init__(self, systems: Sequence[System], config: ServeConfig) -> None:
        if not systems:
            raise ConfigError("no orchestrator to serve")
        self.systems = {system.name: system for system in systems}
        if len(self.systems) != len(systems):
            raise ConfigError(f"served orchestrators need distinct names: {[s.name for s in systems]}")
        self.config = config
        keys = list(config.keys)
        if config.api_key_env is not None:
            keys.append(ApiKey(name="default", key_env=config.api_key_env))
        self.accounts = Accounts(keys, config.spend_file)
        self.admission = Admission(config.max_concurrent, config.max_queued, config.queue_timeout_s)
        self.metrics = Metrics()
        self.log = RequestLog(config.request_log)
        self.parked: dict[str, ServedEpisode] = {}
        """Episodes waiting on client calls, by the calls' ids."""
        self.expiries: dict[str, asyncio.TimerHandle] = {}

    async def authorize(self, request: Request) -> str | None:
        """The name of the request's API key (401 when one is needed and missing or wrong)."""
        return self.accounts.authorize(request.headers.get("authorization", ""))

    def models(self) -> dict[str, Any]:
        return {
            "object": "list",
            "data": [{"id": name, "object": "model", "created": 0, "owned_by": "podium"} for name in self.systems],
        }

    def system(self, model: str) -> System:
        system = self.systems.get(model)
        if system is None:
            raise ApiError(
                404, f"model '{model}' is not served here; served: {sorted(self.systems)}",
                "not_found_error", param="model", code="model_not_found",
            )  # fmt: skip
        return system

    async def complete(self, request: Request, account: str | None) -> Response:
        """One chat completion: a new episode, or the resumption of one waiting on client calls."""
        started = time.perf_counter()
        try:
            body = await parsed(request)
        except ApiError as error:
            self.metrics.requests.labels("", account or "", error.code or error.kind).inc()
            self.log.write({"event": "request", "model": None, "key": account, "outcome": error.code or error.kind})
            raise
        leg = LegRequest(f"chatcmpl-{uuid.uuid4().hex}", body, False, self.config.heartbeat_s)
        try:
            self.system(leg.model)
            conversation = read_conversation(leg.body.messages)
            session = self._waiting_for(leg, conversation, account)
            leg.resumed = session is not None
            waited = await self.admission.acquire()
        except ApiError as error:
            leg.outcome = error.code or error.kind
            self._record(leg, account, started, 0.0)
            raise
        try:
            session = self._resume(session, conversation) if session else self._start(leg, conversation, account)
        except ApiError as error:
            leg.outcome = error.code or error.kind
            self._close(leg, None, account, started, waited)
            raise
        if leg.body.stream:
            return EpisodeStream(self, session, leg, account, started, waited)
        try:
            completed = await collect(session, leg, self._park, disconnected(request))
        finally:
            self._close(leg, session, account, started, waited)
        return Response(json_text(completed), media_type="application/json")

    def _waiting_for(self, leg: LegRequest, conversation: Conversation, account: str | None) -> ServedEpisode | None:
        """The episode the request's trailing tool results answer, if one waits here (checked, not yet taken)."""
        session = next((self.parked[i] for i in conversation.results if i in self.parked), None)
        if session is None or session.model != leg.model or session.account != account:
            return None
        session.check(conversation.results)
        settings = leg.body.episode_settings()
        for field, value in session.settings.items():
            if settings.get(field) != value:
                raise invalid_request(f"{field} differs from the request that started this episode", field)
        return session

    def _resume(self, session: ServedEpisode, conversation: Conversation) -> ServedEpisode:
        if not any(self.parked.get(call_id) is session for call_id in conversation.results):
            raise ApiError(
                409, "another request resumed this episode already", "invalid_request_error", code="conflict"
            )
        self._unpark(session)
        session.resume(conversation.results)
        return session

    def _start(self, leg: LegRequest, conversation: Conversation, account: str | None) -> ServedEpisode:
        """Start the request's episode under its limits and its key's allowance."""
        body, system = leg.body, self.system(leg.model)
        specs = body.client_tools()
        taken = set(system.pool.registry.names()) | set(system.pool.labels.values()) | set(RESERVED_TOOL_NAMES)
        for index, spec in enumerate(specs):
            if spec.name in taken:
                param = f"tools.{index}.function.name"
                raise invalid_request(f"'{spec.name}' is a tool of the served pool already", param)
        try:
            config = request_config(system.config, system.executor().budget, body, None)
        except ConfigError as error:
            raise invalid_request(str(error), body.param_of(error)) from error
        session = ServedEpisode(
            leg.request_id, leg.model, account, self.accounts.allowance(account), specs,
            self.config.client_tool_timeout_s, settings=body.episode_settings(),
        )  # fmt: skip
        session.start(self._episode(leg, conversation, system, config, session), self._ended)
        return session

    def _episode(
        self, leg: LegRequest, conversation: Conversation, system: System, config: RunConfig, session: ServedEpisode
    ) -> Coroutine[Any, Any, Trajectory]:
        """The episode's coroutine: the one place serving solves a conversation."""
        body = leg.body
        try:
            executor = system.executor(config)
        except ConfigError as error:
            raise invalid_request(str(error), body.param_of(error)) from error
        if session.client_tools and not executor.policy.calls_tools:
            raise invalid_request(
                f"the {executor.policy.name} policy of {system.name} cannot call client tools", "tools"
            )
        metadata = {**(body.metadata or {}), "request_id": leg.request_id, "served_model": leg.model}
        if body.user is not None:
            metadata["user"] = body.user
        chat = Chat(
            tools=list(session.tools.values()),
            history=conversation.history,
            instructions=conversation.instructions,
            on_event=session.on_event,
            allowance=session.allowance,
        )
        return system.solve(
            conversation.task_with_work(),
            seed=body.podium.seed,
            preference=body.preference(),
            settings=config,
            chat=chat,
            metadata=metadata,
        )

    def _park(self, session: ServedEpisode, calls: ClientCalls) -> None:
        """Keep ``session`` waiting for its client calls' results, at most ``client_tool_timeout_s``."""
        for call in calls.calls:
            self.parked[call.id] = session
        timer = asyncio.get_running_loop().call_later(self.config.client_tool_timeout_s, session.cancel)
        self.expiries[session.request_id] = timer
        self.metrics.waiting.set(len({id(s) for s in self.parked.values()}))

    def _unpark(self, session: ServedEpisode) -> None:
        for call_id in [i for i, waiting in self.parked.items() if waiting is session]:
            del self.parked[call_id]
        timer = self.expiries.pop(session.request_id, None)
        if timer is not None:
            timer.cancel()
        self.metrics.waiting.set(len({id(s) for s in self.parked.values()}))

    def _ended(self, session: ServedEpisode) -> None:
        """An episode ended (answered, failed, cancelled or expired): settle, count, trace and log it."""
        self._unpark(session)
        trajectory = session.trajectory
        spent = 0.0 if trajectory is None else trajectory.usage.usd + trajectory.metadata.get("abandoned_usd", 0.0)
        self.accounts.settle(session.account, spent)
        if trajectory is None:
            return
        self.metrics.episode(session.model, session.account, trajectory, set(session.tools))
        if self.config.trace is not None:
            write_trajectories(self.config.trace, [trajectory])
        self.log.write(episode_record(session.request_id, session.model, session.account, trajectory))

    def _close(
        self, leg: LegRequest, session: ServedEpisode | None, account: str | None, started: float, waited: float
    ) -> None:
        """A response ended: free its slot; a client gone before the leg's end cancels the episode."""
        if session is not None and not leg.done():
            session.cancel()
        self.admission.release(time.perf_counter() - started - waited)
        self._record(leg, account, started, waited)

    def _record(self, leg: LegRequest, account: str | None, started: float, waited: float) -> None:
        elapsed = time.perf_counter() - started
        self.metrics.requests.labels(leg.model, account or "", leg.outcome).inc()
        self.metrics.request_seconds.labels(leg.model).observe(elapsed)
        self.metrics.queue_wait.observe(waited)
        self.metrics.queue_depth.set(self.admission.queued)
        self.metrics.running.set(self.admission.running)
        record = {"event": "request", "request_id": leg.request_id, "model": leg.model, "key": account}
        record |= {"stream": leg.body.stream, "resumed": leg.resumed, "outcome": leg.outcome}
        self.log.write(record | {"queue_s": round(waited, 4), "wall_s": round(elapsed, 4)})


class EpisodeStream(StreamingResponse):
    """A streamed leg whose slot is freed (and whose episode is cancelled, if the client left before the leg's
    end) however the response ends, even when the stream never started."""

    def __init__(
        self, server: EpisodeServer, session: ServedEpisode, leg: LegRequest, account: str | None,
        started: float, waited: float,
    ) -> None:  # fmt: skip
        super().__init__(stream(session, leg, server._park), media_type="text/event-stream")
        self.closing = (server, session, leg, account, started, waited)

    async def __call__(self, *arguments: Any) -> None:
        server, session, leg, account, started, waited = self.closing
        try:
            await super().__call__(*arguments)
        finally:
            server._close(leg, session, account, started, waited)


async def parsed(request: Request) -> EpisodeRequest:
    """The request body as an :class:`EpisodeRequest` (400 naming the first bad field)."""
    try:
        data = json.loads(await request.body())
    except (ValueError, RecursionError) as error:
        raise invalid_request(f"the body is not JSON: {error}") from error
    try:
        return EpisodeRequest.model_validate(data)
    except ValidationError as error:
        message, param = describe_errors(error.errors())
        raise invalid_request(message, param) from error


async def disconnected(request: Request) -> None:
    """Returns once the client has gone away (the body was read already)."""
    while (await request.receive())["type"] != "http.disconnect":
        continue


def create_orchestrator_app(systems: Sequence[System], config: ServeConfig | None = None) -> FastAPI:
    """The HTTP application serving ``systems`` (their names are the model ids)."""
    settings = config or ServeConfig()
    server = EpisodeServer(systems, settings)
    app = openai_app("Podium orchestrator server", settings.max_request_bytes)
    app.state.server = server

    @app.get("/v1/models", dependencies=[Depends(server.authorize)])
    async def models() -> dict[str, Any]:
        return server.models()

    @app.get("/metrics", dependencies=[Depends(server.authorize)])
    async def metrics() -> Response:
        server.metrics.queue_depth.set(server.admission.queued)
        server.metrics.running.set(server.admission.running)
        return Response(server.metrics.render(), media_type=server.metrics.content_type)

    @app.post("/v1/chat/completions", response_model=None)
    async def chat_completions(request: Request, account: str | None = Depends(server.authorize)) -> Response:
        return await server.complete(request, account)

    return app
