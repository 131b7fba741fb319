"""Tools: a spec the orchestrator sees, a function that runs, a time limit.

Define one from a typed, documented Python function with :func:`tool` (the JSON schema comes from the type
hints, the descriptions from the docstring, and both are checked when the tool is defined), or from an
explicit JSON schema with :meth:`Tool.from_schema`.
"""

import asyncio
import functools
import inspect
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import docstring_parser
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import ConfigDict, Field, PydanticSchemaGenerationError, create_model

from podium.core.calls import Status, TokenUsage, ToolSpec
from podium.costs.bounds import CostBound
from podium.errors import ToolDefinitionError

DEFAULT_TIMEOUT_S = 60.0


@dataclass
class ToolOutput:
    """What a tool function may return instead of a bare value, to report status or usage."""

    value: Any
    """The structured value."""
    status: Status = Status.OK
    """The tool's own verdict (e.g. a program that ran and exited with an error is EXEC_ERR)."""
    reason: str | None = None
    """Why the status is not OK."""
    worker: str | None = None
    """The model that served the call, if any."""
    observation: str | None = None
    """Text for the orchestrator, when it should differ from the default rendering of ``value``."""
    usage: TokenUsage = field(default_factory=TokenUsage)
    """The tokens of the models behind the tool and the USD already spent inside it (e.g. a worker's token cost),
    on top of the tool's own price."""


ToolFunction = Callable[..., Any] | Callable[..., Awaitable[Any]]


@dataclass
class Tool:
    """A member of the pool."""

    spec: ToolSpec
    """Name, description and JSON-schema parameters shown to the orchestrator."""
    function: ToolFunction
    """Called with the validated arguments as keyword arguments; sync or async."""
    timeout_s: float = DEFAULT_TIMEOUT_S
    """Time limit of one call; a sync function keeps its thread after the limit, so untrusted or
    unbounded work belongs in a subprocess (as the python tool does)."""
    cost_bound: Callable[[dict[str, Any]], CostBound] | None = None
    """For tools backed by models: the most one call with these arguments can cost in tokens and model USD
    (the tool's own price from the catalog comes on top)."""
    validator: Draft202012Validator = field(init=False, repr=False)

    def __post_init__(self) -> None:
        problem = schema_problem(self.spec.parameters)
        if problem is not None:
            raise ToolDefinitionError(f"tool '{self.spec.name}': invalid parameter schema: {problem}")
        if self.spec.parameters.get("type") != "object":
            raise ToolDefinitionError(f"tool '{self.spec.name}': the parameter schema must have type 'object'")
        if not self.spec.description.strip():
            raise ToolDefinitionError(f"tool '{self.spec.name}': a description is required")
        self.validator = Draft202012Validator(self.spec.parameters)

    @property
    def name(self) -> str:
        return self.spec.name

    @classmethod
    def from_schema(
        cls,
        name: str,
        description: str,
        parameters: dict[str, Any],
        function: ToolFunction,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        cost_bound: Callable[[dict[str, Any]], CostBound] | None = None,
    ) -> "Tool":
        """A tool from an explicit JSON schema."""
        spec = ToolSpec(name=name, description=description, parameters=parameters)
        return cls(spec, function, timeout_s, cost_bound)

    async def invoke(self, arguments: dict[str, Any]) -> Any:
        """Run the function on already-validated arguments."""
        if inspect.iscoroutinefunction(self.function):
            return await self.function(**arguments)
        return await asyncio.to_thread(self.function, **arguments)


def schema_problem(schema: dict[str, Any]) -> str | None:
    """Why a parameter schema is not a valid JSON schema, or ``None``."""
    try:
        text = json.dumps(schema, sort_keys=True)
    except (TypeError, ValueError):
        return _checked(schema)
    return _remembered_check(text)


@functools.lru_cache(maxsize=4096)
def _remembered_check(schema: str) -> str | None:
    """:func:`_checked` of a schema given as sorted JSON text, remembered: checking takes milliseconds, and the
    same schemas are built again for every episode (the summarizer's, a served client's tools)."""
    return _checked(json.loads(schema))


def _checked(schema: Any) -> str | None:
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as error:
        return error.message
    return None


def tool(function: ToolFunction | None = None, *, name: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S) -> Any:
    """Turn a typed function with a Google-, NumPy- or reST-style docstring into a :class:`Tool`.

    Every parameter needs a type hint and a docstring entry; the docstring needs a summary. Violations raise
    :class:`~podium.errors.ToolDefinitionError` at definition time. Usable as ``@tool`` or ``@tool(name=...)``.
    """

    def build(target: ToolFunction) -> Tool:
        return Tool(schema_from_function(target, name=name), target, timeout_s)

    return build if function is None else build(function)


def schema_from_function(function: ToolFunction, *, name: str | None = None) -> ToolSpec:
    """The :class:`ToolSpec` of a function, checked: summary, typed and documented parameters."""
    tool_name = name or function.__name__
    docstring = docstring_parser.parse(inspect.getdoc(function) or "")
    summary = " ".join((docstring.description or "").split())
    if not summary:
        raise ToolDefinitionError(f"tool '{tool_name}': the docstring needs a summary line")
    documented = {param.arg_name: " ".join((param.description or "").split()) for param in docstring.params}
    signature = inspect.signature(function)
    hints = inspect.get_annotations(function, eval_str=True)
    fields: dict[str, Any] = {}
    for parameter in signature.parameters.values():
        where = f"tool '{tool_name}', parameter '{parameter.name}'"
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            raise ToolDefinitionError(f"{where}: *args and **kwargs cannot be described to a model")
        if parameter.name not in hints:
            raise ToolDefinitionError(f"{where}: a type hint is required")
        if not documented.get(parameter.name):
            raise ToolDefinitionError(f"{where}: document it in the docstring's Args section")
        default = ... if parameter.default is parameter.empty else parameter.default
        fields[parameter.name] = (hints[parameter.name], Field(default, description=documented[parameter.name]))
    unknown = set(documented) - set(signature.parameters)
    if unknown:
        raise ToolDefinitionError(f"tool '{tool_name}': docstring documents unknown parameters {sorted(unknown)}")
    try:
        arguments_model = create_model(f"{tool_name}_arguments", __config__=ConfigDict(extra="forbid"), **fields)
        parameters = arguments_model.model_json_schema()
    except (PydanticSchemaGenerationError, TypeError) as error:
        raise ToolDefinitionError(f"tool '{tool_name}': a type hint has no JSON schema: {error}") from error
    return ToolSpec(name=tool_name, description=summary, parameters=_without_titles(parameters))


def _without_titles(schema: Any) -> Any:
    # pydantic adds a string "title" to every node: noise in a prompt. A property named "title" maps to a
    # schema object, not a string, so it stays.
    if isinstance(schema, dict):
        return {
            key: _without_titles(value) for key, value in schema.items() if key != "title" or not isinstance(value, str)
        }
    if isinstance(schema, list):
        return [_without_titles(item) for item in schema]
    return schema


def render_value(value: Any) -> str:
    """Default text of a value for the orchestrator: strings as they are, anything else as JSON (a value nested
    too deeply to encode is shown as its type and a note instead)."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except RecursionError:
        return f"[a {type(value).__name__} nested too deeply to show]"
