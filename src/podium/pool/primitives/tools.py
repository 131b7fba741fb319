"""One tool per primitive: it takes the routed worker (``model``), the route's ``instruction`` and the ``inputs`` from
the subtasks it depends on, and performs the primitive with that worker. The DAG policy calls these tools through
the runtime, so each call is validated, budgeted (its cost bound reserved before it runs), timed and recorded like
any other; they are not offered to the orchestrator as tools of their own. What a primitive pays for besides its
worker's tokens is priced here, for the pool table (:func:`primitive_price`) and for the budget (:func:`cost_bound`)."""

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from podium.core.calls import ToolCall
from podium.costs.bounds import CostBound, estimate_tokens
from podium.costs.prices import ToolPrice
from podium.pool.kit import PoolKit
from podium.pool.primitives.answer import direct_answer, reason
from podium.pool.primitives.api import call_api
from podium.pool.primitives.database import database_query
from podium.pool.primitives.documents import extract_field, parse_structured, read_code, read_document
from podium.pool.primitives.execute import execute_python, execute_shell, symbolic_math
from podium.pool.primitives.job import Job
from podium.pool.primitives.retrieve import MAX_QUERIES, fact_check, web_search
from podium.pool.primitives.templates import template
from podium.pool.tool import Tool, ToolOutput

TIMEOUT_GRACE_S = 5.0


@dataclass(frozen=True)
class Performer:
    """How a primitive is done and what it can cost at most."""

    run: Callable[[Job], Awaitable[ToolOutput]]
    summary: str
    """One line for the orchestrator's pool table."""
    generations: int = 1
    """Worker generations per call."""
    reads_context: bool = False
    """Whether the worker's prompt may hold up to ``max_context_chars`` of files, passages or schemas."""
    sandbox_runs: int = 0
    """Sandbox runs per call (each charged per second at the python or symbolic_math price)."""
    searches: int = 0
    """Search tool calls per call."""


PERFORMERS: dict[str, Performer] = {
    "direct_answer": Performer(direct_answer, "answers at once, no reasoning"),
    "reason": Performer(reason, "reasons step by step, answer in \\boxed{}"),
    "web_search": Performer(web_search, "writes queries, returns retrieved passages", searches=MAX_QUERIES),
    "database_query": Performer(
        database_query, "one read-only SQL query over an attached SQLite database", reads_context=True, sandbox_runs=2
    ),
    "fact_check": Performer(
        fact_check, "verdict on a claim from retrieved evidence", 2, reads_context=True, searches=MAX_QUERIES
    ),
    "read_document": Performer(read_document, "answers from attached documents", reads_context=True),
    "read_code": Performer(read_code, "answers about attached code, citing lines", reads_context=True),
    "extract_field": Performer(extract_field, "named fields as schema-checked JSON", reads_context=True),
    "parse_structured": Performer(parse_structured, "text to schema-checked JSON", reads_context=True),
    "execute_python": Performer(execute_python, "writes and runs Python in the sandbox", sandbox_runs=1),
    "execute_shell": Performer(execute_shell, "writes and runs a POSIX shell script in the sandbox", sandbox_runs=1),
    "call_api": Performer(call_api, "one HTTP request to a declared endpoint"),
    "symbolic_math": Performer(symbolic_math, "one sympy operation in the sandbox", sandbox_runs=1),
}
"""Every primitive of the vocabulary and how it is performed."""


def primitive_call(worker: str, primitive: str, instruction: str, inputs: str, call_id: str) -> ToolCall:
    """The call that performs ``primitive`` with ``worker`` (a shown label): the route's ``instruction`` and the
    ``inputs`` it works on (the results of the subtasks it depends on; may be empty)."""
    arguments = {"model": worker, "instruction": instruction}
    if inputs:
        arguments["inputs"] = inputs
    return ToolCall(name=primitive, arguments=arguments, id=call_id)


def primitive_tools(kit: PoolKit, admitted: dict[str, list[str]]) -> list[Tool]:
    """The tools of the primitives some worker admits; ``admitted`` maps a primitive to the labels of its workers."""
    return [_tool(kit, name, sorted(labels)) for name, labels in admitted.items() if labels]


def _tool(kit: PoolKit, name: str, labels: list[str]) -> Tool:
    performer = PERFORMERS[name]

    async def perform(model: str, instruction: str, inputs: str = "") -> ToolOutput:
        return await performer.run(Job(kit, name, model, instruction, inputs))

    parameters = {
        "type": "object",
        "properties": {
            "model": {"enum": labels, "description": "The worker that performs it."},
            "instruction": {"type": "string", "minLength": 1, "description": "What to do (the route's text)."},
            "inputs": {"type": "string", "description": "Results of the subtasks it depends on."},
        },
        "required": ["model", "instruction"],
        "additionalProperties": False,
    }
    return Tool.from_schema(
        name,
        performer.summary,
        parameters,
        perform,
        timeout_s=_timeout(kit, performer, labels),
        cost_bound=lambda arguments: cost_bound(kit, performer, name, arguments),
    )


def _timeout(kit: PoolKit, performer: Performer, labels: list[str]) -> float:
    worker = max(kit.workers[label].call_timeout_s for label in labels)
    sandbox = kit.sandbox.config.wall_time_s * performer.sandbox_runs
    api = max((endpoint.timeout_s for endpoint in kit.config.api_endpoints), default=0.0)
    return worker * performer.generations + sandbox + api + TIMEOUT_GRACE_S


def primitive_price(kit: PoolKit, primitive: str) -> ToolPrice:
    """What ``primitive`` pays for on top of the worker's tokens, as the pool table shows it: sandbox time, one
    search (the pool's search tool), one request (the dearest API endpoint)."""
    performer = PERFORMERS[primitive]
    if performer.sandbox_runs:
        return kit.sandbox_price(primitive)
    if performer.searches and kit.search_tool is not None:
        return kit.prices.tool_price(kit.search_tool)
    if primitive == "call_api" and kit.config.api_endpoints:
        return max((e.price for e in kit.config.api_endpoints), key=lambda p: (p.per_call_usd, p.per_second_usd))
    return ToolPrice()


def cost_bound(kit: PoolKit, performer: Performer, name: str, arguments: dict[str, Any]) -> CostBound:
    """The most one call can cost: full generations over the largest prompt it may build, plus the sandbox time,
    searches and API requests it may pay for."""
    label = arguments["model"]
    chosen = template(name)
    prompt = chosen.system + chosen.user + str(arguments.get("instruction", "")) + str(arguments.get("inputs", ""))
    tokens = estimate_tokens(prompt) + (
        kit.config.primitive_limits.max_context_chars // 3 if performer.reads_context else 0
    )
    max_tokens = kit.workers[label].max_tokens
    price = kit.backends[label].price
    generation = CostBound(usd=price.cost(tokens, max_tokens), tokens=tokens + max_tokens) * performer.generations
    usd = performer.sandbox_runs * kit.sandbox_price(name).cost(kit.sandbox.config.wall_time_s)
    usd += performer.searches * kit.tool_bound(kit.search_tool)
    if name == "call_api":
        usd += max((e.price.cost(e.timeout_s) for e in kit.config.api_endpoints), default=0.0)
    return generation + CostBound(usd=usd)
