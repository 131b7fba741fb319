"""The pool as ToolOrchestra's preference tools, and the rule checks of a proposed (instruction, vector) pair.

The tools are the pool's basic tools, its workers (when they are tools) and its roles, in that order; the vector
has one weight per tool, then outcome, compute and latency. Rules, each a reason when broken:

- the vector has tools + 3 entries, each in [0, 1], not all 0;
- an instruction that keeps data local or avoids API calls gives 0 to every tool that reaches an outside service
  (web search, workers behind an HTTP endpoint, roles played by one);
- an instruction that asks for free tools gives 0 to every tool with a price;
- a tool the instruction tells to avoid gets 0; a tool it asks to use gets more than 0;
- an instruction that asks for speed weighs latency above 0; for low cost, compute; for correctness, outcome
  (what it asks for, in so many words: "whatever it costs" asks for no saving).
"""

import re
from dataclasses import dataclass

from podium.core.preference import OUTCOME_KEYS
from podium.costs.prices import PriceCatalog
from podium.pool.config import PoolConfig

LOCAL_ONLY = re.compile(
    r"\b(?:avoid|no|without|don't|do not|never)\b[^.]{0,40}\b(?:api|apis|external|cloud|third[- ]party|internet)\b"
    r"|\b(?:confidential|private|privacy|sensitive|on[- ]prem\w*|offline|stay(?:s)? (?:on|in)|local(?:ly)? only)\b",
    re.IGNORECASE,
)
FREE_ONLY = re.compile(r"\b(?:free|no cost|without paying|zero cost|don't pay|do not pay|nothing paid)\b", re.I)
SPEED = re.compile(
    r"\b(?:fast|faster|fastest|quick|quickly|low latency|asap|as soon as possible|hurry|urgent|promptly)\b", re.I
)
COST = re.compile(
    r"\b(?:cheap|cheaper|cheapest|inexpensive|affordable|save money|budget|low(?:er)? costs?|costs? down"
    r"|minimi[sz]e (?:the )?costs?|cost[- ]effective)\b",
    re.I,
)
QUALITY = re.compile(
    r"\b(?:accurate|accuracy|correct answer|right answer|best answer|high quality|precise|precision)\b", re.I
)
AVOID = r"\b(?:avoid|not use|don't use|never use|without|no)\s+(?:the\s+|any\s+)?{name}\b"
USE = r"\b(?:use|prefer|rely on|favou?r|call)\s+(?:the\s+|only\s+)?{name}\b"


@dataclass(frozen=True)
class PoolTool:
    """One preference tool and what the rules need to know about it."""

    name: str
    kind: str
    """``tool``, ``model`` or ``role``."""
    description: str
    price: str
    """The price as the proposer reads it."""
    paid: bool
    """Whether calling it costs money."""
    external: bool
    """Whether it reaches an outside service."""


def pool_tools(
    config: PoolConfig, prices: PriceCatalog, worker_prices: dict[str, tuple[float, float]]
) -> list[PoolTool]:
    """The pool's preference tools in vector order. ``worker_prices``: worker → (input, output) USD per 1M tokens."""
    tools: list[PoolTool] = []
    for name in config.tools:
        price = prices.tool_price(name)
        paid = price.per_call_usd > 0 or price.per_second_usd > 0
        text = f"${price.per_call_usd:g}/call + ${price.per_second_usd:g}/s" if paid else "free"
        tools.append(PoolTool(name, "tool", name.replace("_", " "), text, paid, name == "web_search"))
    workers = {worker.name: worker for worker in config.workers}
    if config.workers_as_tools:
        for worker in config.workers:
            low, high = worker_prices[worker.name]
            text = f"${low:g}/${high:g} per 1M in/out tokens"
            tools.append(
                PoolTool(
                    worker.name,
                    "model",
                    worker.description or worker.model,
                    text,
                    low + high > 0,
                    worker.backend.kind == "http",
                )
            )
    role_worker = workers[config.role_worker or config.workers[0].name]
    low, high = worker_prices[role_worker.name]
    for role in config.roles:
        cost = prices.tool_price(role).cost_units
        text = f"{cost:g} cost units; runs {role_worker.name} at ${low:g}/${high:g} per 1M tokens"
        tools.append(
            PoolTool(role, "role", role.replace("_", " "), text, low + high > 0, role_worker.backend.kind == "http")
        )
    return tools


def _mentions(pattern: str, name: str, instruction: str) -> bool:
    spelled = re.escape(name).replace("_", "[ _-]?")
    return re.search(pattern.format(name=spelled), instruction, re.IGNORECASE) is not None


def rule_problems(instruction: str, vector: list[float], tools: list[PoolTool]) -> list[str]:
    """Every rule the pair breaks (empty when it passes)."""
    expected = len(tools) + len(OUTCOME_KEYS)
    if len(vector) != expected:
        return [f"vector has {len(vector)} entries, expected {expected} (tools + outcome, compute, latency)"]
    problems = []
    if any(not 0.0 <= weight <= 1.0 for weight in vector):
        problems.append("a weight lies outside [0, 1]")
    if not any(vector):
        problems.append("every weight is 0")
    weights = dict(zip([tool.name for tool in tools], vector, strict=False))
    outcome, compute, latency = vector[-3:]
    if LOCAL_ONLY.search(instruction):
        problems += [f"keeps data local, yet weighs external {t.name}" for t in tools if t.external and weights[t.name]]
    if FREE_ONLY.search(instruction):
        problems += [f"asks for free tools, yet weighs paid {t.name}" for t in tools if t.paid and weights[t.name]]
    for tool in tools:
        if _mentions(AVOID, tool.name, instruction) and weights[tool.name]:
            problems.append(f"says to avoid {tool.name}, yet weighs it")
        elif _mentions(USE, tool.name, instruction) and not weights[tool.name]:
            problems.append(f"asks for {tool.name}, yet gives it 0")
    for pattern, weight, what in (
        (SPEED, latency, "latency"),
        (COST, compute, "compute"),
        (QUALITY, outcome, "outcome"),
    ):
        if pattern.search(instruction) and not weight:
            problems.append(f"mentions {what}, yet gives it 0")
    return problems
