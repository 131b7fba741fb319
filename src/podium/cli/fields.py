"""Command options generated from config fields, and the one merge of a config file with them.

A command names the fields of its config model it offers as options; :func:`config_options` adds one option per
field to the command's signature, typed, documented and defaulted by the field itself (its type, its docstring,
its default), the way TRL's parser makes options of its config dataclasses. A field is written once: in its
config model. Every generated option defaults to ``None``, so only the flags that were given reach the command,
as ``flags`` (dotted field → value), and :func:`load_config` writes them over the ``--config`` file's fields.
Validation happens once, on the merged config: a bad value, from the file or a flag, is a
:class:`~podium.errors.ConfigError` naming the file and line or the flag.

Field types map to options as follows: numbers, strings and paths as they are; ``bool`` as ``--name/--no-name``;
a ``Literal`` as text whose choices the help lists; a field marked with :class:`~podium.config.Flag` as the type
it names (a policy by name); a list as a repeatable option; a mapping as a repeatable
``KEY=VALUE`` option; a union of plain types (a count or ``all``) as text the validation reads; a union with a
config model (``str | PoolConfig``) by its string form; and a config model (a teacher, a solver) as a YAML/JSON
file holding one, read when given.
"""

import functools
import inspect
import types
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

import typer
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from podium.config import Config, ConfigT, Flag, read_structured_file
from podium.errors import ConfigError

Command = TypeVar("Command", bound=Callable[..., Any])
FieldSpec = str | tuple[str, str]
"""A dotted field path (its flag is ``--`` and the last part, dashed), or ``(path, flag)``."""


class Flags(dict[str, Any]):
    """The flags a command was given: dotted field → value, and the flag each value came from (for errors)."""

    def __init__(self) -> None:
        super().__init__()
        self.names: dict[str, str] = {}
        self.refused: list[ConfigError] = []
        """Values that could not be read (a file option's file, a mapping's entry): raised by :func:`load_config`."""

    def give(self, field: str, value: Any, flag: str) -> None:
        """Set ``field`` from ``flag``, when it was given (not ``None``)."""
        if value is not None:
            self[field] = value
            self.names[field] = flag


def config_options(
    config: type[Config], fields: Sequence[FieldSpec], arguments: Sequence[str] = ()
) -> Callable[[Command], Command]:
    """Give the decorated command one option per field of ``config`` in ``fields``, and one positional argument
    per field in ``arguments`` (before its own parameters; optional, since the ``--config`` file may give it);
    the command receives the flags and arguments that were given as its ``flags`` argument (:class:`Flags`; a
    file option's value is the data the file holds)."""
    options = [FieldOption(config, spec) for spec in fields]
    positional = [FieldOption(config, (name, name.upper()), argument=True) for name in arguments]

    def decorate(command: Command) -> Command:
        signature = inspect.signature(command)
        kept = [parameter for name, parameter in signature.parameters.items() if name != "flags"]

        @functools.wraps(command)
        def run(*args: Any, **kwargs: Any) -> Any:
            flags = Flags()
            for option in (*positional, *options):
                given = kwargs.pop(option.name)
                try:
                    flags.give(option.path, option.value(given), option.flag)
                except ConfigError as error:  # raised where the command loads its config, with its other errors
                    flags.refused.append(error)
            return command(*args, flags=flags, **kwargs)

        run.__signature__ = signature.replace(  # type: ignore[attr-defined]
            parameters=[
                *(field.parameter() for field in positional),
                *kept,
                *(option.parameter() for option in options),
            ]
        )
        return run  # type: ignore[return-value]

    return decorate


def load_config(config: type[ConfigT], path: Path | None, flags: Flags) -> ConfigT:
    """``config`` from the ``path`` file's fields (none without one) with ``flags`` (dotted field → value)
    written over them; errors name the file and line of a field the file gave, and the flag of one a flag gave."""
    if flags.refused:
        raise flags.refused[0]
    data = read_structured_file(path) if path is not None else {}
    data = {} if data is None else data
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a mapping of config fields")
    for dotted, value in flags.items():
        target = data
        *parents, leaf = dotted.split(".")
        for parent in parents:
            target = target.setdefault(parent, {})
            if not isinstance(target, dict):
                raise ConfigError(f"{path}: {parent} must be a mapping of fields")
        target[leaf] = str(value) if isinstance(value, Path) else value
    return config.from_dict(data, source=str(path) if path is not None else "options", flags=flags.names)


class FieldOption:
    """One generated option (or positional argument): the field it sets, its flag (an argument's name), and the
    Typer parameter."""

    def __init__(self, config: type[Config], spec: FieldSpec, *, argument: bool = False) -> None:
        self.argument = argument
        self.path, flag = (spec, None) if isinstance(spec, str) else spec
        self.field = field_info(config, self.path)
        self.name = self.path.replace(".", "_")
        self.flag = flag or "--" + self.path.rsplit(".", 1)[-1].replace("_", "-")
        given = [item.kind for item in self.field.metadata if isinstance(item, Flag)]  # a policy by name
        self.mapping = any(get_origin(member) is dict for member in _members(self.field.annotation))
        kind = given[0] if given else option_type(self.field.annotation)
        self.choices = [str(choice) for choice in get_args(kind)] if get_origin(kind) is Literal else []
        self.kind = str if self.mapping or self.choices else kind  # the config's validation reads choices

    def parameter(self) -> inspect.Parameter:
        help_text = " ".join((self.field.description or "").replace("``", "").split())
        if self.argument:
            given = typer.Argument(help=help_text, metavar=self.flag, show_default=False)
            annotation = Annotated[_optional(self.kind, self.field.annotation), given]
            return inspect.Parameter(
                self.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None, annotation=annotation
            )
        flags = [self.flag]
        if self.kind is bool:
            flags = [f"{self.flag}/--no-{self.flag.removeprefix('--')}"]
        if self.kind is Path:
            help_text += " Given as a YAML/JSON file."
        if self.field.is_required():
            help_text += " (required)"
        option = typer.Option(*flags, help=help_text, show_default=self._default(), metavar=self._metavar())
        annotation = Annotated[
            list[str] | None if self.mapping else _optional(self.kind, self.field.annotation), option
        ]
        return inspect.Parameter(self.name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=annotation)

    def value(self, given: Any) -> Any:
        """The field's value from the option's (a file option's: the data its file holds; a mapping's: its
        ``KEY=VALUE`` entries)."""
        if self.mapping:
            return self._mapping(given) if given else None
        if self.argument and not given:  # an optional list argument given nothing
            return None
        if given is None or self.kind is not Path:
            return given
        if isinstance(given, list):
            return [read_structured_file(path) for path in given]
        return read_structured_file(given)

    def _metavar(self) -> str | None:
        if self.mapping:
            return "KEY=VALUE"
        return f"[{'|'.join(self.choices)}]" if self.choices else None

    def _mapping(self, entries: list[str]) -> dict[str, str]:
        mapping: dict[str, str] = {}
        for entry in entries:
            key, _, value = entry.partition("=")
            if not key or not value:
                raise ConfigError(f"{self.flag}: '{entry}' is not KEY=VALUE")
            if key in mapping:
                raise ConfigError(f"{self.flag}: {key} is given twice")
            mapping[key] = value
        return mapping

    def _default(self) -> bool | str:
        if self.field.is_required():
            return False
        default = self.field.get_default(call_default_factory=True)
        return False if default in (None, [], {}) or isinstance(default, BaseModel) else str(default)


def field_info(config: type[BaseModel], path: str) -> FieldInfo:
    """The field of ``config`` at the dotted ``path``, through nested config models."""
    model: Any = config
    *parents, leaf = path.split(".")
    for part in parents:
        model = next(member for member in _members(model.model_fields[part].annotation) if _is_model(member))
    return model.model_fields[leaf]


def option_type(annotation: Any) -> Any:
    """The option's value type: the field's (a ``Literal`` is a choice), ``Path`` for a config model given as a
    file, ``str`` for a union of plain types (the config's validation reads the text)."""
    members = [member for member in _members(annotation) if member is not type(None)]
    if get_origin(members[0]) is list:
        item = option_type(get_args(members[0])[0])
        return str if get_origin(item) is Literal else item  # a list of choices: text the validation reads
    plain = [member for member in members if not _is_model(member)]
    if not plain:
        return Path
    return plain[0] if len(plain) == 1 else str


def _optional(kind: type, annotation: Any) -> Any:
    """``kind | None``, or a list of it when the field is a list (a repeatable option)."""
    listed = any(get_origin(member) is list for member in _members(annotation))
    return (list[kind] if listed else kind) | None  # type: ignore[valid-type]


def _members(annotation: Any) -> list[Any]:
    """The members of a union (``Annotated`` constraints stripped), or the annotation alone."""
    if get_origin(annotation) is Annotated:
        return _members(get_args(annotation)[0])
    if get_origin(annotation) in (Union, types.UnionType):
        return [plain for member in get_args(annotation) for plain in _members(member)]
    return [annotation]


def _is_model(member: Any) -> bool:
    return isinstance(member, type) and issubclass(member, BaseModel)
