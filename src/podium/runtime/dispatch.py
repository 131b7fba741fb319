"""The calls of one episode: each reserves its cost bound in the ledger, runs within the deadline and settles its
cost; the episode context (question, history, attachments, the call and its round) is set for the tool it runs,
and the episode hears of each result as it comes in."""

import asyncio
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager

from podium.core.calls import CallUsage, Refusal, Status, ToolCall, ToolResult
from podium.costs.ledger import Ledger, Refused
from podium.policies import Toolset, refused
from podium.pool.registry import ToolRegistry

CallContext = Callable[[ToolCall, tuple[ToolCall, ...]], AbstractContextManager[None]]
"""Sets the episode context for one call of a round while it runs."""


class EpisodeDispatcher:
    """What the episode lends its policy to carry out actions (the :class:`~podium.policies.Dispatcher`)."""

    def __init__(
        self,
        ledger: Ledger,
        context: CallContext,
        finished: Callable[[ToolResult], None],
        toolsets: Mapping[Toolset, ToolRegistry],
    ) -> None:
        self.ledger = ledger
        self.context = context
        self.finished = finished
        self.toolsets = toolsets

    async def run(self, calls: Sequence[ToolCall], toolset: Toolset = "tools") -> list[ToolResult]:
        registry = self.toolsets[toolset]
        round_calls = tuple(calls)
        return list(await asyncio.gather(*(self._metered(call, registry, round_calls) for call in calls)))

    async def _metered(self, call: ToolCall, registry: ToolRegistry, round_calls: tuple[ToolCall, ...]) -> ToolResult:
        ledger = self.ledger

        async def run() -> ToolResult:
            with self.context(call, round_calls):
                try:
                    return await asyncio.wait_for(registry.call(call), timeout=ledger.remaining_seconds())
                except TimeoutError:
                    return refused(call, Status.TIMEOUT, None, "stopped: the episode's deadline passed")

        result = await ledger.metered(registry.cost_bound(call), run, _result_usage, _settled_result)
        if isinstance(result, Refused):
            result = refused(
                call, Status.EXEC_ERR, Refusal.BUDGET, f"the call could exceed the budget ({result.reason})"
            )
        self.finished(result)
        return result


def _result_usage(result: ToolResult) -> CallUsage:
    return result.usage


def _settled_result(result: ToolResult, charged: CallUsage) -> ToolResult:
    return result.model_copy(update={"usage": charged})
