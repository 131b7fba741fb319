"""One response of a served episode (a leg): read the episode's reports until it hands out client calls or ends,
as one chat completion or as Server-Sent Events.

A stream sends, in order: the assistant role (``podium.event`` ``started`` or ``resumed``); each step as it happens
(a ``reasoning_content`` delta and a ``podium`` event: ``generating``, ``turn``, ``call``), with a ``running``
heartbeat while nothing happens; then either the client calls (``delta.tool_calls``) or the answer in word-sized
``content`` deltas; the chunk with ``finish_reason``, ``usage`` (USD in ``cost``) and the ``podium`` summary; a
usage chunk without choices when ``stream_options.include_usage`` is set; ``data: [DONE]``. An episode that fails
sends an OpenAI-style ``error`` event instead of the answer.
"""

import asyncio
import json
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
    outcome: str = "cancelled"
    """How the response ended: ``stop``, ``length``, ``tool_calls``, an error code, or ``cancelled`` while the
    client was still waiting (it went away)."""

    @property
    def model(self) -> str:
        return self.body.model

    def done(self) -> bool:
        return self.outcome != "cancelled"


def failure(task: "asyncio.Task[Trajectory]", body: EpisodeRequest, session: ServedEpisode) -> ApiError | None:
    """Why an ended episode gives no completion: a bad option (400), an API key whose allowance for today could
    not pay for the episode's next step (429), a failed orchestrator (502) or a bug (500); ``None`` when it has a
    trajectory to answer with."""
    if task.cancelled():
        return ApiError(
            410, "the episode was cancelled (its wait for client tool results ran out)", "invalid_request_error",
            code="episode_cancelled",
        )  # fmt: skip
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
    return None


def final_fields(leg: Leg, trajectory: Trajectory, request: EpisodeRequest) -> dict[str, Any]:
    return {
        "usage": usage_body(leg.usage),
        "podium": podium_body(trajectory, with_trajectory=request.podium.return_trajectory),
    }


async def collect(
    session: ServedEpisode, request: LegRequest, park: Park, disconnected: Awaitable[None]
) -> dict[str, Any] | None:
    """The leg as one ``chat.completion``; ``None`` when the client went away first (the caller cancels the
    episode: ``request.outcome`` stays ``cancelled``)."""
    leg = Leg()
    gone = asyncio.ensure_future(disconnected)
    try:
        while True:
            report = asyncio.ensure_future(session.reports.get())
            await asyncio.wait({report, gone}, return_when=asyncio.FIRST_COMPLETED)
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
    problem = failure(item.task, request.body, session)
    if problem is not None:
        request.outcome = problem.code or problem.kind
        raise problem
    trajectory = item.task.result()
    answer, finish = answer_of(trajectory, request.body.stop_strings())
    request.outcome = finish
    message = {"role": "assistant", "content": answer, "reasoning_content": reasoning}
    fields = final_fields(leg, trajectory, request.body)
    return completion(request.request_id, request.model, message, finish, **fields)


async def stream(session: ServedEpisode, request: LegRequest, park: Park) -> AsyncIterator[str]:
    """The leg as Server-Sent Events."""
    leg = Leg()
    opening = {"event": "resumed" if request.resumed else "started", "request_id": request.request_id}
    yield sse(chunk(request.request_id, request.model, {"role": "assistant", "content": ""}, podium=opening))
    started = time.perf_counter()
    while True:
        try:
            item = await asyncio.wait_for(session.reports.get(), request.heartbeat_s)
        except TimeoutError:
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
        problem = failure(item.task, request.body, session)
        if problem is not None:
            request.outcome = problem.code or problem.kind
            return [sse(problem.body())]
        trajectory = item.task.result()
        answer, finish = answer_of(trajectory, request.body.stop_strings())
        request.outcome = finish
        events = [chunk(request_id, model, {"content": piece}) for piece in answer_pieces(answer)]
        fields = final_fields(leg, trajectory, request.body)
    events.append(chunk(request_id, model, {}, finish_reason=finish, **fields))
    options = request.body.stream_options
    if options is not None and options.include_usage:
        events.append(chunk(request_id, model, None, usage=fields["usage"]))
    return [*(sse(event) for event in events), "data: [DONE]\n\n"]


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
