"""A pool built from its config: the tool registry the orchestrator calls, the primitive tools routed DAG nodes
run on, the summarizer, the worker backends, the blind label mapping, and the table of members rendered into the
orchestrator's system prompt (with the descriptions of the pool's descriptions file, where they are fresh)."""

import random
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from podium.backends.base import ChatBackend
from podium.backends.embedded import EMBEDDED_MODEL
from podium.backends.factory import backend_price, build_backend
from podium.config import read_structured_file
from podium.costs.prices import ModelPrice, PriceCatalog, ToolPrice
from podium.pool.builtin import check_arithmetic_tool, python_tool, symbolic_math_tool
from podium.pool.builtin.mcp import McpClients
from podium.pool.builtin.search import local_search_tool, web_search_tool
from podium.pool.config import PoolConfig, WorkerConfig
from podium.pool.descriptions import with_descriptions
from podium.pool.kit import PoolKit
from podium.pool.primitives.tools import PERFORMERS, primitive_price, primitive_tools
from podium.pool.registry import ToolRegistry
from podium.pool.resources import checked_attachments
from podium.pool.roles import role_tools
from podium.pool.summarizer import summarizer_tool
from podium.pool.tool import Tool
from podium.pool.workers import model_tool
from podium.sandbox import Sandbox

PSEUDONYM_ROLES = ("reasoner", "solver", "analyst", "expert", "thinker", "scholar", "planner", "checker")


@dataclass
class Pool:
    """Everything the orchestrator may call, ready to run."""

    config: PoolConfig
    prices: PriceCatalog
    sandbox: Sandbox
    backends: dict[str, ChatBackend]
    """Worker name → backend (each priced by the pool's catalog)."""
    labels: dict[str, str]
    """Worker name → the label the orchestrator sees (the name itself unless blind), in the order it sees them."""
    mcp: McpClients = field(default_factory=McpClients)
    """Sessions with the pool's MCP servers and their tools (connected once, shared by relabelled and repriced
    copies; :meth:`close` ends them)."""
    registry: ToolRegistry = field(init=False)
    """Tools, models-as-tools and roles under their shown names."""
    helpers: ToolRegistry = field(init=False)
    """The basic tools (and symbolic_math, always) that roles and primitives run for themselves."""
    kit: PoolKit = field(init=False)
    """What the roles and the primitive tools run on."""
    primitives: ToolRegistry = field(init=False)
    """One tool per primitive some worker admits (what a routed DAG node calls); not offered as tools. They
    charge what they use (worker tokens, sandbox time, searches, API calls), nothing for their name."""

    def __post_init__(self) -> None:
        basic = self._basic_tools()
        # Roles and primitives run their helper tools through a registry with the pool's prices, even a tool
        # (python for code_reasoner, symbolic_math for the primitive) that the orchestrator is not offered.
        self.helpers = ToolRegistry(
            basic.values(), prices=self.prices, max_observation_chars=self.config.max_observation_chars
        )
        if "symbolic_math" not in self.helpers:
            self.helpers.add(symbolic_math_tool(self.sandbox))
        config = self.config
        self.kit = PoolKit(
            config=config,
            backends={self.labels[worker.name]: self.backends[worker.name] for worker in self.shown_workers},
            workers={self.labels[worker.name]: worker for worker in self.shown_workers},
            helpers=self.helpers,
            sandbox=self.sandbox,
            default_label=self.labels[config.role_worker or config.workers[0].name],
        )
        self.registry = self._registry(basic)
        self.primitives = self._primitive_registry()

    @property
    def workers(self) -> dict[str, WorkerConfig]:
        return {worker.name: worker for worker in self.config.workers}

    @property
    def shown_workers(self) -> list[WorkerConfig]:
        """The workers in the order the orchestrator sees them: ``labels``' order (the config's, unless blind)."""
        workers = self.workers
        return [workers[name] for name in self.labels]

    def relabelled(self, seed: int) -> "Pool":
        """The same pool under a fresh blind mapping (for a new episode); unchanged when not blind."""
        if not self.config.blind.enabled:
            return self
        return Pool(self.config, self.prices, self.sandbox, self.backends, blind_labels(self.config, seed), self.mcp)

    def repriced(self, sheet: PriceCatalog) -> "Pool":
        """The same pool (same backends, sandbox and labels) priced by ``sheet`` merged over its catalog: tools
        and workers alike, a sheet's entry beating a worker's inline price (ToolOrchestra's random price sheet per
        training instance)."""
        catalog = self.prices.merged(sheet)
        backends = {
            worker.name: self.backends[worker.name].repriced(backend_price(worker.backend, catalog, sheet))
            for worker in self.config.workers
        }
        return Pool(self.config, catalog, self.sandbox, backends, self.labels, self.mcp)

    def table(self, tools: ToolRegistry | None = None, workers: Collection[str] | None = None) -> str:
        """The pool as a text table for the system prompt: names (or blind labels), descriptions, prices and
        primitives of the shown ``workers`` (labels; default all) and ``tools`` (default the pool's)."""
        tools = tools if tools is not None else self.registry
        shown = set(self.labels.values()) if workers is None else set(workers)
        lines = ["| name | kind | description | price | primitives |", "|---|---|---|---|---|"]
        for worker in self.shown_workers:
            if self.labels[worker.name] not in shown:
                continue
            price = self.backends[worker.name].price
            lines.append(
                f"| {self.labels[worker.name]} | model | {worker.description or 'a language model'} | "
                f"${price.input_per_mtok:g}/${price.output_per_mtok:g} per 1M in/out tokens | "
                f"{', '.join(self._priced(primitive) for primitive in worker.primitives)} |"
            )
        all_workers = set(self.labels.values())
        for spec in tools.specs():
            if spec.name in all_workers:
                continue
            cost = _price_text(self.prices.tool_price(spec.name))
            kind = "role" if spec.name in self.config.roles else "tool"
            lines.append(f"| {spec.name} | {kind} | {spec.description} | {cost or 'free'} | |")
        return "\n".join(lines)

    def is_free(self) -> bool:
        """Whether nothing in the pool has a price: no worker's tokens, no tool's call or second."""
        tools = {*self.registry.names(), *self.helpers.names()}
        return all(
            backend.price.input_per_mtok == backend.price.output_per_mtok == 0 for backend in self.backends.values()
        ) and all(
            self.prices.tool_price(name).per_call_usd == self.prices.tool_price(name).per_second_usd == 0
            for name in tools
        )

    def summarizer(
        self, worker: str | None = None, max_tokens: int | None = None, answer_schema: dict[str, Any] | None = None
    ) -> ToolRegistry:
        """The summarizer role (``final_answer``) on ``worker`` (a name; default the role worker, else the first
        worker), its reply at most ``max_tokens`` (default and cap: the worker's own) and JSON of ``answer_schema``
        when given, in a registry of its own: the orchestrator is not offered it as a tool."""
        chosen = self.workers[worker or self.config.role_worker or self.config.workers[0].name]
        limit = min(chosen.max_tokens, max_tokens or chosen.max_tokens)
        tool = summarizer_tool(self.backends[chosen.name], limit, chosen.call_timeout_s, answer_schema)
        return ToolRegistry([tool], prices=self.prices, max_observation_chars=self.config.max_observation_chars)

    def close(self) -> None:
        """End the sessions with the pool's MCP servers (stdio servers stop)."""
        self.mcp.close()

    def admissible_pairs(self) -> dict[tuple[str, str], "PairPrice"]:
        """Uno's admissible (worker label, primitive) pairs with their prices: the worker's tokens plus what the
        primitive itself pays for."""
        return {
            (self.labels[worker.name], primitive): PairPrice(
                self.backends[worker.name].price, primitive_price(self.kit, primitive)
            )
            for worker in self.shown_workers
            for primitive in worker.primitives
        }

    def _priced(self, primitive: str) -> str:
        extra = _price_text(primitive_price(self.kit, primitive))
        return f"{primitive} (+{extra})" if extra else primitive

    def _basic_tools(self) -> dict[str, Tool]:
        config = self.config
        basic: dict[str, Tool] = {}
        if "python" in config.tools or "code_reasoner" in config.roles:
            basic["python"] = python_tool(self.sandbox)
        if "symbolic_math" in config.tools:
            basic["symbolic_math"] = symbolic_math_tool(self.sandbox)
        if "local_search" in config.tools:
            basic["local_search"] = local_search_tool(config.local_search)
        if "web_search" in config.tools:
            basic["web_search"] = web_search_tool(config.web_search)
        if "check_arithmetic" in config.tools:
            basic["check_arithmetic"] = check_arithmetic_tool()
        return basic

    def _registry(self, basic: dict[str, Tool]) -> ToolRegistry:
        config = self.config
        registry = ToolRegistry(prices=self.prices, max_observation_chars=config.max_observation_chars)
        for name in config.tools:
            if name in basic:
                registry.add(basic[name])
        for item in self.mcp.tools:
            registry.add(item)
        if config.workers_as_tools:
            for worker in self.shown_workers:
                backend = self.backends[worker.name]
                registry.add(model_tool(self.labels[worker.name], worker, backend))
        if config.roles:
            for tool in role_tools(self.kit, list(config.roles)):
                registry.add(tool)
        return registry

    def _primitive_registry(self) -> ToolRegistry:
        config = self.config
        admitted = {
            primitive: [self.labels[w.name] for w in self.shown_workers if primitive in w.primitives]
            for primitive in PERFORMERS
        }
        # The primitive tools are free by name: they charge what they use, already priced in their outputs.
        free = PriceCatalog(use_genai_prices=False)
        return ToolRegistry(
            primitive_tools(self.kit, admitted), prices=free, max_observation_chars=config.max_observation_chars
        )


@dataclass(frozen=True)
class PairPrice:
    """The price of an admissible (worker, primitive) pair: the worker's tokens and the primitive's own use."""

    model: ModelPrice
    tool: ToolPrice


def _price_text(price: ToolPrice) -> str:
    parts = (
        f"${price.per_call_usd:g}/call" if price.per_call_usd else "",
        f"${price.per_second_usd:g}/s" if price.per_second_usd else "",
        f"{price.cost_units:g} cost units" if price.cost_units else "",
    )
    return " + ".join(part for part in parts if part)


def blind_labels(config: PoolConfig, seed: int) -> dict[str, str]:
    """Worker name → anonymous label, a seeded random assignment (``Worker1..K`` or pseudonyms), in the labels'
    order: the pool lists its workers in this order, so a worker's place in a list tells no more than its label
    (in the config's order, the first strong worker listed was always the same model)."""
    names = [worker.name for worker in config.workers]
    order = list(range(1, len(names) + 1))
    random.Random(seed).shuffle(order)
    numbered = sorted(zip(order, names, strict=True))
    if config.blind.style == "numbered":
        return {name: f"Worker{number}" for number, name in numbered}
    return {name: f"{PSEUDONYM_ROLES[(number - 1) % len(PSEUDONYM_ROLES)]}-{number}" for number, name in numbered}


def build_pool(config: PoolConfig, prices: PriceCatalog | None = None) -> Pool:
    """Build every backend and tool of ``config`` (prices: Podium's sheet, the pool's file, a worker's inline
    price, then ``prices``, a sheet given explicitly, whose entries beat them all; descriptions: the pool's
    descriptions file where fresh; attachments bound read-only into its sandbox)."""
    config = with_descriptions(_with_attachments(config))
    catalog = pool_catalog(config, prices)
    backends = {worker.name: build_backend(worker.backend, catalog, prices) for worker in config.workers}
    labels = (
        blind_labels(config, config.blind.seed)
        if config.blind.enabled
        else {worker.name: worker.name for worker in config.workers}
    )
    mcp = McpClients.connect(config.mcp_servers)
    return Pool(config, mcp.priced(catalog), Sandbox(config.sandbox), backends, labels, mcp)


def pool_catalog(config: PoolConfig, prices: PriceCatalog | None = None) -> PriceCatalog:
    """The price sheet a pool built from ``config`` runs under: Podium's, the pool's file, then ``prices``."""
    catalog = PriceCatalog.for_run(config.prices)
    return catalog.merged(prices) if prices is not None else catalog


def worker_prices(config: PoolConfig, prices: PriceCatalog | None = None) -> dict[str, ModelPrice]:
    """Worker name → the price :func:`build_pool` gives its backend under ``prices``, without building one."""
    catalog = pool_catalog(config, prices)
    return {worker.name: backend_price(worker.backend, catalog, prices) for worker in config.workers}


def _with_attachments(config: PoolConfig) -> PoolConfig:
    """``config`` with absolute attachment paths, each checked to be a file and bound read-only into the sandbox
    (a relative path is taken from the current directory; :func:`load_pool_config` resolves it from the file)."""
    if not config.attachments:
        return config
    attachments = checked_attachments(config.attachments, Path.cwd())
    paths = [
        *config.sandbox.read_only_paths,
        *(a.path for a in attachments if a.path not in config.sandbox.read_only_paths),
    ]
    sandbox = config.sandbox.model_copy(update={"read_only_paths": paths})
    return config.model_copy(update={"attachments": list(attachments), "sandbox": sandbox})


def load_pool_config(path: str | Path) -> PoolConfig:
    """Read a pool YAML; relative ``prices``, ``descriptions``, attachment and worker ``adapter`` paths are taken
    relative to the pool file."""
    data = read_structured_file(path)
    if isinstance(data, dict):
        for key in ("prices", "descriptions"):
            if isinstance(data.get(key), str):
                data[key] = str((Path(path).parent / data[key]).resolve())
        for section, key in (("attachments", "path"), ("workers", "adapter")):
            for entry in data.get(section) or []:
                if isinstance(entry, dict) and isinstance(entry.get(key), str):
                    entry[key] = str((Path(path).parent / entry[key]).resolve())
    return PoolConfig.from_dict(data, source=str(path))


def embedded_pool_config() -> PoolConfig:
    """The offline pool: the embedded SmolLM2 as worker, the basic tools, the agent roles."""
    return PoolConfig(
        workers=[
            WorkerConfig(
                name="smollm2",
                backend="local",
                model=EMBEDDED_MODEL,
                description="SmolLM2-135M-Instruct, a tiny local model: fast and free, weak at reasoning.",
                primitives=["direct_answer", "reason", "execute_python", "symbolic_math"],
                max_tokens=256,
                timeout_s=600,
                max_retries=0,
            )
        ],
        tools=["python", "symbolic_math", "local_search"],
        roles=["standard_reasoner", "critical_reviewer", "knowledge_searcher", "code_reasoner", "ensemble_solver"],
    )


def resolve_pool_config(source: str | Path | PoolConfig | None) -> PoolConfig:
    """What a config's ``pool`` names: a pool file, an inline pool, or (``None``) the embedded offline pool."""
    if source is None:
        return embedded_pool_config()
    return source if isinstance(source, PoolConfig) else load_pool_config(source)
