"""The pool configuration (YAML): workers, tools, agent roles, blind labels, sandbox, prices, and what primitives
work on (attachments, API endpoints, schemas) and the file of model descriptions."""

from pathlib import Path
from typing import Any, Literal, Self, get_args

from pydantic import (
    Field,
    ModelWrapValidatorHandler,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from podium.backends.factory import BACKEND_SPECS, AnySpec, BackendSpec, ReplayBackendSpec
from podium.config import Config
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
    """A model in the pool: its own settings, and its backend written beside them (``backend: http`` with the
    fields of :class:`~podium.backends.factory.HttpBackendSpec`, ``base_url`` and the others, in the same entry)."""

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_.\-]*$")
    """The worker's name in the pool (its tool name, unless blind labels hide it)."""
    backend: BackendSpec
    """How to reach it, with that backend's fields beside ``backend``: ``http`` (an OpenAI-compatible endpoint:
    ``HttpBackendSpec``), ``local`` (a model loaded in-process: ``LocalBackendSpec``), ``scripted`` (scripted replies:
    ``ScriptedBackendSpec``) or ``replay`` (a model's recorded answers replayed: ``ReplayBackendSpec``, whose
    ``worker`` is by default this worker's name)."""
    description: str = ""
    """What the model is good at, shown to the orchestrator; a description for this worker in the pool's
    ``descriptions`` file (written by ``podium describe-model``) takes its place."""
    primitives: list[Primitive] = Field(default_factory=lambda: ["direct_answer", "reason"])
    """Uno primitives this worker may be routed (its admissible (model, primitive) pairs); each pair costs the
    worker's tokens plus what the primitive uses (sandbox time, searches, API calls)."""
    max_tokens: PositiveInt = 1024
    """Completion budget of one call to this worker."""
    timeout_s: PositiveFloat = 120.0
    """Time limit of one call (for ``http``: of one attempt, the backend's ``timeout_s``)."""
    max_retries: NonNegativeInt = 3
    """For ``http``: the backend's ``max_retries`` (a call's time limit counts every attempt)."""

    @property
    def model(self) -> str:
        """The model's name at its backend, and for pricing."""
        return self.backend.model

    @property
    def call_timeout_s(self) -> float:
        """The most one call to this worker can take: every attempt (an ``http`` worker retries ``max_retries``
        times) at ``timeout_s``."""
        return self.timeout_s * (self.max_retries + 1)

    @model_validator(mode="wrap")
    @classmethod
    def _backend_beside(cls, data: Any, handler: ModelWrapValidatorHandler[Self]) -> Self:
        """A worker entry as written (``backend: KIND`` and that backend's fields beside the worker's own) with its
        backend fields validated by the spec of that kind: errors name the field where the entry writes it. A
        worker names its ``model``."""
        if not isinstance(data, dict) or not isinstance(data.get("backend"), str):
            return handler(data)
        own = {key: value for key, value in data.items() if key in cls.model_fields}
        fields = {key: value for key, value in data.items() if key not in cls.model_fields}
        if data["backend"] == "http":  # its attempts run under the worker's time limit and retries
            fields |= {key: own.get(key, cls.model_fields[key].default) for key in HTTP_CALL_LIMITS}
        if data["backend"] == "replay":
            fields.setdefault("worker", own.get("name"))
        return handler({**own, "backend": _backend_spec(data["backend"], fields)})

    @model_serializer(mode="wrap")
    def _flat(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """The entry as written: the backend's fields beside the worker's own, and always its ``model`` (which a
        worker must name, even where its spec has a default that a dump without defaults would leave out)."""
        data = handler(self)
        backend = dict(data.pop("backend", None) or {})
        kind = backend.pop("kind", self.backend.kind)
        if kind == "http":
            backend = {key: value for key, value in backend.items() if key not in HTTP_CALL_LIMITS}
        model = backend.pop("model", self.backend.model)
        return {"name": data.pop("name", self.name), "backend": kind, "model": model, **backend, **data}


HTTP_CALL_LIMITS = ("timeout_s", "max_retries")
"""The worker's fields an ``http`` backend runs its attempts under."""


def _backend_spec(kind: str, fields: dict[str, Any]) -> AnySpec:
    """The backend spec of ``kind`` with a worker entry's backend ``fields``; its problems are raised as the
    worker's own, at the fields the entry writes (a worker names its ``model``, which some specs default)."""
    if kind not in BACKEND_SPECS:
        *others, last = (f"'{name}'" for name in BACKEND_SPECS)
        expected = f"{', '.join(others)} or {last}"
        problem = InitErrorDetails(type="literal_error", loc=("backend",), input=kind, ctx={"expected": expected})
        raise ValidationError.from_exception_data("WorkerConfig", [problem])
    problems = []
    try:
        spec = BACKEND_SPECS[kind].model_validate({"kind": kind, **fields})
    except ValidationError as error:
        problems = [
            InitErrorDetails(type=PydanticCustomError(problem["type"], "{message}", {"message": problem["msg"]}),
                             loc=problem["loc"], input=problem["input"])
            for problem in error.errors()
        ]  # fmt: skip
    if "model" not in fields and not any(problem["loc"] == ("model",) for problem in problems):
        problems.append(InitErrorDetails(type="missing", loc=("model",), input=fields))
    if problems:
        raise ValidationError.from_exception_data("WorkerConfig", problems)
    return spec


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
            worker.model_copy(
                update={
                    "backend": ReplayBackendSpec(
                        model=worker.model, path=str(recording), worker=worker.name, price=worker.backend.price
                    )
                }
            )
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
