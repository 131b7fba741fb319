"""Served episodes as OpenAI chat completions and chunks.

The work shows in ``reasoning_content`` (where vLLM and other servers put a model's reasoning): a line per
orchestrator turn (its output, tokens and cost) and per call (name, worker, status, cost, latency, the start of
its observation), streamed as each happens. The answer is the message's ``content``; streamed, it comes in
word-sized deltas once the runtime has accepted it (answers are checked against the observations first, so text
that might still change is never shown as the answer). ``usage`` counts what the orchestrator and every call
used during this response (a round of client calls ends a response; the next one counts from there), with
``cost`` in US dollars; the ``podium`` object carries the trajectory id, the stop reason and the whole episode's
accounting, and the trajectory when asked for.

``finish_reason`` is ``tool_calls`` when the response hands out client calls, ``stop`` when the episode gave an
answer (one its observations held, when a limit stopped it first, counts), ``length`` when a limit ended it
without one.
"""

import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

from podium.core.calls import CallUsage
from podium.core.progress import EpisodeEvent
from podium.core.trajectory import Trajectory
from podium.serve.sessions import ClientCall

OBSERVATION_PREVIEW_CHARS = 300
"""How much of each call's observation the reasoning shows."""
_PIECE = re.compile(r"\s*\S+|\s+")


@dataclass
class Leg:
    """What one response reports: the work narrated and what it used."""

    reasoning: list[str] = field(default_factory=list)
    usage: CallUsage = field(default_factory=CallUsage)

    def add(self, event: EpisodeEvent) -> tuple[str | None, dict[str, Any] | None]:
        """Count ``event``; its line of reasoning and its ``podium`` event, if it has them."""
        line, summary = narrate(event)
        if event.kind == "turn" and event.usage is not None:
            self.usage = self.usage + event.usage
        if event.kind == "result" and event.result is not None:
            self.usage = self.usage + event.result.usage
        if line is not None:
            self.reasoning.append(line)
        return line, summary


def narrate(event: EpisodeEvent) -> tuple[str | None, dict[str, Any] | None]:
    """An episode step as a line of reasoning and a ``podium`` event (``None`` for steps not shown)."""
    if event.kind == "generating":
        return None, {"event": "generating", "turn": event.turn}
    if event.kind == "turn" and event.usage is not None:
        usage = event.usage
        line = f"[turn {event.turn + 1}] {event.detail.strip()}\n({usage.output_tokens} tokens, ${usage.usd:.6f})\n"
        return line, {"event": "turn", "turn": event.turn, "output_tokens": usage.output_tokens, "usd": usage.usd}
    if event.kind == "result" and event.result is not None:
        result = event.result
        usage = result.usage
        worker = f" ({result.worker})" if result.worker else ""
        preview = (result.observation or result.reason or "")[:OBSERVATION_PREVIEW_CHARS]
        line = (
            f"[call {result.call.name}{worker}] {result.status.value}, ${usage.usd:.6f}, {usage.latency_s:.2f} s\n"
            f"{preview}\n"
        )
        summary = {
            "event": "call",
            "turn": event.turn,
            "name": result.call.name,
            "worker": result.worker,
            "status": result.status.value,
            "usd": usage.usd,
            "latency_s": usage.latency_s,
        }
        return line, summary
    return None, None


def answer_of(trajectory: Trajectory, stops: list[str]) -> tuple[str, str]:
    """The answer the client gets (cut before the first stop string) and the finish reason."""
    answer = trajectory.answer
    if answer is None:
        return "", "length"
    cuts = [answer.index(stop) for stop in stops if stop in answer]
    return (answer[: min(cuts)] if cuts else answer), "stop"


def answer_pieces(answer: str) -> list[str]:
    """The answer in word-sized deltas (joined, they are the answer)."""
    return _PIECE.findall(answer)


def usage_body(usage: CallUsage) -> dict[str, Any]:
    """OpenAI's ``usage``, with its ``cost`` in US dollars."""
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.tokens,
        "cost": usage.usd,
    }


def podium_body(
    trajectory: Trajectory, *, with_trajectory: bool, served: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The ``podium`` object of a final response: the trajectory id, why it stopped, the whole episode's accounting,
    and what the server adds (``served``: the system's version, the grade against the request's gold)."""
    usage = trajectory.usage
    body: dict[str, Any] = {
        **(served or {}),
        "trajectory_id": trajectory.id,
        "stop_reason": str(trajectory.stop_reason),
        "usd": usage.usd,
        "tokens": usage.tokens,
        "cost_units": usage.cost_units,
        "turns": len(trajectory.turns),
        "calls": len(trajectory.results),
        "wall_s": trajectory.wall_s,
    }
    for key in ("answer_source", "answer_corrections", "history"):
        if key in trajectory.metadata:
            body[key] = trajectory.metadata[key]
    if with_trajectory:
        body["trajectory"] = trajectory.model_dump(mode="json")
    return body


def tool_calls_body(calls: list[ClientCall]) -> list[dict[str, Any]]:
    """OpenAI's ``tool_calls`` of an assistant message."""
    return [
        {
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": json.dumps(call.arguments, ensure_ascii=False)},
        }
        for call in calls
    ]


def completion(request_id: str, model: str, message: dict[str, Any], finish: str, **fields: Any) -> dict[str, Any]:
    """A ``chat.completion`` with one choice."""
    return {
        "id": request_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        **fields,
    }


def chunk(request_id: str, model: str, delta: dict[str, Any] | None, **fields: Any) -> dict[str, Any]:
    """One ``chat.completion.chunk`` (``finish_reason`` and extra fields as keywords; ``delta=None``: a chunk
    without choices, as the usage chunk is)."""
    finish = fields.pop("finish_reason", None)
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return {
        "id": request_id,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": choices,
        **fields,
    }
