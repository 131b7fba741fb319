"""What the data filters read off a trajectory: infrastructure failures (a worker's 5xx or time-out, the
orchestrator's own backend down) told apart from the orchestrator's mistakes, unrecovered format errors, the
failures it recovered from, the tools it called (by their real names), and the trace as text."""

import re
from collections import Counter

from podium.core.budget import StopReason
from podium.core.calls import Refusal, Status, ToolResult
from podium.core.trajectory import Trajectory
from podium.rewards.shaping import turn_well_formed

INFRASTRUCTURE_REASON = re.compile(
    r"HTTP (?:5\d\d|408|429)\b|connection failed|no reply in time|malformed response|API key .* is missing",
    re.IGNORECASE,
)
"""What a backend says when the service, not the request, failed (see ``podium.backends.http``)."""
NOT_A_TOOL = frozenset({"final_answer"})
"""Calls that end an episode rather than use a tool (left out of tool balance, as ParaManager's R_tool does)."""


def infrastructure_call(result: ToolResult) -> bool:
    """Whether a call failed because a worker's service did (5xx, 429, connection, time-out), not because of
    what the orchestrator asked: a python error or a bad argument is the orchestrator's own mistake."""
    if result.worker is None or result.refused is not None:
        return False
    if result.status is Status.TIMEOUT:
        return True
    return result.status is Status.EXEC_ERR and bool(INFRASTRUCTURE_REASON.search(result.reason or ""))


def infrastructure_failure(trajectory: Trajectory) -> str | None:
    """A short category when infrastructure failed during the episode (the details stay in the trajectory)."""
    if trajectory.stop_reason is StopReason.ERROR:
        return "infrastructure: orchestrator backend failed"
    for result in trajectory.results:
        if infrastructure_call(result):
            return f"infrastructure: worker call {result.status.value}"
    return None


def format_failure(trajectory: Trajectory) -> str | None:
    """A short category when the episode ended in a format error the orchestrator never repaired."""
    if trajectory.stop_reason is StopReason.MAX_PARSE_ERRORS:
        return "format: too many unparseable outputs"
    if not trajectory.turns:
        return "format: no orchestrator turn"
    if not any(message.role == "assistant" for message in trajectory.messages):
        return "format: no recorded orchestrator conversation"
    if not turn_well_formed(trajectory.turns[-1]):
        return "format: last turn malformed"
    return None


def _turn_failures(trajectory: Trajectory, index: int) -> list[str]:
    turn = trajectory.turns[index]
    failures = ["PARSE_ERR"] if turn.parse_error else []
    for result in turn.results:
        if result.ok or result.refused is Refusal.BUDGET or infrastructure_call(result):
            continue
        failures.append(result.status.value)
    return failures


def recovered_from(trajectory: Trajectory) -> list[str]:
    """Statuses (PARSE_ERR, EXEC_ERR, TIMEOUT) of the orchestrator's failures that a later well-formed turn
    followed: what ParaManager's recovery trajectories teach. Sorted, without repeats."""
    recovered: set[str] = set()
    for index in range(len(trajectory.turns)):
        failures = _turn_failures(trajectory, index)
        if failures and any(turn_well_formed(later) for later in trajectory.turns[index + 1 :]):
            recovered.update(failures)
    return sorted(recovered)


def tool_counts(trajectory: Trajectory) -> Counter[str]:
    """Calls that reached their tool, per tool, blind worker labels mapped back to the workers' names; calls that
    never ran (malformed, refused) and episode-ending calls are left out."""
    labels = trajectory.metadata.get("labels") or {}
    name_of = {label: name for name, label in labels.items()} if isinstance(labels, dict) else {}
    return Counter(
        name_of.get(result.call.name, result.call.name)
        for result in trajectory.results
        if result.executed and result.call.name not in NOT_A_TOOL
    )


def render_trace(trajectory: Trajectory, max_chars: int = 12_000) -> str:
    """The trajectory as text, as the failure classifier reads it: the task, each orchestrator output and each
    observation, the answer and why it stopped (the system prompt left out). A long trace keeps its start and
    end, and says how much was cut."""
    if trajectory.messages:
        parts = [f"[{message.role}]\n{message.content}" for message in trajectory.messages if message.role != "system"]
    else:
        parts = [f"[user]\n{trajectory.question}", *(f"[assistant]\n{turn.output}" for turn in trajectory.turns)]
    parts.append(f"[final answer]\n{trajectory.answer if trajectory.answer is not None else '(none)'}")
    parts.append(f"[stopped]\n{trajectory.stop_reason.value if trajectory.stop_reason else 'unknown'}")
    text = "\n\n".join(parts)
    if len(text) <= max_chars:
        return text
    half = (max_chars - 40) // 2
    return f"{text[:half]}\n\n[… {len(text) - 2 * half} characters cut …]\n\n{text[-half:]}"
