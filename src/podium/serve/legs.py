"""One response of a served episode (a leg): read the episode's reports until it hands out client calls or ends,
as one chat completion or as Server-Sent Events.

A stream sends, in order: the assistant role (``podium.event`` ``started`` or ``resumed``); each step as it happens
(a ``reasoning_content`` delta and a ``podium`` event: ``generating``, ``turn``, ``call``), with a ``running``
heartbeat while nothing happens; then either the client calls (``delta.tool_calls``) or the answer in word-sized
``content`` deltas; the chunk with ``finish_reason`` and the ``podium`` summary; with
``stream_options.include_usage``, the chunk without choices that carries ``usage`` (USD in ``cost``), the only one
that does, as OpenAI sends it; ``data: [DONE]``. An episode that fails sends an OpenAI-style ``error`` event
instead of the answer.

A response that takes longer than the server's per-request limit cancels its episode and answers 504
``request_timeout`` naming the limit. A response whose ``tool_choice`` asked for a call of a client tool, or whose
``response_format`` asked for JSON, that the episode did not give is an error (502, not retried by the official
clients), never an answer of another kind.
"""

import asyncio
import json
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from podium.core.budget import StopReason
from podium.core.jsonsafe import json_ready
from podium.core.progress import EpisodeEvent
from podium.core.trajectory import Trajectory
from podium.errors import ConfigError
from podium.serve.http import ApiError, invalid_request
from podium.serve.requests import EpisodeRequest
from podium.serve.responses import (
    Leg,
    answer_of,
    answer_pieces,
    chunk,
    completion,
    podium_body,
    tool_calls_body,
    usage_body,
)
from podium.serve.sessions import ClientCalls, Ended, ServedEpisode

Park = Callable[[ServedEpisode, ClientCalls], None]
"""What the server does with an episode that handed out client calls: keep it, waiting, under their ids."""


@dataclass
class LegRequest:
    """What one response needs to know."""

    request_id: str
    body: EpisodeRequest
    resumed: bool
    heartbeat_s: float
    timeout_s: float | None = None
    """The longest the server works on this response before it cancels the episode."""
    outcome: str = "cancelled"
    """How the response ended: ``stop``, ``length``, ``tool_calls``, an error code, or ``cancelled`` while the
    client was still waiting (it went away)."""

    @property
    def model(self) -> str:
        return self.body.model

    def done(self) -> bool:
        return self.outcome != "cancelled"


CANCELLATIONS = {
    "client_tool_timeout": "its wait for client tool results ran out",
    "waiting_cap": "too many episodes were waiting for client tool results, and it had waited longest",
    "superseded": "a later request of the client went on without its tool results",
}
"""Why the server cancels an episode waiting for client tool results."""


def failure(task: "asyncio.Task[Trajectory]", request: LegRequest, session: ServedEpisode) -> ApiError | None:
    """Why an ended episode gives no completion: a bad option (400), an API key whose allowance for today could
    not pay for the episode's next step (429), a failed orchestrator (502), the per-request time limit (504) or a
    bug (500); ``None`` when it has a trajectory to answer with."""
    body = request.body
    if task.cancelled():
        if session.cancelled_because == "request_timeout":
            trajectory = session.trajectory
            work = (
                "" if trajectory is None else f" after {len(trajectory.turns)} turns, {len(trajectory.results)} calls"
            )
            error = ApiError(
                504, f"no reply within this server's limit of {request.timeout_s:g} s per request "
                f"(request_timeout_s, podium serve --request-timeout); the episode was cancelled{work}",
                "server_error", code="request_timeout",
            )  # fmt: skip
            return not_retried(error)
        why = CANCELLATIONS.get(session.cancelled_because or "", "it was cancelled")
        return ApiError(410, f"the episode was cancelled: {why}", "invalid_request_error", code="episode_cancelled")
    error = task.exception()
    if isinstance(error, ConfigError):
        return invalid_request(str(error), body.param_of(error))
    if error is not None:
        return ApiError(500, f"{type(error).__name__}: {error}", "server_error")
    trajectory = task.result()
    refused = trajectory.metadata.get("allowance_refused")
    if trajectory.stop_reason is StopReason.MAX_USD and trajectory.answer is None and refused:
        return ApiError(
            429, f"the key '{session.account}' cannot pay for the episode's next step today (UTC): {refused} "
            f"(trajectory {trajectory.id})", "insufficient_quota", code="insufficient_quota",
        )  # fmt: skip
    if trajectory.stop_reason is StopReason.ERROR:
        reason = trajectory.metadata.get("error", "the orchestrator's backend failed")
        return ApiError(502, f"{reason} (trajectory {trajectory.id})", "backend_error", code="orchestrator_failed")
    choice = session.choice
    if choice is not None and choice.mode == "required":
        called = " or ".join(sorted(session.client_names[name] for name in choice.tools))
        return unfollowed(
            f"tool_choice asked for a call of {called}, and the episode ended ({trajectory.stop_reason}) without one "
            f"(trajectory {trajectory.id})", "tool_choice_not_followed",
        )  # fmt: skip
    return None


def unfollowed(message: str, code: str) -> ApiError:
    """A 502: the orchestrator did not give what the request asked for."""
    return not_retried(ApiError(502, message, "backend_error", code=code))


def not_retried(error: ApiError) -> ApiError:
    """``error`` with the header that tells the official OpenAI clients not to retry it (their default retries
    5xx: an episode that ran out of time or did not follow the request would run again, as long)."""
    error.headers["x-should-retry"] = "false"
    return error


def answered(trajectory: Trajectory, body: EpisodeRequest) -> tuple[str, str]:
    """The answer the client gets (cut before the first stop string, and checked against ``response_format``)
    and the finish reason."""
    answer, finish = answer_of(trajectory, body.stop_strings())
    if body.response_format is None or finish != "stop":
        return answer, finish
    try:
        return body.response_format.checked(answer), finish
    except ValueError as error:
        raise unfollowed(
            f"the answer does not follow response_format {body.response_format.type}: {error} (trajectory "
            f"{trajectory.id})", "response_format_not_followed",
        ) from error  # fmt: skip


def final_fields(leg: Leg, trajectory: Trajectory, request: EpisodeRequest, session: ServedEpisode) -> dict[str, Any]:
    served: dict[str, Any] = {}
    if session.facts is not None:
        served["version"] = session.facts.system.version
        if session.facts.grade is not None:
            served["grade"] = session.facts.grade.model_dump(mode="json")
    return {
        "usage": usage_body(leg.usage),
        "podium": podium_body(trajectory, with_trajectory=request.podium.return_trajectory, served=served),
    }


async def collect(
    session: ServedEpisode, request: LegRequest, park: Park, disconnected: Awaitable[None]
) -> dict[str, Any] | None:
    """The leg as one ``chat.completion``; ``None`` when the client went away first (the caller cancels the
    episode: ``request.outcome`` stays ``cancelled``)."""
    leg = Leg()
    gone = asyncio.ensure_future(disconnected)
    deadline = Deadline(request.timeout_s)
    try:
        while True:
            report = asyncio.ensure_future(session.reports.get())
            await asyncio.wait({report, gone}, timeout=deadline.left(), return_when=asyncio.FIRST_COMPLETED)
            if not report.done() and not gone.done():
                report.cancel()
                session.cancel("request_timeout")
                deadline.passed()
                continue
            if not report.done():
                report.cancel()
                return None
            item = report.result()
            if isinstance(item, EpisodeEvent):
                leg.add(item)
                continue
            reasoning = "".join(leg.reasoning) or None
            if isinstance(item, ClientCalls):
                park(session, item)
                request.outcome = "tool_calls"
                message = {"role": "assistant", "content": None, "tool_calls": tool_calls_body(item.calls)}
                message["reasoning_content"] = reasoning
                return completion(request.request_id, request.model, message, "tool_calls", usage=usage_body(leg.usage))
            return _ended(session, item, request, leg, reasoning)
    finally:
        gone.cancel()


def _ended(session: ServedEpisode, item: Ended, request: LegRequest, leg: Leg, reasoning: str | None) -> dict[str, Any]:
    try:
        answer, finish, trajectory = _answer(session, item, request)
    except ApiError as problem:
        request.outcome = problem.code or problem.kind
        raise
    request.outcome = finish
    message = {"role": "assistant", "content": answer, "reasoning_content": reasoning}
    fields = final_fields(leg, trajectory, request.body, session)
    return completion(request.request_id, request.model, message, finish, **fields)


async def stream(session: ServedEpisode, request: LegRequest, park: Park) -> AsyncIterator[str]:
    """The leg as Server-Sent Events."""
    leg = Leg()
    opening = {"event": "resumed" if request.resumed else "started", "request_id": request.request_id}
    yield sse(chunk(request.request_id, request.model, {"role": "assistant", "content": ""}, podium=opening))
    started = time.perf_counter()
    deadline = Deadline(request.timeout_s)
    while True:
        left = deadline.left()
        try:
            item = await asyncio.wait_for(
                session.reports.get(), min(request.heartbeat_s, math.inf if left is None else left)
            )
        except TimeoutError:
            if deadline.left() == 0.0:
                session.cancel("request_timeout")
                deadline.passed()
            beat = {"event": "running", "elapsed_s": round(time.perf_counter() - started, 1)}
            yield sse(chunk(request.request_id, request.model, {}, podium=beat))
            continue
        if isinstance(item, EpisodeEvent):
            line, summary = leg.add(item)
            if line is not None or summary is not None:
                delta = {} if line is None else {"reasoning_content": line}
                yield sse(chunk(request.request_id, request.model, delta, podium=summary))
            continue
        for event in _closing_events(session, item, request, leg, park):
            yield event
        return


def _closing_events(
    session: ServedEpisode, item: ClientCalls | Ended, request: LegRequest, leg: Leg, park: Park
) -> list[str]:
    """The leg's last events: client calls or the answer, the finish chunk, usage, ``[DONE]``."""
    request_id, model = request.request_id, request.model
    if isinstance(item, ClientCalls):
        park(session, item)
        request.outcome = "tool_calls"
        calls = [{"index": index, **call} for index, call in enumerate(tool_calls_body(item.calls))]
        events = [chunk(request_id, model, {"tool_calls": calls})]
        fields: dict[str, Any] = {"usage": usage_body(leg.usage)}
        finish = "tool_calls"
    else:
        try:
            answer, finish, trajectory = _answer(session, item, request)
        except ApiError as problem:
            request.outcome = problem.code or problem.kind
            return [sse(problem.body())]
        request.outcome = finish
        events = [chunk(request_id, model, {"content": piece}) for piece in answer_pieces(answer)]
        fields = final_fields(leg, trajectory, request.body, session)
    usage = fields.pop("usage")  # once, in its own chunk, as OpenAI's streams carry it
    events.append(chunk(request_id, model, {}, finish_reason=finish, **fields))
    options = request.body.stream_options
    if options is not None and options.include_usage:
        events.append(chunk(request_id, model, None, usage=usage))
    return [*(sse(event) for event in events), "data: [DONE]\n\n"]


def _answer(session: ServedEpisode, item: Ended, request: LegRequest) -> tuple[str, str, Trajectory]:
    """The answer of an ended episode, its finish reason and its trajectory; an ApiError when it has none to give."""
    problem = failure(item.task, request, session)
    if problem is not None:
        raise problem
    trajectory = item.task.result()
    answer, finish = answered(trajectory, request.body)
    return answer, finish, trajectory


class Deadline:
    """A response's time limit: seconds left (``None``: no limit; 0 once passed), until it has been acted on."""

    def __init__(self, limit_s: float | None) -> None:
        self.end = None if limit_s is None else time.perf_counter() + limit_s

    def left(self) -> float | None:
        return None if self.end is None else max(0.0, self.end - time.perf_counter())

    def passed(self) -> None:
        """The limit was acted on (the episode cancelled): wait without one for the episode's end."""
        self.end = None


def json_text(data: Any) -> str:
    """``data`` as JSON text: ASCII (lone surrogates escaped, never unencodable), non-finite numbers (which JSON
    lacks) written as null."""
    try:
        return json.dumps(data, allow_nan=False)
    except ValueError:
        return json.dumps(json_ready(data), allow_nan=False)


def sse(data: dict[str, Any]) -> str:
    """One Server-Sent Event."""
    return f"data: {json_text(data)}\n\n"
