"""tau2-format domains: database + data model + tool functions + policy + tasks (SPEC §6.1).

A domain is a data directory (``db.json``, ``tasks.json``, ``policy.md``) plus a :class:`Toolkit` subclass. The
toolkits are registered by name (:func:`register_domain`), or a directory ships its own in ``tools.py``
(synthesized domains); the data directory comes from the argument, the
``PODIUM_TAU2_DATA`` environment variable, or ``../shared/data/tau2`` beside the repository. An
:class:`Environment` is one episode: a fresh copy of the database with the domain's tools bound to it.
"""

import contextlib
import functools
import hashlib
import importlib.util
import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field

from podium.core.record import Record
from podium.costs.prices import PriceCatalog
from podium.envs.toolkit import ActionKind, Database, Entry, ToolError, Toolkit
from podium.pool.registry import ToolRegistry
from podium.pool.tool import Tool, schema_from_function

DATA_ENV_VAR = "PODIUM_TAU2_DATA"
TOOLS_FILE = "tools.py"
"""A domain directory's own tool functions (synthesized domains); built-in domains are registered instead."""
DEFAULT_DATA_DIR = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "tau2"
"""``../shared/data/tau2`` relative to the repository root."""


class TaskData(Record):
    """tau2 task records carry optional fields that vary between domains and versions; keep them all."""

    model_config = ConfigDict(extra="allow", use_attribute_docstrings=True)


class Action(TaskData):
    """A golden tool call."""

    name: str
    """The tool."""
    arguments: dict[str, Any] = Field(default_factory=dict)
    """Its arguments."""
    action_id: str | None = None
    """Identifier within the task."""


class EvaluationCriteria(TaskData):
    """How a task is judged."""

    actions: list[Action] | None = None
    """Golden calls whose replay defines the expected database."""
    communicate_info: list[str] | None = None
    """Facts the agent must tell the user."""
    nl_assertions: list[str] | None = None
    """Natural-language checks (for an LLM judge; not part of the three criteria)."""


class UserScenario(TaskData):
    """What the simulated user knows and wants."""

    persona: str | None = None
    """How the user behaves."""
    instructions: dict[str, Any] | str
    """Task instructions: reason for call, known and unknown information, what to do."""


class Task(TaskData):
    """One task of a domain."""

    id: str
    """Task id, unique within the domain."""
    user_scenario: UserScenario
    """The user's side."""
    description: dict[str, Any] | None = None
    """Purpose and notes from the task's authors."""
    initial_state: dict[str, Any] | None = None
    """State to set up before the episode (none of the shipped tasks uses one)."""
    evaluation_criteria: EvaluationCriteria | None = None
    """Golden actions and information; absent means nothing to check."""

    @property
    def golden_actions(self) -> list[Action]:
        return list(self.evaluation_criteria.actions or []) if self.evaluation_criteria else []

    @property
    def communicate_info(self) -> list[str]:
        return list(self.evaluation_criteria.communicate_info or []) if self.evaluation_criteria else []


_TOOLKITS: dict[str, type[Toolkit]] = {}
_BUILTIN_MODULES = {"airline": "podium.envs.airline", "retail": "podium.envs.retail"}


def register_domain(name: str, toolkit: type[Toolkit]) -> None:
    """Make a domain's tool functions known under ``name`` (its data directory is ``<data dir>/<name>``)."""
    _TOOLKITS[name] = toolkit


def toolkit_for(name: str) -> type[Toolkit]:
    """The registered toolkit of a domain, importing a built-in one on first use."""
    if name not in _TOOLKITS and name in _BUILTIN_MODULES:
        module = __import__(_BUILTIN_MODULES[name], fromlist=["_"])
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, Toolkit) and value.domain == name:
                register_domain(name, value)
    if name not in _TOOLKITS:
        raise KeyError(f"unknown domain {name!r}; known: {', '.join(known_domains())}")
    return _TOOLKITS[name]


def known_domains(directory: str | Path | None = None) -> list[str]:
    """Every domain name that has tool functions: built-in, registered, or (given a data ``directory``) a folder
    there with its own ``tools.py``."""
    found = set(_TOOLKITS) | set(_BUILTIN_MODULES)
    if directory is not None and Path(directory).is_dir():
        found |= {path.parent.name for path in Path(directory).glob(f"*/{TOOLS_FILE}")}
    return sorted(found)


def data_dir(override: str | Path | None = None) -> Path:
    """Where the domains' data lives: the argument, else ``$PODIUM_TAU2_DATA``, else the default."""
    chosen = override or os.environ.get(DATA_ENV_VAR) or DEFAULT_DATA_DIR
    return Path(chosen)


@dataclass(frozen=True)
class DomainTool:
    """A domain function exposed as a pool tool, with what it does to the database."""

    tool: Tool
    kind: ActionKind


@dataclass
class Domain:
    """A loaded domain: its pristine database text, policy, tasks and toolkit."""

    name: str
    policy: str
    tasks: list[Task]
    toolkit: type[Toolkit]
    db_text: str = field(repr=False)
    """The database as read; every episode parses its own copy, so episodes never share state."""

    @functools.cached_property
    def initial_hash(self) -> str:
        """Hash of the database before any action."""
        return Database(json.loads(self.db_text)).state_hash()

    def task(self, task_id: str) -> Task:
        for task in self.tasks:
            if task.id == task_id:
                return task
        raise KeyError(f"domain {self.name} has no task {task_id!r}")

    def environment(self, task: Task | None = None) -> "Environment":
        """A fresh episode (set up for ``task`` when it has an initial state)."""
        if task is not None and task.initial_state:
            raise ValueError(f"task {task.id}: initial states are not supported ({sorted(task.initial_state)})")
        return Environment(self, Database(json.loads(self.db_text)))


def toolkit_from_file(path: Path, name: str) -> type[Toolkit]:
    """The toolkit that a domain directory's ``tools.py`` defines for ``name`` (synthesized domains ship their
    functions as code beside their data). The file runs as Python: load only domains you trust."""
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(f"podium_domain_{name}_{digest}", path)
    if spec is None or spec.loader is None:
        raise KeyError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    found = [
        value
        for value in vars(module).values()
        if isinstance(value, type) and issubclass(value, Toolkit) and value.domain == name
    ]
    if len(found) != 1:
        raise KeyError(f"{path} defines {len(found)} toolkits for domain {name!r}, not one")
    return found[0]


@functools.cache
def _read_domain(name: str, directory: Path) -> Domain:
    root = directory / name
    if not root.is_dir():
        raise FileNotFoundError(f"no data for domain {name!r} in {directory} (set ${DATA_ENV_VAR} or --data-dir)")
    tasks = [Task.model_validate(item) for item in json.loads((root / "tasks.json").read_text(encoding="utf-8"))]
    tools = root / TOOLS_FILE
    return Domain(
        name=name,
        policy=(root / "policy.md").read_text(encoding="utf-8"),
        tasks=tasks,
        toolkit=toolkit_from_file(tools, name) if tools.exists() else toolkit_for(name),
        db_text=(root / "db.json").read_text(encoding="utf-8"),
    )


def load_domain(name: str, directory: str | Path | None = None) -> Domain:
    """Load a domain's data and tools (cached per name and directory)."""
    return _read_domain(name, data_dir(directory).resolve())


@dataclass(frozen=True)
class ActionOutcome:
    """What one action did in an environment."""

    name: str
    arguments: dict[str, Any]
    ok: bool
    value: Any = None
    error: str | None = None
    touched: frozenset[Entry] = frozenset()
    """Database entries the action operated on."""


class Environment:
    """One episode of a domain: a private database and the tool functions bound to it.

    Calls are serialised (a lock) because the registry runs sync tools in threads and a round may hold
    several calls; tau2's policies ask for one call at a time anyway.
    """

    def __init__(self, domain: Domain, db: Database) -> None:
        self.domain = domain
        self.db = db
        self.toolkit = domain.toolkit(db)
        self.kinds = domain.toolkit.actions()
        self.log: list[ActionOutcome] = []
        self._lock = threading.Lock()

    def _run(self, tool_name: str, /, **arguments: Any) -> Any:
        """Run one action atomically, log it, and raise its error (the registry's EXEC_ERR)."""
        with self._lock:
            before = set(self.db.touched)
            try:
                if tool_name not in self.kinds:
                    raise ToolError(f"unknown tool {tool_name!r}")
                with self.db.transaction():
                    value = getattr(self.toolkit, tool_name)(**arguments)
            except Exception as error:
                touched = frozenset(self.db.touched - before)
                self.log.append(ActionOutcome(tool_name, arguments, False, error=_describe(error), touched=touched))
                raise
            touched = frozenset(self.db.touched - before)
            self.log.append(ActionOutcome(tool_name, arguments, True, value, touched=touched))
            return value

    def call(self, name: str, arguments: dict[str, Any] | None = None) -> ActionOutcome:
        """Run one action directly (replays): a failure comes back as an outcome, not an exception."""
        with contextlib.suppress(Exception):
            self._run(name, **(arguments or {}))
        return self.log[-1]

    def tools(self) -> list[DomainTool]:
        """The domain's functions as pool tools, tagged read / write / generic."""
        made = []
        for name, kind in sorted(self.kinds.items()):
            spec = schema_from_function(getattr(self.toolkit, name))
            spec = spec.model_copy(update={"parameters": inline_definitions(spec.parameters)})
            made.append(DomainTool(Tool(spec, _bind(self._run, name)), kind))
        return made

    def registry(self, prices: PriceCatalog | None = None) -> ToolRegistry:
        """A registry of the domain's tools, for an orchestrator's episode."""
        return ToolRegistry([item.tool for item in self.tools()], prices=prices)


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


def _bind(run: Callable[..., Any], name: str) -> Callable[..., Any]:
    def invoke(**arguments: Any) -> Any:
        return run(name, **arguments)

    return invoke


def _describe(error: Exception) -> str:
    return str(error) if isinstance(error, ToolError) else f"{type(error).__name__}: {error}"
