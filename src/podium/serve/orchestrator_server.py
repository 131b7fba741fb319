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

import time
import uuid
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.responses import Response, StreamingResponse
from starlette.types import Scope

from podium.core.trajectory import Trajectory, write_trajectories
from podium.errors import ConfigError
from podium.graders.grader import Grader
from podium.runtime.config import RunConfig
from podium.serve.accounts import Accounts, ApiKey
from podium.serve.admission import Admission
from podium.serve.conversation import Conversation, read_conversation
from podium.serve.feedback import FeedbackDesk, FeedbackRequest, feedback_body
from podium.serve.http import ApiError, disconnected, invalid_request, openai_app, parsed_as
from podium.serve.legs import LegRequest, collect, json_text, stream
from podium.serve.operations import Metrics, RequestLog, episode_record, known_labels
from podium.serve.records import EpisodeFacts, episode_facts, solved
from podium.serve.requests import EpisodeRequest, request_config
from podium.serve.sessions import ServedEpisode
from podium.serve.settings import ServeConfig
from podium.serve.shadow import Deployment, Promotion, ShadowRuns, deployments, model_object
from podium.serve.traffic import TrafficLog
from podium.serve.waiting import WaitingEpisodes
from podium.solve.served import SHADOW_SUFFIX
from podium.solve.system import Chat, System


class EpisodeServer:
    """The served orchestrators, the queue, the keys, the episodes waiting on client tools, and what is
    recorded."""

    def __init__(
        self, systems: Sequence[System], config: ServeConfig, shadows: Mapping[str, System] | None = None
    ) -> None:
        self.deployments = deployments(systems, shadows or {})
        self.config = config
        keys = list(config.keys)
        if config.api_key_env is not None:
            keys.append(ApiKey(name="default", key_env=config.api_key_env))
        self.accounts = Accounts(keys, config.spend_file)
        self.admission = Admission(config.max_concurrent, config.max_queued, config.queue_timeout_s)
        every = [*systems, *(shadows or {}).values()]
        self.metrics = Metrics(known_labels(every, [key.name for key in keys]))
        for model, deployment in self.deployments.items():
            deployment.show(self.metrics, model)
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
        replaced = deployment.promote(model, version, self.metrics)
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
        session.start(self._episode(leg, conversation, config, session, policy.calls_tools), self._ended)
        self.running[leg.request_id] = session
        shadow = self.deployment(leg.model).shadow
        if shadow is not None:
            self.shadows.start(shadow, session.facts, body, conversation, leg.request_id)  # type: ignore[arg-type]
        return session

    def _episode(
        self, leg: LegRequest, conversation: Conversation, config: RunConfig, session: ServedEpisode, calls_tools: bool
    ) -> Coroutine[Any, Any, Trajectory]:
        """The episode's coroutine: the one place serving solves a conversation (:func:`solved`). A policy that
        calls no tools by name (escalate) gets no ``tool_choice`` (a request that asks for a call was refused)."""
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
            tool_choice=session.next_choice if calls_tools else None,
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
