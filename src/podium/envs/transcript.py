"""A Podium trajectory of a tau2 task in tau2's own terms: its messages, its termination reason, and the
``Results`` file that ``tau2 run`` saves (so tau2's tools, and ``podium env score``, can read Podium's runs).

What the user saw is what the agent said: the greeting, then each final answer the runtime sent to the simulated
user (recorded by :func:`~podium.envs.conversation.run_task` in ``metadata["tau2_dialogue"]``), interleaved with
the user's messages. A turn that called the domain's tools becomes an assistant message with those tool calls and
no text, followed by tau2's responses; the turn's raw output (``<think>`` blocks, the call markup) is kept in the
message's ``raw_data`` only, so reasoning and tool arguments never count as said to the user. Calls to Podium's
own tools (python, workers) are not tau2 actions and are left out, as are calls that never ran (PARSE_ERR, refused).
"""

import json
from collections.abc import Collection, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

from podium.core.budget import StopReason
from podium.core.calls import Status, ToolResult
from podium.core.trajectory import Trajectory, Turn
from podium.envs.domain import Domain, tau2_module
from podium.errors import PodiumError

DIALOGUE_KEY = "tau2_dialogue"
"""Trajectory metadata: the conversation as the user saw it, ``[{"role": "assistant" | "user", "content": …}]``."""
USER_STOPPED_KEY = "user_stopped"
"""Trajectory metadata: whether the simulated user ended the conversation with its stop token."""
AGENT_IMPLEMENTATION = "podium"
USER_IMPLEMENTATION = "podium_user_simulator"

_LIMITS = {StopReason.MAX_TURNS, StopReason.MAX_TOKENS, StopReason.MAX_USD, StopReason.DEADLINE, StopReason.ENV_DONE}


class TranscriptError(PodiumError, ValueError):
    """A trajectory cannot be written as a tau2 conversation (not a tau2 episode, or its records disagree)."""


def termination_reason(trajectory: Trajectory) -> Any:
    """tau2's ``TerminationReason`` for how the episode ended: the user's stop token is ``user_stop``; running
    out of turns, tokens, dollars, time or user messages is ``max_steps`` (tau2's only limit); unparseable output
    ``too_many_errors``; a failed backend ``agent_error``; an answer that ended an episode without a user
    ``agent_stop``. tau2 rewards only ``user_stop`` and ``agent_stop`` episodes."""
    reason = tau2_module("tau2.data_model.simulation").TerminationReason
    if trajectory.metadata.get(USER_STOPPED_KEY):
        return reason.USER_STOP
    if trajectory.stop_reason in _LIMITS:
        return reason.MAX_STEPS
    if trajectory.stop_reason is StopReason.MAX_PARSE_ERRORS:
        return reason.TOO_MANY_ERRORS
    if trajectory.stop_reason is StopReason.ANSWER:
        return reason.AGENT_STOP
    return reason.AGENT_ERROR


def _dialogue(trajectory: Trajectory) -> list[dict[str, str]]:
    said = trajectory.metadata.get(DIALOGUE_KEY)
    if not isinstance(said, list) or len(said) < 2:
        raise TranscriptError(f"trajectory {trajectory.id} has no tau2 dialogue: it is not a tau2 episode")
    return said


def _content(result: ToolResult) -> str:
    """tau2's response text for an executed call: the text the tool gave (or, if that was cut for the
    orchestrator, its value as JSON, which tau2 reads back the same), or its error text."""
    if result.status is not Status.OK:
        return result.reason or ""
    return result.observation if not result.truncated else json.dumps(result.value)


def _call_messages(turn: Turn, results: Sequence[ToolResult]) -> list[Any]:
    message = tau2_module("tau2.data_model.message")
    calls = [
        message.ToolCall(id=f"{turn.index}.{number}", name=result.call.name, arguments=dict(result.call.arguments))
        for number, result in enumerate(results)
    ]
    made = [message.AssistantMessage(role="assistant", tool_calls=calls, raw_data={"podium_output": turn.output})]
    for call, result in zip(calls, results, strict=True):
        made.append(message.ToolMessage(id=call.id, role="tool", content=_content(result), error=not result.ok))
    return made


def _said(lines: Iterator[dict[str, str]], role: str, trajectory: Trajectory) -> str | None:
    line = next(lines, None)
    if line is None:
        return None
    if line.get("role") != role:
        raise TranscriptError(f"trajectory {trajectory.id}: its dialogue and its turns disagree")
    return line.get("content", "")


def tau2_messages(trajectory: Trajectory, tool_names: Collection[str]) -> list[Any]:
    """The conversation of a tau2 episode as tau2 messages; ``tool_names`` are the domain's tools."""
    message = tau2_module("tau2.data_model.message")
    said = _dialogue(trajectory)
    lines = iter(said[2:])
    messages = [
        message.AssistantMessage(role="assistant", content=said[0]["content"]),
        message.UserMessage(role="user", content=said[1]["content"]),
    ]
    for turn in trajectory.turns:
        domain_calls = [r for r in turn.results if r.executed and r.call.name in tool_names]
        if domain_calls:
            messages.extend(_call_messages(turn, domain_calls))
        elif not turn.results and turn.parse_error is None:
            answer = _said(lines, "assistant", trajectory)
            if answer is None and turn is trajectory.turns[-1] and trajectory.answer is not None:
                answer = trajectory.answer  # the last answer, given after the user had used up their turns
            if answer is None:
                raise TranscriptError(
                    f"trajectory {trajectory.id}: an answer of turn {turn.index} never reached the user"
                )
            messages.append(
                message.AssistantMessage(role="assistant", content=answer, raw_data={"podium_output": turn.output})
            )
            reply = _said(lines, "user", trajectory)
            if reply is not None:
                messages.append(message.UserMessage(role="user", content=reply))
    if next(lines, None) is not None:
        raise TranscriptError(f"trajectory {trajectory.id}: its dialogue has messages no turn accounts for")
    return messages


def _iso(timestamp: Any) -> str:
    return timestamp if isinstance(timestamp, str) else ""


def simulation(trajectory: Trajectory, domain: Domain, trial: int | None = None) -> Any:
    """A trajectory of one of ``domain``'s tasks as tau2's ``SimulationRun`` (no reward attached)."""
    model = tau2_module("tau2.data_model.simulation")
    task_id = trajectory.metadata.get("task_id")
    if task_id is None:
        raise TranscriptError(f"trajectory {trajectory.id} names no tau2 task")
    user_usage = trajectory.metadata.get("user_usage") or {}
    return model.SimulationRun(
        id=trajectory.id,
        task_id=str(task_id),
        start_time=_iso(trajectory.metadata.get("started_at")),
        end_time=_iso(trajectory.metadata.get("ended_at")),
        duration=trajectory.wall_s,
        termination_reason=termination_reason(trajectory),
        agent_cost=trajectory.usage.usd,
        user_cost=user_usage.get("usd"),
        messages=tau2_messages(trajectory, domain.tool_kinds),
        trial=trial,
    )


def results(
    domain: Domain, simulations: Sequence[Any], *, agent: str | None, user: str | None, max_steps: int = 0
) -> Any:
    """tau2's ``Results`` (what ``tau2 run`` saves) for ``simulations`` of ``domain``'s tasks; ``max_steps`` is
    the run's turn limit, when it had one (tau2's ``max_errors`` has no Podium counterpart and is 0)."""
    model = tau2_module("tau2.data_model.simulation")
    wanted = {run.task_id for run in simulations}
    trials = max((run.trial or 0 for run in simulations), default=0) + 1
    info = model.Info(
        git_commit="",
        num_trials=trials,
        max_steps=max_steps,
        max_errors=0,
        user_info=model.UserInfo(implementation=USER_IMPLEMENTATION, llm=user),
        agent_info=model.AgentInfo(implementation=AGENT_IMPLEMENTATION, llm=agent),
        environment_info=domain.tau2_environment().get_info(),
    )
    tasks = [task for task in domain.tasks if task.id in wanted]
    return model.Results(timestamp=now(), info=info, tasks=tasks, simulations=list(simulations))


def now() -> str:
    """The current time, ISO 8601 (tau2's timestamps)."""
    return datetime.now(UTC).isoformat()
