"""What a pool lends its agent roles and its primitive tools (:class:`PoolKit`): the workers under their shown
labels, the helper tools, the sandbox and the pool's config, with the choices both make the same way; and the
sum of the several calls one role or primitive makes (:class:`Spent`)."""

from dataclasses import dataclass
from typing import Any

from podium.backends.base import ChatBackend
from podium.core.calls import Status, TokenUsage, ToolCall, ToolResult
from podium.costs.prices import PriceCatalog, ToolPrice
from podium.pool.config import PoolConfig, WorkerConfig
from podium.pool.context import current_episode
from podium.pool.registry import ToolRegistry
from podium.pool.resources import Attachment, AttachmentKind
from podium.pool.tool import ToolOutput
from podium.sandbox import Sandbox


@dataclass
class PoolKit:
    """The parts of one pool its roles and primitive tools run on."""

    config: PoolConfig
    """The pool's config: the roles' settings, the primitives' resources (attachments, endpoints, schemas) and
    limits, the search tool."""
    backends: dict[str, ChatBackend]
    """Worker label → backend."""
    workers: dict[str, WorkerConfig]
    """Worker label → its config (completion budget, time limit)."""
    helpers: ToolRegistry
    """The basic tools roles and primitives run for themselves (search, python, symbolic_math), with the pool's
    prices and limits, whether or not the orchestrator is offered them."""
    sandbox: Sandbox
    """Where primitives run code, shell scripts, SQL and sympy."""
    default_label: str
    """The worker a role call runs on when it names none (the pool's role worker)."""

    @property
    def prices(self) -> PriceCatalog:
        return self.helpers.prices

    @property
    def search_tool(self) -> str | None:
        """The helper that knowledge_searcher, web_search and fact_check search with."""
        return self.config.search_tool

    @property
    def role_timeout_s(self) -> float:
        """Time limit of one role call (several generations and tool calls): ``ensemble_samples + 2`` calls of the
        slowest worker."""
        slowest = max(worker.call_timeout_s for worker in self.workers.values())
        return slowest * (self.config.ensemble_samples + 2)

    async def run_tool(self, call: ToolCall) -> ToolResult:
        """Run a helper tool with the pool's validation, limits and prices."""
        return await self.helpers.call(call)

    def tool_bound(self, name: str | None) -> float:
        """The most one call of helper ``name`` can cost (0 when there is none)."""
        return self.helpers.price_bound(name) if name is not None and name in self.helpers else 0.0

    def sandbox_price(self, primitive: str) -> ToolPrice:
        """What a second of ``primitive``'s sandbox time costs: the symbolic_math tool's price for symbolic_math
        (that tool runs it), the python tool's for the others."""
        return self.prices.tool_price("symbolic_math" if primitive == "symbolic_math" else "python")

    def attachments(self, kind: AttachmentKind) -> list[Attachment]:
        """The attachments of ``kind`` the current call may read: the pool's, then the episode's (an episode's
        attachment replaces a pool attachment of the same name)."""
        episode = current_episode.get()
        named = {a.name: a for a in self.config.attachments}
        named.update({a.name: a for a in (episode.attachments if episode else ())})
        return [a for a in named.values() if a.resolved_kind == kind]


class Spent:
    """Adds up the tokens and dollars of the several calls one role or primitive makes."""

    def __init__(self) -> None:
        self.input_tokens = self.output_tokens = 0
        self.usd = 0.0
        self.prices: dict[str, None] = {}
        """The token prices charged, in order (the keys)."""

    def add(self, output: ToolOutput | ToolResult) -> None:
        usage = output.usage
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        self.usd += usage.usd
        if usage.price:
            self.prices[usage.price] = None

    def output(
        self, value: Any, worker: str, status: Status = Status.OK, reason: str | None = None, **kw: Any
    ) -> ToolOutput:
        usage = TokenUsage(input_tokens=self.input_tokens, output_tokens=self.output_tokens, usd=self.usd,
                           price="; ".join(self.prices) or None)  # fmt: skip
        return ToolOutput(value, status, reason, worker, usage=usage, **kw)
