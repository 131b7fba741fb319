"""The documentation's Reference pages, generated from the code: every command of ``podium`` with every option and
argument (walked through the click command tree Typer builds), and every config model with its fields' types,
defaults and help (from the pydantic models and their attribute docstrings, the one source of both the options
generated from config fields and this page). The docs build writes them (``docs/hooks.py``); the tests check that
every field and option has help.

Config models are found without a list: the source files are scanned for classes deriving from
:class:`~podium.config.Config` (directly or through another config class), their modules imported, and every
subclass of ``Config`` documented. A command or config added later appears in the Reference by itself.
"""

import ast
import importlib
import inspect
import json
import types
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

import typer
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import to_jsonable_python

import podium
from podium.cli import app
from podium.config import Config

LONGEST_DEFAULT = 60
"""Characters of a default shown in a table cell (longer ones are cut with an ellipsis)."""


@dataclass(frozen=True)
class Row:
    """One option or field as the Reference lists it."""

    name: str
    type: str
    default: str
    help: str


def commands() -> Iterator[tuple[str, Any]]:
    """Every click command of ``podium`` (groups and the commands in them), by its full name, in help order.

    Typer builds its commands on the click it carries; they are read here by click's attributes alone."""
    root = typer.main.get_command(app)
    yield from _walk(root, typer.Context(root, info_name="podium"), "podium")


def _walk(command: Any, context: typer.Context, name: str) -> Iterator[tuple[str, Any]]:
    yield name, command
    for child in command.list_commands(context) if hasattr(command, "list_commands") else []:
        sub = command.get_command(context, child)
        if sub is not None and not sub.hidden:
            yield from _walk(sub, typer.Context(sub, info_name=child, parent=context), f"{name} {child}")


def parameter_rows(command: Any, context: typer.Context, left_out: Collection[str] = ()) -> list[tuple[str, str]]:
    """The command's arguments and options as ``--help`` shows them: the names with the value's type, and the
    help with the default (``[default: …]``, ``[required]``); hidden ones, ``--help`` and those named in
    ``left_out`` left out."""
    rows = []
    for parameter in command.params:
        record = parameter.get_help_record(context)
        if record is None or getattr(parameter, "hidden", False) or parameter.name in {"help", *left_out}:
            continue
        names, help_text = record
        rows.append((names, " ".join(help_text.split())))
    return rows


def command_page() -> str:
    """The Markdown of the CLI Reference: one section per command, its usage, help and options."""
    lines = [
        "# Command line",
        "",
        "Generated from the `podium` command itself (its click command tree) when the site is built: every "
        "command, argument and option, with its type, default and help. `podium COMMAND --help` prints the same.",
        "",
    ]
    walked = list(commands())
    shared = {parameter.name for parameter in walked[0][1].params}  # the root's, which Typer repeats below it
    for name, command in walked:
        depth = min(name.count(" ") + 1, 3)
        lines += [f"{'#' * (depth + 1)} `{name}`", ""]
        text = inspect.cleandoc(command.help or "")
        if text:
            lines += [_escaped(text), ""]
        context = typer.Context(command, info_name=name)
        usage = " ".join(command.collect_usage_pieces(context))
        lines += ["```text", f"{name} {usage}".rstrip(), "```", ""]
        rows = parameter_rows(command, context, () if name == "podium" else shared)
        if rows:
            lines += ["| option | help |", "|---|---|"]
            lines += [f"| `{names}` | {_escaped(help_text)} |" for names, help_text in rows] + [""]
    return "\n".join(lines)


def config_models(root: Path | None = None) -> list[type[Config]]:
    """Every config model of Podium: the modules whose classes derive from ``Config`` imported, then every
    subclass of ``Config`` defined in Podium, sorted by module and name."""
    root = root or Path(podium.__file__).parent
    for module in _config_modules(root):
        importlib.import_module(module)
    found = {model for model in _subclasses(Config) if model.__module__.startswith("podium.")}
    return sorted(found, key=lambda model: (model.__module__, model.__name__))


def _config_modules(root: Path) -> list[str]:
    """The modules under ``root`` that define a class deriving from ``Config`` (through any chain of classes
    defined in Podium, matched by name)."""
    bases: dict[str, tuple[str, set[str]]] = {}  # class name → (module, base names)
    for path in sorted(root.rglob("*.py")):
        module = ".".join(("podium", *path.relative_to(root).with_suffix("").parts)).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                names = {base.id if isinstance(base, ast.Name) else getattr(base, "attr", "") for base in node.bases}
                bases.setdefault(node.name, (module, names))
    derived = {"Config"}
    changed = True
    while changed:
        grown = {name for name, (_, parents) in bases.items() if parents & derived}
        changed = not grown <= derived
        derived |= grown
    return sorted({bases[name][0] for name in derived if name in bases and name != "Config"})


def _subclasses(model: type) -> Iterator[type]:
    for sub in model.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def field_rows(model: type[BaseModel]) -> list[Row]:
    """The fields of ``model``: name (as a file spells it), type, default and help."""
    return [
        Row(field.alias or name, type_name(field.annotation, field), _field_default(field), _help(field))
        for name, field in model.model_fields.items()
    ]


def _help(field: FieldInfo) -> str:
    return " ".join((field.description or "").split())


def undocumented_fields(models: list[type[Config]]) -> list[str]:
    """``Model.field`` for every field without help (an attribute docstring)."""
    return [f"{model.__name__}.{name}" for model in models for name, field in model.model_fields.items()
            if not _help(field)]  # fmt: skip


def type_name(annotation: Any, field: FieldInfo | None = None) -> str:
    """A field's type as a reader would write it (``int ≥ 1``, ``'serial' | 'parallel'``, ``list[str]``), config
    models linked to their section."""
    constraints = _constraints(field) if field is not None else ""
    origin, arguments = get_origin(annotation), get_args(annotation)
    if origin is Literal:
        return " \\| ".join(f"`{json.dumps(value)}`" for value in arguments)
    if origin in (Union, types.UnionType):
        return " \\| ".join(type_name(member) for member in arguments) + constraints
    if origin is not None and arguments:
        inner = ", ".join(type_name(argument) for argument in arguments)
        return f"{getattr(origin, '__name__', str(origin))}[{inner}]"
    if annotation is type(None):
        return "null"
    if isinstance(annotation, type) and issubclass(annotation, Config):
        return f"[{annotation.__name__}](#{anchor(annotation)})"
    return getattr(annotation, "__name__", str(annotation).replace("typing.", "")) + constraints


def _constraints(field: FieldInfo) -> str:
    symbols = {"gt": ">", "ge": "≥", "lt": "<", "le": "≤"}
    parts = [f"{symbols[key]} {getattr(item, key)}" for item in field.metadata for key in symbols
             if getattr(item, key, None) is not None]  # fmt: skip
    return f" ({', '.join(parts)})" if parts else ""


def _field_default(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        return f"{type(value).__name__}'s defaults"
    return _code(json.dumps(to_jsonable_python(value), ensure_ascii=False))


def anchor(model: type) -> str:
    """The section id of a config model on the config page."""
    return f"{model.__module__}.{model.__name__}".replace(".", "-").lower()


def config_page() -> str:
    """The Markdown of the config Reference: every config model, grouped by module, with its fields."""
    lines = [
        "# Configuration",
        "",
        "Generated from Podium's config models (pydantic) when the site is built: every field with its type, "
        "default and help, which is the field's attribute docstring, the same text `--help` shows for the options "
        "made from fields. A file may set any field; an unknown field, a wrong type or a value out of range is an "
        "error naming the file, the line and the field.",
        "",
    ]
    module = None
    for model in config_models():
        if model.__module__ != module:
            module = model.__module__
            lines += [f"## `{module}`", ""]
        lines += [f"### {model.__name__} {{ #{anchor(model)} }}", ""]
        summary = inspect.cleandoc(model.__doc__ or "").split("\n\n")[0]
        if summary:
            lines += [_escaped(" ".join(summary.split())), ""]
        lines += ["| field | type | default | help |", "|---|---|---|---|"]
        lines += [f"| `{row.name}` | {row.type} | {row.default} | {_escaped(row.help)} |" for row in field_rows(model)]
        lines.append("")
    return "\n".join(lines)


def _code(value: object) -> str:
    text = str(value)
    if len(text) > LONGEST_DEFAULT:
        text = text[: LONGEST_DEFAULT - 1] + "…"
    return "`" + text.replace("`", "'") + "`"


def _escaped(text: str) -> str:
    """Help text as Markdown: angle brackets shown, not read as HTML; a table's cell separator escaped."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|")
