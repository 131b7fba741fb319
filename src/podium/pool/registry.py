"""The tool registry: the one place where calls are validated, run, timed, priced and recorded.

Every failure becomes a status on the result: an unknown tool or arguments that fail the schema are
PARSE_ERR (not executed), an exception is EXEC_ERR and so is a value nested deeper than records keep, the time
limit is TIMEOUT. What a result keeps of a value or a reason follows the size policy of :mod:`podium.core.calls`.
"""

import asyncio
import time
from collections.abc import Iterable, Sequence

from jsonschema.exceptions import best_match

from podium.core.calls import CallUsage, Status, ToolCall, ToolResult, ToolSpec, truncate
from podium.core.jsonsafe import MAX_DEPTH, nesting_depth
from podium.costs.bounds import CostBound
from podium.costs.prices import PriceCatalog
from podium.pool.tool import Tool, ToolOutput, render_value

DEFAULT_MAX_OBSERVATION_CHARS = 16_384
"""About ParaManager's 4,096-token max_tool_response_length at ~4 characters per token."""


class ToolRegistry:
    """Named tools with their prices; dispatches calls concurrently."""

    def __init__(
        self,
        tools: Iterable[Tool] = (),
        *,
        prices: PriceCatalog | None = None,
        max_observation_chars: int = DEFAULT_MAX_OBSERVATION_CHARS,
    ) -> None:
        if max_observation_chars < 1:
            raise ValueError("max_observation_chars must be at least 1")
        self.prices = prices if prices is not None else PriceCatalog.default()
        self.max_observation_chars = max_observation_chars
        self._tools: dict[str, Tool] = {}
        for item in tools:
            self.add(item)

    def add(self, item: Tool) -> None:
        """Register a tool; names are unique."""
        if item.name in self._tools:
            raise ValueError(f"a tool named '{item.name}' is already registered")
        self._tools[item.name] = item

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def names(self) -> list[str]:
        """Tool names in registration order."""
        return list(self._tools)

    def get(self, name: str) -> Tool:
        """The tool called ``name`` (KeyError if absent)."""
        return self._tools[name]

    def specs(self) -> list[ToolSpec]:
        """What the orchestrator is shown."""
        return [item.spec for item in self._tools.values()]

    def subset(self, allow: Sequence[str] | None = None, deny: Sequence[str] = ()) -> "ToolRegistry":
        """A registry with only the allowed (default: all) and not denied tools, sharing prices."""
        unknown = (set(allow or ()) | set(deny)) - set(self._tools)
        if unknown:
            raise KeyError(f"unknown tools in allow/deny lists: {sorted(unknown)}")
        kept = [t for name, t in self._tools.items() if (allow is None or name in allow) and name not in deny]
        return ToolRegistry(kept, prices=self.prices, max_observation_chars=self.max_observation_chars)

    def cost_bound(self, call: ToolCall) -> CostBound:
        """The most ``call`` can cost: the tool's catalog price at its time limit plus its model spend bound.
        A call that will be refused as malformed costs nothing."""
        item = self._tools.get(call.name)
        if item is None or not isinstance(call.arguments, dict) or not item.validator.is_valid(call.arguments):
            return CostBound()
        bound = CostBound(usd=self.price_bound(item.name))
        return bound + item.cost_bound(call.arguments) if item.cost_bound else bound

    def price_bound(self, name: str) -> float:
        """The most the catalog charges for one call of tool ``name``: per call, plus per second up to its
        time limit."""
        price = self.prices.tool_price(name)
        return price.per_call_usd + price.per_second_usd * self._tools[name].timeout_s

    async def call(self, call: ToolCall) -> ToolResult:
        """Validate and run one call; never raises for a failure of the call itself."""
        item = self._tools.get(call.name)
        if item is None:
            available = ", ".join(self._tools) or "none"
            return self._refused(call, f"unknown tool '{call.name}'; available tools: {available}")
        if not isinstance(call.arguments, dict):
            return self._refused(call, f"arguments of '{call.name}' must be a JSON object, got {call.arguments!r}")
        error = best_match(item.validator.iter_errors(call.arguments))
        if error is not None:
            where = "/".join(str(part) for part in error.absolute_path) or "(arguments)"
            return self._refused(call, f"arguments of '{call.name}' fail its schema at {where}: {error.message}")
        started = time.perf_counter()
        try:
            output = await asyncio.wait_for(item.invoke(call.arguments), timeout=item.timeout_s)
        except TimeoutError:
            timeout = ToolOutput(None, Status.TIMEOUT, f"exceeded the {item.timeout_s:g} s time limit")
            return self._finished(call, item, timeout, started)
        except Exception as exception:  # the tool's failure is the orchestrator's observation
            reason = f"{type(exception).__name__}: {exception}"
            return self._finished(call, item, ToolOutput(None, Status.EXEC_ERR, reason), started)
        if not isinstance(output, ToolOutput):
            output = ToolOutput(output)
        if nesting_depth(output.value) > MAX_DEPTH:  # nothing reads such a value back: refuse it, say why
            reason = f"the tool returned a value nested more than {MAX_DEPTH} levels deep; it was not kept"
            spent = output.usage.model_copy(update={"price": None})
            output = ToolOutput(None, Status.EXEC_ERR, reason, worker=output.worker, usage=spent)
        return self._finished(call, item, output, started)

    def _refused(self, call: ToolCall, reason: str) -> ToolResult:
        return ToolResult(call=call, status=Status.PARSE_ERR, reason=reason, observation=reason)

    def _finished(self, call: ToolCall, item: Tool, output: ToolOutput, started: float) -> ToolResult:
        latency = time.perf_counter() - started
        price = self.prices.tool_price(item.name)
        observation, truncated = self._observe(output)
        return ToolResult(
            call=call,
            status=output.status,
            value=output.value,
            reason=output.reason,
            observation=observation,
            truncated=truncated,
            worker=output.worker,
            usage=CallUsage(
                **output.usage.model_dump(exclude={"usd"}),
                # A per-call price is a charge for a served request; compute time is paid whatever the outcome,
                # up to the time limit (a call is stopped there; scheduling jitter past it is not billed).
                usd=output.usage.usd + price.cost(min(latency, item.timeout_s), served=output.status is Status.OK),
                latency_s=latency,
                cost_units=price.cost_units,
            ),
        )

    def _observe(self, output: ToolOutput) -> tuple[str, bool]:
        if output.observation is not None:
            text = output.observation
        elif output.value is not None:
            text = render_value(output.value)
        else:
            text = output.reason or ""
        return truncate(text, self.max_observation_chars)
