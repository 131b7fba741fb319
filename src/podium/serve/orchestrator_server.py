"""``podium serve``: orchestrators as OpenAI-compatible models. Each conversation runs as an episode through
:meth:`podium.solve.system.System.solve` (the code path of evaluation, data collection and rollouts); ``GET /v1/models``
lists the served orchestrators and ``GET /metrics`` reports in Prometheus text format.

Requests (:mod:`podium.serve.requests`), how messages become the episode's context
(:mod:`podium.serve.conversation`), client tools (:mod:`podium.serve.sessions`), responses and streams
(:mod:`podium.serve.legs`), the queue (:mod:`podium.serve.admission`), API keys and their daily USD limits
(:mod:`podium.serve.accounts`), metrics and request logs (:mod:`podium.serve.operations`), the traffic directory
of every ended episode (:mod:`podium.serve.traffic`) and its feedback (``POST /v1/feedback``,
:mod:`podium.serve.feedback`), and candidates served in shadow and promoted (:mod:`podium.serve.shadow`).

Each served model shows its system's version (:mod:`podium.solve.version`) in ``/v1/models``, in ``/metrics``
labels, in every response's ``podium`` object and in the records of its episodes.

A client that goes away while its response is being worked on cancels the episode: its calls are cancelled, what
it spent (and the bounds of the work cut short) is charged to its key, and the trajectory is traced with stop
reason ``cancelled``.
"""

import json
import time
import uuid
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any, TypeVar

from fastapi import Depends, FastAPI, Request
from fastapi.responses import Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, PositiveFloat, PositiveInt, ValidationError
from starlette.types import Scope

from podium.config import Config
from podium.core.trajectory import Trajectory, write_trajectories
from podium.errors import ConfigError
from podium.graders.grader import Grader
from podium.pool.summarizer import FINAL_ANSWER
from podium.runtime.config import RunConfig
from podium.serve.accounts import Accounts, ApiKey
from podium.serve.admission import Admission
from podium.serve.conversation import Conversation, read_conversation
from podium.serve.feedback import FeedbackDesk, FeedbackRequest, feedback_body
from podium.serve.http import DEFAULT_MAX_BODY_BYTES, ApiError, describe_errors, invalid_request, openai_app
from podium.serve.legs import LegRequest, collect, json_text, stream
from podium.serve.operations import Labels, Metrics, RequestLog, episode_record
from podium.serve.records import EpisodeFacts, episode_facts, solved
from podium.serve.requests import EpisodeRequest, request_config
from podium.serve.sessions import ServedEpisode
from podium.serve.shadow import Deployment, ShadowRuns
from podium.serve.traffic import TrafficLog
from podium.serve.waiting import WaitingEpisodes
from podium.solve.config import SystemConfig
from podium.solve.served import SHADOW_SUFFIX
from podium.solve.system import Chat, System

DEFAULT_SYSTEM = SystemConfig(max_turns=2, max_tokens=256, summarize_on_stop=True)
"""What ``podium serve`` runs without ``--system``: the embedded offline orchestrator under limits within which
it answers a plain question (two turns, then the summarizer writes the answer if none came; the serial grammar's
fixed parts take 227 of its 256 tokens), as ``examples/systems/embedded-orchestrator.yaml`` does."""


class ServeConfig(Config):
    """How ``podium serve`` admits, accounts for and records requests."""

    max_concurrent: PositiveInt = 4
    """Responses worked on at once; more requests wait in the queue."""
    max_queued: NonNegativeInt = 64
    """Requests that may wait for a slot; a request beyond them is answered 429 with Retry-After."""
    queue_timeout_s: PositiveFloat = 60.0
    """Longest wait in the queue; a request that waited this long is answered 503 with Retry-After."""
    request_timeout_s: PositiveFloat | None = 120.0
    """Longest the server works on one response (the queue wait not counted): past it the episode is cancelled
    and the response is 504 ``request_timeout`` naming this limit; null (in a ``--config`` file): no limit.
    (``podium.max_seconds``, the episode's own deadline, ends it with the answer its observations hold instead.)"""
    client_tool_timeout_s: PositiveFloat = 300.0
    """How long an episode waits for the results of the client calls it handed out before it is cancelled."""
    max_waiting_episodes: PositiveInt = 128
    """Most episodes waiting for client tool results at once; past it the one waiting longest is cancelled."""
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
    """Append one JSON line per response (refusals included) and per ended episode to this file (``-``: stderr)."""
    heartbeat_s: PositiveFloat = 2.0
    """Seconds between heartbeat events of a stream while the episode works without news."""
    served: str | None = None
    """Traffic directory: every ended episode (live and shadow: the system's version, the key, the task, its gold,
    every call with its worker and price, the answer, its grade, the trajectory) and every feedback is appended to
    it, synced before the response that reports it; ``POST /v1/feedback`` needs it, and ``podium data collect
    --from-served`` reads it."""
    max_shadow: PositiveInt = 2
    """Shadow episodes run at once; a request arriving while they all run gets no shadow (counted)."""
    admin_keys: list[str] = Field(default_factory=list)
    """Names of the keys that may promote a shadow (``POST /v1/models/{model}/promote``); where the server needs
    no key, anyone may."""


class EpisodeServer:
    """The served orchestrators, the queue, the keys, the episodes waiting on client tools, and what is
    recorded."""

    def __init__(
        self, systems: Sequence[System], config: ServeConfig, shadows: Mapping[str, System] | None = None
    ) -> None:
        if not systems:
            raise ConfigError("no orchestrator to serve")
        self.deployments = {system.name: Deployment(system) for system in systems}
        if len(self.deployments) != len(systems):
            raise ConfigError(f"served orchestrators need distinct names: {[s.name for s in systems]}")
        for model, shadow in (shadows or {}).items():
            if model not in self.deployments:
                raise ConfigError(f"shadow {shadow.name}: no served model '{model}' to run beside")
            self.deployments[model].shadow = shadow
        self.config = config
        keys = list(config.keys)
        if config.api_key_env is not None:
            keys.append(ApiKey(name="default", key_env=config.api_key_env))
        unknown = sorted(set(config.admin_keys) - {key.name for key in keys})
        if unknown:
            raise ConfigError(f"admin_keys: {unknown} name no key of keys or api_key_env")
        self.accounts = Accounts(keys, config.spend_file)
        self.admission = Admission(config.max_concurrent, config.max_queued, config.queue_timeout_s)
        every = [*systems, *(shadows or {}).values()]
        self.metrics = Metrics(known_labels(every, [key.name for key in keys]))
        for model, deployment in self.deployments.items():
            self.metrics.serving(model, deployment.live.version, "live")
            if deployment.shadow is not None:
                self.metrics.serving(model, deployment.shadow.version, "shadow")
        self.log = RequestLog(config.request_log)
        self.waiting = WaitingEpisodes(config.client_tool_timeout_s, config.max_waiting_episodes, self.metrics)
        self.grader = Grader()
        self.traffic = None if config.served is None else TrafficLog(config.served)
        self.feedback = None if self.traffic is None else FeedbackDesk(self.traffic, self.grader)
        self.shadows = ShadowRuns(config.max_shadow, self.grader, self.metrics, self._shadow_ended)
        self.running: dict[str, ServedEpisode] = {}
        """Episodes running here, by each of their response ids (a feedback naming one is early, not unknown)."""

    async def authorize(self, request: Request) -> str | None:
        """The name of the request's API key (401 when one is needed and missing or wrong)."""
        account = self.accounts.authorize(request.headers.get("authorization", ""))
        request.state.account = account
        return account

    def models(self) -> dict[str, Any]:
        return {"object": "list", "data": [model_object(name, self.deployments[name]) for name in self.deployments]}

    def model(self, name: str) -> dict[str, Any]:
        return model_object(name, self.deployment(name))

    def deployment(self, model: str) -> Deployment:
        deployment = self.deployments.get(model)
        if deployment is None:
            raise ApiError(
                404, f"model '{model}' is not served here; served: {sorted(self.deployments)}",
                "not_found_error", param="model", code="model_not_found",
            )  # fmt: skip
        return deployment

    def system(self, model: str) -> System:
        """The live system of ``model``."""
        return self.deployment(model).live

    def promote(self, model: str, version: str, account: str | None) -> dict[str, Any]:
        """Make the shadow of ``model`` (which must be ``version``) its live system; only an admin key may."""
        if self.accounts.required and account not in self.config.admin_keys:
            raise ApiError(
                403, f"the key '{account}' may not promote (admin_keys: {self.config.admin_keys})",
                "permission_error", code="not_an_admin_key",
            )  # fmt: skip
        deployment = self.deployment(model)
        replaced = deployment.promote(model, version)
        self.metrics.serving(model, version, "shadow", serves=False)
        self.metrics.serving(model, replaced.version, "live", serves=False)
        self.metrics.serving(model, version, "live")
        self.log.write({"event": "promotion", "model": model, "from": replaced.version, "to": version, "key": account})
        return model_object(model, deployment)

    async def give_feedback(self, request: Request, account: str | None) -> dict[str, Any]:
        """Record an application's feedback on one of its responses."""
        if self.feedback is None or self.traffic is None:
            raise ApiError(
                400, "this server keeps no traffic directory, so it cannot keep feedback: start it with --served DIR",
                "invalid_request_error", code="feedback_not_kept",
            )  # fmt: skip
        body = await parsed_as(request, FeedbackRequest)
        running = self.running.get(body.response_id)
        is_running = running is not None and running.account == account
        record, recorded = await self.feedback.give(body, account, is_running)
        entry = self.traffic.episode(body.response_id)
        if entry is not None:
            self.metrics.feedback_taken(entry.model, entry.version, recorded)
        self.log.write({"event": "feedback", "episode_id": record.episode_id, "key": account,
                        "status": "recorded" if recorded else "duplicate"})  # fmt: skip
        return feedback_body(record, entry, recorded)

    def refused(self, scope: Scope, error: ApiError) -> None:
        """Count and log a refusal no response recorded (a body check, a bad route, a missing key…)."""
        state = scope.get("state", {})
        model, account = state.get("model"), state.get("account")
        outcome = error.code or error.kind
        self.metrics.response(model, account, outcome)
        record = {"event": "request", "model": model, "key": account, "outcome": outcome, "status": error.status}
        self.log.write(record | {"method": scope.get("method"), "path": scope.get("path")})

    async def complete(self, request: Request, account: str | None) -> Response:
        """One chat completion: a new episode, or the resumption of one waiting on client calls."""
        started = time.perf_counter()
        body = await parsed_as(request, EpisodeRequest)
        request.state.model = body.model
        leg = LegRequest(
            f"chatcmpl-{uuid.uuid4().hex}", body, False, self.config.heartbeat_s, self.config.request_timeout_s
        )
        try:
            self.system(leg.model)
            conversation = read_conversation(leg.body.messages)
            session = self._waiting_for(leg, conversation, account)
            if session is None:
                self.waiting.drop_superseded(leg.body, account)
            leg.resumed = session is not None
            waited = await self.admission.acquire()
        except ApiError as error:
            leg.outcome = error.code or error.kind
            self._record(leg, account, started, 0.0, error)
            raise
        try:
            session = self._resume(session, leg, conversation) if session else self._start(leg, conversation, account)
        except ApiError as error:
            leg.outcome = error.code or error.kind
            self._close(leg, None, account, started, waited, error)
            raise
        if leg.body.stream:
            return EpisodeStream(self, session, leg, account, started, waited)
        failed = None
        try:
            completed = await collect(session, leg, self.waiting.park, disconnected(request))
        except ApiError as error:
            failed = error
            raise
        finally:
            self._close(leg, session, account, started, waited, failed)
        return Response(json_text(completed), media_type="application/json")

    def _waiting_for(self, leg: LegRequest, conversation: Conversation, account: str | None) -> ServedEpisode | None:
        """The episode the request's trailing tool results answer, if one waits here (checked, not yet taken)."""
        session = next(filter(None, map(self.waiting.get, conversation.results)), None)
        if session is None or session.model != leg.model or session.account != account:
            return None
        session.check(conversation.results)
        settings = leg.body.episode_settings()
        for field, value in session.settings.items():
            if settings.get(field) != value:
                raise invalid_request(f"{field} differs from the request that started this episode", field)
        return session

    def _resume(self, session: ServedEpisode, leg: LegRequest, conversation: Conversation) -> ServedEpisode:
        if not any(self.waiting.get(call_id) is session for call_id in conversation.results):
            raise ApiError(
                409, "another request resumed this episode already", "invalid_request_error", code="conflict"
            )
        session.choose(leg.body)
        self.waiting.unpark(session)
        session.resume(conversation.results)
        if session.facts is not None:
            session.facts.response_ids.append(leg.request_id)
        self.running[leg.request_id] = session
        return session

    def _start(self, leg: LegRequest, conversation: Conversation, account: str | None) -> ServedEpisode:
        """Start the request's episode under its limits and its key's allowance."""
        body, system = leg.body, self.system(leg.model)
        specs = body.client_tools()
        try:
            config = request_config(system.config, system.executor().budget, body, None)
            policy = system.executor(config).policy
        except ConfigError as error:
            raise invalid_request(str(error), body.param_of(error)) from error
        if body.requires_call() and not policy.calls_tools:
            raise invalid_request(
                f"the {policy.name} policy of {system.name} cannot honour tool_choice: it calls no client tools",
                "tool_choice",
            )
        if specs and not policy.calls_tools:
            raise invalid_request(f"the {policy.name} policy of {system.name} cannot call client tools", "tools")
        if body.podium.verifier is not None and body.response_format is not None:
            raise invalid_request(
                "podium.verifier asks for its task kind's answer format, response_format for JSON: give one",
                "podium.verifier",
            )
        taken = {*system.pool.registry.names(), *system.pool.labels.values(), *policy.reserved_names}
        session = ServedEpisode(
            leg.request_id, leg.model, account, self.accounts.allowance(account), specs,
            self.config.client_tool_timeout_s, taken=taken, settings=body.episode_settings(),
            facts=episode_facts(body, conversation, leg.model, system, config, account),
        )  # fmt: skip
        session.choose(body)
        session.facts.response_ids.append(leg.request_id)  # type: ignore[union-attr]
        session.start(self._episode(leg, conversation, config, session), self._ended)
        self.running[leg.request_id] = session
        shadow = self.deployment(leg.model).shadow
        if shadow is not None:
            self.shadows.start(shadow, session.facts, body, conversation, leg.request_id)  # type: ignore[arg-type]
        return session

    def _episode(
        self, leg: LegRequest, conversation: Conversation, config: RunConfig, session: ServedEpisode
    ) -> Coroutine[Any, Any, Trajectory]:
        """The episode's coroutine: the one place serving solves a conversation (:func:`solved`)."""
        body = leg.body
        metadata = {**(body.metadata or {}), "request_id": leg.request_id, "served_model": leg.model}
        if body.user is not None:
            metadata["user"] = body.user
        chat = Chat(
            tools=list(session.tools.values()),
            history=conversation.history,
            instructions=conversation.instructions,
            on_event=session.on_event,
            allowance=session.allowance,
            tool_choice=session.next_choice,
            answer_schema=body.answer_schema(),
        )
        instruction = body.response_format.instruction() if body.response_format else None
        return solved(
            session.facts,  # type: ignore[arg-type]
            self.grader, leg.request_id, config, chat, seed=body.podium.seed, metadata=metadata,
            instruction=instruction,
        )  # fmt: skip

    def _ended(self, session: ServedEpisode) -> None:
        """An episode ended (answered, failed, cancelled or expired): settle, count, record, trace and log it."""
        self.waiting.unpark(session)
        facts = session.facts
        for response_id in [] if facts is None else facts.response_ids:
            self.running.pop(response_id, None)
        trajectory = session.trajectory
        spent = 0.0 if trajectory is None else trajectory.usage.usd + trajectory.metadata.get("abandoned_usd", 0.0)
        self.accounts.settle(session.account, spent)
        if trajectory is None or facts is None:
            return
        self._recorded(facts, session.request_id, trajectory, session.account, set(session.tools))
        record = episode_record(session.request_id, session.model, facts.system.version, session.account, trajectory)
        if session.cancelled_because is not None:
            record["cancelled_because"] = session.cancelled_because
        self.log.write(record)

    def _shadow_ended(self, facts: EpisodeFacts, trajectory: Trajectory) -> None:
        """A shadow episode ended: count and record it (it answered no one)."""
        episode_id = facts.response_ids[0] + SHADOW_SUFFIX
        self._recorded(facts, episode_id, trajectory, None, set())
        self.log.write(episode_record(episode_id, facts.model, facts.system.version, None, trajectory))

    def _recorded(
        self, facts: EpisodeFacts, episode_id: str, trajectory: Trajectory, key: str | None, client_tools: set[str]
    ) -> None:
        """Count an ended episode, write its record to the traffic directory (synced) and its trajectory to the
        trace."""
        version = facts.system.version
        self.metrics.episode(facts.model, version, key, trajectory, client_tools)
        if facts.grade is not None:
            self.metrics.grade(facts.model, version, facts.grade.correct)
        if self.traffic is not None:
            role = "shadow" if episode_id.endswith(SHADOW_SUFFIX) else "live"
            self.traffic.add(facts.record(episode_id, role, trajectory))
        if self.config.trace is not None:
            write_trajectories(self.config.trace, [trajectory])

    def _close(
        self, leg: LegRequest, session: ServedEpisode | None, account: str | None, started: float, waited: float,
        error: ApiError | None = None,
    ) -> None:  # fmt: skip
        """A response ended: free its slot; a client gone before the leg's end cancels the episode."""
        if session is not None and not leg.done():
            session.cancel()
        self.admission.release()
        self._record(leg, account, started, waited, error)

    def _record(
        self, leg: LegRequest, account: str | None, started: float, waited: float, error: ApiError | None = None
    ) -> None:
        elapsed = time.perf_counter() - started
        self.metrics.response(leg.model, account, leg.outcome, elapsed)
        self.metrics.queue_wait.observe(waited)
        self.metrics.queue_depth.set(self.admission.queued)
        self.metrics.running.set(self.admission.running)
        record = {"event": "request", "request_id": leg.request_id, "model": leg.model, "key": account}
        record |= {"stream": leg.body.stream, "resumed": leg.resumed, "outcome": leg.outcome}
        if error is not None:
            error.recorded = True
            record["status"] = error.status
        self.log.write(record | {"queue_s": round(waited, 4), "wall_s": round(elapsed, 4)})


class EpisodeStream(StreamingResponse):
    """A streamed leg whose slot is freed (and whose episode is cancelled, if the client left before the leg's
    end) however the response ends, even when the stream never started."""

    def __init__(
        self, server: EpisodeServer, session: ServedEpisode, leg: LegRequest, account: str | None,
        started: float, waited: float,
    ) -> None:  # fmt: skip
        super().__init__(stream(session, leg, server.waiting.park), media_type="text/event-stream")
        self.closing = (server, session, leg, account, started, waited)

    async def __call__(self, *arguments: Any) -> None:
        server, session, leg, account, started, waited = self.closing
        try:
            await super().__call__(*arguments)
        finally:
            server._close(leg, session, account, started, waited)


Body = TypeVar("Body", bound=BaseModel)


async def parsed_as(request: Request, model: type[Body]) -> Body:
    """The request body as a ``model`` (400 naming the first bad field)."""
    try:
        data = json.loads(await request.body())
    except (ValueError, RecursionError) as error:
        raise invalid_request(f"the body is not JSON: {error}") from error
    try:
        return model.model_validate(data)
    except ValidationError as error:
        message, param = describe_errors(error.errors())
        raise invalid_request(message, param) from error


async def disconnected(request: Request) -> None:
    """Returns once the client has gone away (the body was read already)."""
    while (await request.receive())["type"] != "http.disconnect":
        continue


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


def known_labels(systems: Sequence[System], keys: Sequence[str]) -> Labels:
    """The label values the metrics of a server of ``systems`` may show: the systems' names, every tool their
    episodes can call (the pools' tools and workers as shown, the summarizer, the primitives) and every worker
    model."""
    tools: set[str] = {FINAL_ANSWER.name}
    workers: set[str] = set()
    for system in systems:
        pool = system.pool
        tools |= {*pool.registry.names(), *pool.labels.values(), *pool.primitives.names()}
        workers |= {backend.model for backend in pool.backends.values()}
    versions = [system.version for system in systems]
    return Labels([system.name for system in systems], tools, workers, keys, versions)


class Promotion(BaseModel):
    """The body of ``POST /v1/models/{model}/promote``."""

    model_config = ConfigDict(extra="forbid")
    version: str
    """The version of the shadow to promote (what the gate compared)."""


def create_orchestrator_app(
    systems: Sequence[System], config: ServeConfig | None = None, shadows: Mapping[str, System] | None = None
) -> FastAPI:
    """The HTTP application serving ``systems`` (their names are the model ids), with ``shadows`` (served model
    id → candidate) beside them. Its routes are registered here, each behind the API key check; every error it
    answers is counted and logged once (:meth:`EpisodeServer.refused` for those no response recorded)."""
    settings = config or ServeConfig()
    server = EpisodeServer(systems, settings, shadows)
    app = openai_app("Podium orchestrator server", settings.max_request_bytes, refused=server.refused)
    app.state.server = server

    @app.get("/v1/models", dependencies=[Depends(server.authorize)])
    async def models() -> dict[str, Any]:
        return server.models()

    @app.get("/v1/models/{model:path}", dependencies=[Depends(server.authorize)])
    async def model(model: str) -> dict[str, Any]:
        return server.model(model)

    @app.get("/metrics", dependencies=[Depends(server.authorize)])
    async def metrics() -> Response:
        server.metrics.queue_depth.set(server.admission.queued)
        server.metrics.running.set(server.admission.running)
        return Response(server.metrics.render(), media_type=server.metrics.content_type)

    @app.post("/v1/chat/completions", response_model=None)
    async def chat_completions(request: Request, account: str | None = Depends(server.authorize)) -> Response:
        return await server.complete(request, account)

    @app.post("/v1/feedback")
    async def feedback(request: Request, account: str | None = Depends(server.authorize)) -> dict[str, Any]:
        return await server.give_feedback(request, account)

    @app.post("/v1/models/{model:path}/promote")
    async def promote(model: str, request: Request, account: str | None = Depends(server.authorize)) -> dict[str, Any]:
        return server.promote(model, (await parsed_as(request, Promotion)).version, account)

    return app
