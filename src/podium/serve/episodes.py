"""Chat completion requests as orchestration episodes, and episodes as chat completion responses.

A request names a served orchestrator in ``model``; its last ``user`` message is the task, and its ``system``
(or ``developer``) messages join the orchestrator's system prompt as instructions. Earlier user and assistant
turns are not replayed: every request is one episode. Podium's own fields go in an extra ``podium`` object
(``extra_body={"podium": {...}}`` with the official clients), see :class:`PodiumOptions`. Sampling fields
(``temperature``, ``top_p``, ``max_tokens``…) are accepted and ignored: the orchestrator decodes as its system
config says, and the episode's limits are the ``podium`` fields.

The response's message is the episode's final answer (empty when a limit ended it first; ``finish_reason`` is
then ``length``). ``usage`` totals the tokens of the orchestrator and of every call, with ``cost`` in US
dollars; the ``podium`` object carries the trajectory id, the stop reason and accounting, and the whole
trajectory when asked for.
"""

import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt

from podium.core.budget import Budget, StopReason
from podium.core.preference import Preference
from podium.core.trajectory import Trajectory
from podium.runtime.config import RunConfig
from podium.serve.http import ChatMessage, invalid_request

FINISHED = (StopReason.ANSWER, StopReason.ENV_DONE)
"""Stop reasons reported as ``finish_reason: stop``; every other limit is ``length``."""


class PodiumOptions(BaseModel):
    """Per-request settings (the ``podium`` field of a request). Limits can only tighten the served
    orchestrator's own: each one applied is the smaller of the request's and the system config's."""

    model_config = ConfigDict(extra="forbid")
    max_usd: PositiveFloat | None = None
    """USD cap of this episode."""
    max_turns: PositiveInt | None = None
    """Most orchestrator turns."""
    max_seconds: PositiveFloat | None = None
    """Wall-clock deadline of the episode."""
    max_total_tokens: PositiveInt | None = None
    """Most tokens of the episode, orchestrator and workers."""
    preference: str | Preference | None = None
    """The user's preference: an instruction appended to the task, or ``{instruction, weights}``."""
    deny: list[str] = Field(default_factory=list)
    """Tools, roles and workers this episode may not use (added to the config's deny list)."""
    seed: int | None = None
    """Seed of the blind worker labels."""
    return_trajectory: bool = False
    """Include the whole trajectory in the response (in the final chunk when streaming)."""


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore")
    include_usage: bool = False


class EpisodeRequest(BaseModel):
    """An OpenAI chat completion request addressed to an orchestrator."""

    model_config = ConfigDict(extra="ignore")
    model: str
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: Literal[1] = 1
    tools: list[Any] | None = None
    podium: PodiumOptions = Field(default_factory=PodiumOptions)

    def task(self) -> tuple[str, str | None]:
        """The task (the last user message) and the instructions (the system messages, joined)."""
        if self.tools:
            raise invalid_request("client-side tools are not supported: the orchestrator calls its own pool", "tools")
        users = [message.text for message in self.messages if message.role == "user"]
        if not users or not users[-1].strip():
            raise invalid_request("the last user message is the task, and this request has none", "messages")
        system = [message.text for message in self.messages if message.role in ("system", "developer")]
        return users[-1], "\n\n".join(system) or None

    def preference(self) -> Preference | None:
        chosen = self.podium.preference
        return Preference(instruction=chosen) if isinstance(chosen, str) else chosen


def request_config(base: RunConfig, budget: Budget, options: PodiumOptions) -> RunConfig:
    """The run config of one request: ``base`` with the request's limits where they are tighter than the
    effective ``budget`` of ``base``, and its deny list added."""
    update: dict[str, Any] = {"deny": [*base.deny, *options.deny]}
    for field, limit in (
        ("max_usd", budget.max_usd),
        ("max_turns", budget.max_turns),
        ("max_seconds", budget.max_seconds),
        ("max_total_tokens", budget.max_tokens),
    ):
        asked = getattr(options, field)
        if asked is not None:
            update[field] = asked if limit is None else min(asked, limit)
    return base.model_copy(update=update)


def finish_reason(trajectory: Trajectory) -> str:
    return "stop" if trajectory.stop_reason in FINISHED else "length"


def usage_body(trajectory: Trajectory) -> dict[str, Any]:
    """OpenAI's ``usage`` for the whole episode, with its ``cost`` in US dollars."""
    usage = trajectory.usage
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.tokens,
        "cost": usage.usd,
    }


def podium_body(trajectory: Trajectory, *, with_trajectory: bool) -> dict[str, Any]:
    """The ``podium`` object of a response: the trajectory id, why it stopped, and what it cost."""
    usage = trajectory.usage
    body: dict[str, Any] = {
        "trajectory_id": trajectory.id,
        "stop_reason": str(trajectory.stop_reason),
        "usd": usage.usd,
        "cost_units": usage.cost_units,
        "turns": len(trajectory.turns),
        "calls": len(trajectory.results),
        "wall_s": trajectory.wall_s,
    }
    if with_trajectory:
        body["trajectory"] = trajectory.model_dump(mode="json")
    return body


def completion_body(request_id: str, model: str, trajectory: Trajectory, options: PodiumOptions) -> dict[str, Any]:
    """The episode as an OpenAI ``chat.completion``."""
    return {
        "id": request_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": trajectory.answer or ""},
                "finish_reason": finish_reason(trajectory),
            }
        ],
        "usage": usage_body(trajectory),
        "podium": podium_body(trajectory, with_trajectory=options.return_trajectory),
    }


def chunk(request_id: str, model: str, delta: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """One ``chat.completion.chunk`` of a stream (``finish_reason`` and extra fields as keywords)."""
    finish = fields.pop("finish_reason", None)
    return {
        "id": request_id,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **fields,
    }
