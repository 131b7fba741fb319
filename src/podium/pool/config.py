"""The pool configuration (YAML): workers, tools, agent roles, blind labels, sandbox, prices, and what primitives
work on (attachments, API endpoints, schemas) and the file of model descriptions."""

from pathlib import Path
from typing import Any, Literal, Self, get_args

from pydantic import Field, NonNegativeInt, PositiveFloat, PositiveInt, model_validator

from podium.backends.factory import AnySpec, HttpBackendSpec, LocalBackendSpec, ReplayBackendSpec, ScriptedBackendSpec
from podium.backends.replay import LatencyModel
from podium.config import Config
from podium.costs.prices import ModelPrice
from podium.errors import ConfigError
from podium.pool.builtin.mcp import McpServerConfig
from podium.pool.builtin.search import LocalSearchConfig, WebSearchConfig
from podium.pool.resources import ApiEndpoint, Attachment, PrimitiveLimits, checked_schema
from podium.recording import read_manifest
from podium.sandbox import SandboxConfig

BasicTool = Literal["python", "symbolic_math", "local_search", "web_search", "check_arithmetic"]
SEARCH_TOOLS = ("local_search", "web_search")
"""The basic tools that search, in the order roles and primitives prefer them."""
RoleName = Literal["standard_reasoner", "critical_reviewer", "knowledge_searcher", "code_reasoner", "ensemble_solver"]
Primitive = Literal[
    "direct_answer",
    "reason",
    "web_search",
    "database_query",
    "fact_check",
    "read_document",
    "read_code",
    "extract_field",
    "parse_structured",
    "execute_python",
    "execute_shell",
    "call_api",
    "symbolic_math",
]
"""Uno-Orchestra's primitives (seed 003, Table 6): what a worker is asked to do with a subtask. Worker configs, the
DAG grammar and its validator all use this vocabulary; :mod:`podium.pool.primitives` performs each one."""
PRIMITIVES: tuple[str, ...] = get_args(Primitive)
"""Every primitive, in the order of Uno's Table 6."""


class WorkerConfig(Config):
    """A model in the pool."""

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_.\-]*$")
    """The worker's name in the pool (its tool name, unless blind labels hide it)."""
    backend: Literal["http", "local", "scripted", "replay"]
    """How to reach it: an OpenAI-compatible endpoint, a model loaded in-process, scripted replies, or a
    model's recorded answers replayed (``podium.backends.replay``)."""
    model: str
    """The model's name at the backend, and for pricing."""
    base_url: str | None = None
    """For ``http``: the endpoint root, e.g. ``http://127.0.0.1:8000/v1``."""
    api_key_env: str | None = None
    """For ``http``: environment variable holding the API key."""
    path: str | None = None
    """For ``local``: checkpoint directory or hub id; empty means the embedded SmolLM2-135M-Instruct. For
    ``replay``: the recording (CSV with ``prompt``, ``MODEL`` and ``MODEL_response`` columns, or the directory of a
    Podium recording, whose worker of this name is replayed, else its worker of this ``model``)."""
    adapter: str | None = None
    """For ``local``: a LoRA adapter directory merged into the model (relative to the pool file)."""
    latency: LatencyModel = Field(default_factory=LatencyModel)
    """For ``replay``: the modelled latency of one call."""
    replies: list[str] = Field(default_factory=list)
    """For ``scripted``: the replies, in order (the last repeats)."""
    price: ModelPrice | None = None
    """Token prices; when absent they come from the run's price catalog by ``model`` (and ``provider``). An
    ``http`` model found in no catalog is an error; ``local`` and ``scripted`` ones are then free."""
    provider: str | None = None
    """genai-prices provider id for the price lookup (e.g. ``together``)."""
    description: str = ""
    """What the model is good at, shown to the orchestrator; a description for this worker in the pool's
    ``descriptions`` file (written by ``podium describe-model``) takes its place."""
    primitives: list[Primitive] = Field(default_factory=lambda: ["direct_answer", "reason"])
    """Uno primitives this worker may be routed (its admissible (model, primitive) pairs); each pair costs the
    worker's tokens plus what the primitive uses (sandbox time, searches, API calls)."""
    max_tokens: PositiveInt = 1024
    """Completion budget of one call to this worker."""
    timeout_s: PositiveFloat = 120.0
    """Time limit of one call (for ``http``: of one attempt)."""
    max_retries: NonNegativeInt = 3
    """For ``http``: retries on connection errors, 429 and 5xx."""
    max_concurrent: PositiveInt = 8
    """For ``http``: most requests in flight."""
    structured_outputs: Literal["none", "vllm"] = "none"
    """For ``http``: ``vllm`` when the server is vLLM ≥ 0.12, so an orchestrator served there generates its
    actions under the policy's grammar."""

    @property
    def call_timeout_s(self) -> float:
        """The most one call to this worker can take: every attempt (an ``http`` worker retries ``max_retries``
        times) at ``timeout_s``."""
        return self.timeout_s * (self.max_retries + 1)

    def spec(self) -> AnySpec:
        """The backend spec this worker describes, for the backend factory."""
        if self.backend == "http":
            return HttpBackendSpec(
                model=self.model,
                base_url=self.base_url or "",
                api_key_env=self.api_key_env,
                timeout_s=self.timeout_s,
                max_retries=self.max_retries,
                max_concurrent=self.max_concurrent,
                structured_outputs=self.structured_outputs,
                price=self.price,
                provider=self.provider,
            )
        if self.backend == "replay":
            return ReplayBackendSpec(
                model=self.model, path=self.path or "", worker=self.name, latency=self.latency, price=self.price
            )
        if self.backend == "local":
            return LocalBackendSpec(model=self.model, path=self.path, adapter=self.adapter, price=self.price)
        return ScriptedBackendSpec(model=self.model, replies=self.replies, repeat_last=True, price=self.price)

    @model_validator(mode="after")
    def _backend_fields(self) -> Self:
        if self.backend == "http" and not self.base_url:
            raise ValueError(f"worker '{self.name}': backend 'http' needs base_url")
        if self.backend == "replay" and not self.path:
            raise ValueError(f"worker '{self.name}': backend 'replay' needs path (the recording)")
        if self.backend == "scripted" and not self.replies:
            raise ValueError(f"worker '{self.name}': backend 'scripted' needs replies")
        return self


class BlindConfig(Config):
    """Anonymous worker labels (Uno §5): the orchestrator sees labels, not brand names."""

    enabled: bool = False
    """Show workers under labels; the mapping to real models is seeded and resampled per episode."""
    style: Literal["numbered", "pseudonym"] = "numbered"
    """``Worker1..K`` or pseudonyms such as ``reasoner-2``."""
    seed: int = 0
    """Seed of the built pool's mapping and of ``podium eval``'s, which draws each attempt's from this seed, the
    item and the sample (data collection and rollouts draw from their own seeds); ``Pool.relabelled(seed)`` draws
    another."""


class PoolConfig(Config):
    """Everything the orchestrator may call."""

    workers: list[WorkerConfig] = Field(min_length=1)
    """The models. Each becomes a tool (its description and price shown) and a possible role model."""
    tools: list[BasicTool] = Field(default_factory=lambda: ["python", "symbolic_math"])
    """Basic tools to include."""
    roles: list[RoleName] = Field(default_factory=list)
    """Agent roles (ParaManager Table 7) to include as tools."""
    role_worker: str | None = None
    """Worker that roles use when a call names none; default: the first worker."""
    workers_as_tools: bool = True
    """Expose each worker as a tool that answers a prompt (ToolOrchestra's models-as-tools)."""
    ensemble_samples: PositiveInt = 4
    """Samples ``ensemble_solver`` draws and votes over."""
    blind: BlindConfig = Field(default_factory=BlindConfig)
    """Anonymous worker labels."""
    local_search: LocalSearchConfig = Field(default_factory=LocalSearchConfig)
    """Index and limits of ``local_search``."""
    web_search: WebSearchConfig = Field(default_factory=WebSearchConfig)
    """Endpoint and key variable of ``web_search``."""
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    """Limits of the python sandbox (python, symbolic_math, code_reasoner, code verifiers)."""
    prices: str | None = None
    """Price file merged over Podium's sheet for this pool."""
    max_observation_chars: PositiveInt = 16_384
    """Observations longer than this are truncated."""
    mcp_servers: list[McpServerConfig] = Field(default_factory=list)
    """MCP servers (stdio or streamable HTTP) whose tools join the pool as ``<name>__<tool>``."""
    attachments: list[Attachment] = Field(default_factory=list)
    """Files every episode's primitives may read: SQLite databases (database_query), documents and code."""
    api_endpoints: list[ApiEndpoint] = Field(default_factory=list)
    """The only HTTP endpoints call_api may reach (URL, method, body schema, timeout, price)."""
    schemas: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Named JSON schemas that extract_field and parse_structured instructions may name (``schema: NAME``)."""
    primitive_limits: PrimitiveLimits = Field(default_factory=PrimitiveLimits)
    """Size limits of attached files, query results and API responses."""
    descriptions: str | None = None
    """Descriptions file (``podium describe-model --out``); a worker's entry there replaces its description."""

    @property
    def search_tool(self) -> str | None:
        """The search tool that knowledge_searcher and the web_search and fact_check primitives run:
        ``local_search`` when the pool has it (free, and needs no key), else ``web_search``."""
        return next((name for name in SEARCH_TOOLS if name in self.tools), None)

    def replayed(self, recording: str | Path) -> Self:
        """This pool with each worker that ``recording`` (a ``podium routing record`` directory) holds answering
        from it instead of being called (at the price it was recorded at where the pool gives it none); the other
        workers, tools and settings unchanged. An error where the recording holds none of its workers."""
        recorded = {worker.name: worker for worker in read_manifest(recording).workers}
        if not recorded.keys() & {worker.name for worker in self.workers}:
            raise ConfigError(
                f"replay: the recording {recording} holds none of the pool's workers (it has {sorted(recorded)}, the "
                f"pool {[worker.name for worker in self.workers]})"
            )
        workers = [
            worker.model_copy(update={"backend": "replay", "path": str(recording)})
            if worker.name in recorded
            else worker
            for worker in self.workers
        ]
        return self.model_copy(update={"workers": workers})

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        names = [worker.name for worker in self.workers]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"workers: names must be unique, repeated: {duplicates}")
        if self.role_worker is not None and self.role_worker not in names:
            raise ValueError(f"role_worker: '{self.role_worker}' is not a worker (workers: {names})")
        clash = set(names) & (set(self.tools) | set(self.roles))
        if clash:
            raise ValueError(f"workers: names {sorted(clash)} clash with tool or role names")
        if "knowledge_searcher" in self.roles and self.search_tool is None:
            raise ValueError("roles: knowledge_searcher needs a search tool (local_search or web_search) in tools")
        for field, items in (("attachments", self.attachments), ("api_endpoints", self.api_endpoints)):
            repeated = sorted({i.name for i in items if [j.name for j in items].count(i.name) > 1})
            if repeated:
                raise ValueError(f"{field}: names must be unique, repeated: {repeated}")
        for name, schema in self.schemas.items():
            try:
                checked_schema(schema)
            except ValueError as error:
                raise ValueError(f"schemas.{name}: {error}") from error
        self._primitives_have_what_they_need()
        return self

    def _primitives_have_what_they_need(self) -> None:
        needs = {
            "web_search": (self.search_tool is not None, "a search tool in tools"),
            "fact_check": (self.search_tool is not None, "a search tool in tools"),
            "call_api": (bool(self.api_endpoints), "api_endpoints to call"),
        }
        for index, worker in enumerate(self.workers):
            for primitive in worker.primitives:
                present, what = needs.get(primitive, (True, ""))
                if not present:
                    raise ValueError(f"workers.{index}.primitives: '{primitive}' needs {what}")
