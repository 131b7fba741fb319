"""Functions of a synthesized domain: real Python the LLM writes over the database, checked before it runs.

A function must be one plain ``def`` whose first parameter is ``self``, with typed parameters, a return type and
a docstring that documents every parameter (it becomes a tool whose schema is built from them). It may only use
its parameters and local names, ``self`` (``self.db.get``, ``self.new_id``…), a short list of builtins, ``copy``,
``Any`` and ``ToolError``; no imports, no ``while`` loops, no names or attributes starting with ``_``. The checked
functions are assembled into ``tools.py``: a tau2 toolkit (a :class:`~podium.envs.synthesized.SynthesizedTools`
subclass whose methods carry tau2's read or write tag) and its database model, which ``podium.envs`` loads like the
built-in domains. These checks keep mistakes and mischief out of the way; the module still runs in-process, so only
load domains you trust, as with any Python package.
"""

import ast
import builtins
from typing import Any

from podium.envs.domain import Domain, DomainKit, DomainTool
from podium.errors import ToolDefinitionError
from podium.pool.tool import schema_from_function

ALLOWED_BUILTINS = frozenset(
    {
        *("abs", "all", "any", "bool", "dict", "enumerate", "filter", "float", "int", "isinstance", "len", "list"),
        *("map", "max", "min", "range", "reversed", "round", "set", "sorted", "str", "sum", "tuple", "zip"),
        *("ValueError", "KeyError", "True", "False", "None"),
    }
)
MODULE_NAMES = frozenset({"self", "copy", "Any", "ToolError"})
"""The names :data:`HEADER` binds that a function body may use."""
HEADER = '''"""Tool functions of the synthesized domain {name!r}: {domain}.

Written by {model} (prompt {prompt}) and checked by `podium synth domain`. Loaded by podium.envs.
"""

import copy
from typing import Any

from podium.envs.synthesized import SynthesizedTools, TablesDB, ToolError, ToolType, is_tool


class {db_cls}(TablesDB):
    """The {name} database: id-keyed tables."""


class {cls}(SynthesizedTools):
    """Tools of the {name} domain."""

    domain = {name!r}
'''


def _bound_names(function: ast.FunctionDef) -> set[str]:
    names = {argument.arg for argument in function.args.args}
    for node in ast.walk(function):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
    return names


def _unsafe(function: ast.FunctionDef) -> str | None:
    allowed = _bound_names(function) | ALLOWED_BUILTINS | MODULE_NAMES
    for node in ast.walk(function):
        if isinstance(node, ast.Import | ast.ImportFrom | ast.Global | ast.Nonlocal | ast.While):
            return f"uses a forbidden statement ({type(node).__name__})"
        if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            return f"reaches a private attribute ({node.attr})"
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in allowed:
            kind = "builtin" if hasattr(builtins, node.id) else "name"
            return f"uses a forbidden {kind} ({node.id})"
    return None


def parse_function(code: str) -> tuple[ast.FunctionDef | None, str | None]:
    """The function of ``code``, or why it is not acceptable (a reason for the funnel)."""
    try:
        module = ast.parse(code)
    except SyntaxError:
        return None, "not valid Python"
    if len(module.body) != 1 or not isinstance(module.body[0], ast.FunctionDef):
        return None, "not exactly one function definition"
    function = module.body[0]
    function.decorator_list = []
    arguments = function.args
    if arguments.vararg or arguments.kwarg or arguments.posonlyargs or arguments.kwonlyargs:
        return None, "uses *args, **kwargs or keyword-only parameters"
    if not arguments.args or arguments.args[0].arg != "self":
        return None, "first parameter is not self"
    if any(argument.annotation is None for argument in arguments.args[1:]) or function.returns is None:
        return None, "a parameter or the return lacks a type"
    if function.name.startswith("_") or function.name in _reserved_names():
        return None, "reserved or private name"
    if ast.get_docstring(function) is None:
        return None, "no docstring"
    unsafe = _unsafe(function)
    return (None, unsafe) if unsafe else (function, None)


def toolkit_source(functions: list[tuple[str, ast.FunctionDef]], header: dict[str, str]) -> str:
    """``tools.py``: the header, then each function as a method with tau2's tag of its kind."""
    parts = [HEADER.format(**header)]
    for kind, function in functions:
        method = "\n".join(f"    {line}" if line.strip() else "" for line in ast.unparse(function).splitlines())
        parts.append(f"\n    @is_tool(ToolType.{kind.upper()})\n{method}\n")
    return "".join(parts)


def kit_tools(kit: DomainKit) -> list[DomainTool]:
    """The pool tools of a toolkit over an empty database, made as an episode makes them from a domain's tau2
    environment (so a function that could not be offered to the orchestrator fails here)."""
    domain = Domain(name=kit.toolkit.domain, policy="", tasks=[], kit=kit, db_text="{}")
    return domain.environment().tools()


def build_toolkit(source: str, header: dict[str, str]) -> DomainKit:
    """Execute a ``tools.py`` source and return its toolkit and database classes, every method checked as a tool:
    documented for the model, and served through tau2 and Podium's registry."""
    namespace: dict[str, Any] = {"__name__": f"podium_synth_{header['cls']}"}
    exec(compile(source, f"<{header['cls']} tools>", "exec"), namespace)  # checked code: see the module docstring
    kit = DomainKit(namespace[header["cls"]], namespace[header["db_cls"]])
    toolkit = kit.toolkit(kit.database())
    for method in toolkit.tools.values():
        schema_from_function(method)
    kit_tools(kit)
    return kit


def function_problem(function: ast.FunctionDef, kind: str, header: dict[str, str]) -> str | None:
    """Why a parsed function cannot be a tool (its docstring, types or body fail when built alone)."""
    try:
        build_toolkit(toolkit_source([(kind, function)], header), header)
    except ToolDefinitionError as error:
        return f"cannot be a tool: {str(error).split(': ', 1)[-1]}"
    except Exception as error:  # the function's source is generated: any failure to define it is a rejection
        return f"cannot be defined: {type(error).__name__}"
    return None


def _reserved_names() -> frozenset[str]:
    # The base toolkit needs the tau2 extra, which only synthesis (not every data stage) requires.
    from podium.envs.synthesized import reserved_names

    return reserved_names()
