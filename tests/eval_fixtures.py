"""Builders of evaluation records for the evaluation tests (hand-made trajectories with known numbers)."""

from podium.core.calls import CallUsage, Status, ToolCall, ToolResult
from podium.core.trajectory import Trajectory, Turn
from podium.evaluate.runner import EvalRecord
from podium.graders.verdict import Verdict


def tool_result(name: str, status: Status = Status.OK, *, usd: float = 0.0, latency_s: float = 0.5) -> ToolResult:
    """One call's result with the given accounting."""
    return ToolResult(
        call=ToolCall(name=name, arguments={"query": "x"}),
        status=status,
        observation=f"{name} says hello",
        reason=None if status is Status.OK else f"{name} failed",
        usage=CallUsage(usd=usd, latency_s=latency_s),
    )


def record(
    item_id: str,
    sample: int = 0,
    *,
    correct: bool = True,
    usd: float = 0.0,
    tokens: int = 0,
    wall_s: float = 1.0,
    calls: list[ToolResult] | None = None,
    system: str = "system",
    benchmark: str = "bench",
    error: str | None = None,
) -> EvalRecord:
    """A record whose one turn spent ``usd`` and ``tokens`` and made ``calls`` (whose costs add to the usage)."""
    turn = Turn(
        index=0,
        output=f"answer for {item_id}",
        usage=CallUsage(input_tokens=tokens, usd=usd, latency_s=0.2),
        results=calls or [],
        wall_s=wall_s,
    )
    trajectory = Trajectory(question=f"question {item_id}", turns=[turn], answer="42", wall_s=wall_s)
    return EvalRecord(
        benchmark=benchmark,
        system=system,
        item_id=item_id,
        sample=sample,
        answer="42",
        gold="42" if correct else "7",
        verdict=Verdict.binary(correct),
        usage=trajectory.usage,
        wall_s=wall_s,
        error=error,
        trajectory=trajectory,
    )
