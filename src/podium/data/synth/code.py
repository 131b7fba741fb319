"""Functions of a synthesized domain: real Python the LLM writes over the database, checked before it runs.

A function must be one plain ``def`` whose first parameter is ``self``, with typed parameters, a return type and
a docstring that documents every parameter (it becomes a tool whose schema is built from them). It may only use
its parameters and local names, ``self`` (``self.db``, ``self.new_id``…), a short list of builtins, ``copy``,
``Any`` and ``ToolError``; no imports, no ``while`` loops, no names or attributes starting with ``_``. The checked
functions are assembled into ``tools.py``: a :class:`~podium.envs.Toolkit` subclass whose methods carry their read
or write tag, which ``podium.envs`` loads like the built-in domains. These checks keep mistakes and mischief out of
the way; the module still runs in-process, so only load domains you trust, as with any Python package.
"""

import ast
import builtins
from typing import Any

from podium.envs import Database, Toolkit
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
RESERVED = frozenset({"actions", "new_id", "db", "domain", "now"})
HEADER = '''"""Tool functions of the synthesized domain {name!r}: {domain}.

Written by {model} (prompt {prompt}) and checked by `podium synth domain`. Loaded by podium.envs.
"""

import copy
from typing import Any

from podium.envs import ActionKind, Toolkit, ToolError, action


class {cls}(Toolkit):
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
    if function.name.startswith("_") or function.name in RESERVED:
        return None, "reserved or private name"
    if ast.get_docstring(function) is None:
        return None, "no docstring"
    unsafe = _unsafe(function)
    return (None, unsafe) if unsafe else (function, None)


def toolkit_source(functions: list[tuple[str, ast.FunctionDef]], header: dict[str, str]) -> str:
    """``tools.py``: the header, then each function as a tagged method."""
    parts = [HEADER.format(**header)]
    for kind, function in functions:
        method = "\n".join(f"    {line}" if line.strip() else "" for line in ast.unparse(function).splitlines())
        parts.append(f"\n    @action(ActionKind.{kind.upper()})\n{method}\n")
    return "".join(parts)


def build_toolkit(source: str, cls: str) -> type[Toolkit]:
    """Execute a ``tools.py`` source and return its toolkit class (every method checked as a tool)."""
    namespace: dict[str, Any] = {"__name__": f"podium_synth_{cls}"}
    exec(compile(source, f"<{cls} tools>", "exec"), namespace)  # checked code: see the module docstring
    toolkit = namespace[cls]
    instance = toolkit(Database({}))  # tools are built from bound methods, as the environment binds them
    for name in toolkit.actions():
        schema_from_function(getattr(instance, name))
    return toolkit


def function_problem(function: ast.FunctionDef, kind: str, header: dict[str, str]) -> str | None:
    """Why a parsed function cannot be a tool (its docstring, types or body fail when built alone)."""
    try:
        build_toolkit(toolkit_source([(kind, function)], header), header["cls"])
    except ToolDefinitionError as error:
        return f"cannot be a tool: {str(error).split(': ', 1)[-1]}"
    except Exception as error:  # the function's source is generated: any failure to define it is a rejection
        return f"cannot be defined: {type(error).__name__}"
    return None
