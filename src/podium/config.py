"""Typed configuration: pydantic models whose attribute docstrings are the per-field help, and the one reader of
the YAML and JSON files users give Podium.

Every config class derives from :class:`Config`. Loading a file turns validation failures into a
:class:`~podium.errors.ConfigError` that names each offending field as the file spells it, with the file and the
line where it is (or, for a missing field, where its parent is). Numbers must be finite: NaN and infinities are
refused in every config field.

User files are bounded: at most :data:`MAX_FILE_BYTES`, and YAML aliases may add at most
:data:`MAX_ALIAS_NODES` nodes to a document (each alias counts the nodes it repeats), so that a small file
cannot expand into a huge tree (an alias bomb) that validation would then walk for minutes.
"""

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar, get_args

import yaml
from pydantic import BaseModel, ConfigDict, ModelWrapValidatorHandler, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError
from pydantic_core.core_schema import ErrorType

from podium.errors import ConfigError

ConfigT = TypeVar("ConfigT", bound="Config")
MAX_FILE_BYTES = 16 << 20
"""Largest YAML or JSON file Podium reads as configuration or data."""
MAX_ALIAS_NODES = 1_000
"""Most nodes YAML aliases may add to one document when written out (ample for shared blocks of settings; a
JSON schema of that size takes validation about 0.2 s)."""
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when PyYAML was built with it
_MESSAGE_PREFIXES = ("Value error, ", "Assertion failed, ")
_PYDANTIC_ERRORS = frozenset(get_args(ErrorType))


MAX_USD_SPLIT = {
    "max_usd": "two settings now: max_episode_usd, the most one episode may spend (a run or system config's), and "
    "max_run_usd, the most a whole run may spend (podium eval, a data stage, a recording, an experiment scale)"
}
"""How a config refuses ``max_usd``, which named both caps once (:attr:`Config.moved`)."""


@dataclass(frozen=True)
class Flag:
    """The value type of a field's command-line option where the field's own type does not say it (a policy given
    by name, whose config is a mapping); the field's validation reads the option's value."""

    kind: Any


class Config(BaseModel):
    """Base of all configs: unknown fields are errors, numbers are finite, attribute docstrings become field
    descriptions."""

    model_config = ConfigDict(
        extra="forbid", use_attribute_docstrings=True, validate_assignment=True, allow_inf_nan=False
    )
    moved: ClassVar[dict[str, str]] = {}
    """Keys this config had once → where their setting is now: such a key is refused with that message rather
    than as an unknown field."""

    @model_validator(mode="wrap")
    @classmethod
    def _refuse_moved_keys(cls, data: Any, handler: ModelWrapValidatorHandler["Config"]) -> "Config":
        try:
            return handler(data)
        except ValidationError as error:
            if not isinstance(data, dict) or not data.keys() & cls.moved.keys():
                raise
            raise moved_keys_error(error, cls.moved) from None

    @classmethod
    def from_dict(
        cls: type[ConfigT], data: Any, *, source: str = "config", flags: Mapping[str, str] | None = None
    ) -> ConfigT:
        """Validate ``data`` into this config, raising :class:`ConfigError` naming the bad fields (and their lines,
        when ``source`` is the file ``data`` was read from; the flag, for fields ``flags`` maps to the command-line
        flag that set them)."""
        try:
            return cls.model_validate(data)
        except ValidationError as error:
            raise ConfigError(describe_validation_error(error, source, data, flags)) from error

    @classmethod
    def from_file(cls: type[ConfigT], path: str | Path) -> ConfigT:
        """Load a YAML or JSON file into this config."""
        return cls.from_dict(read_structured_file(path), source=str(path))


def moved_keys_error(error: ValidationError, moved: Mapping[str, str]) -> ValidationError:
    """``error`` with each unknown key of ``moved`` (at the top of the config) reported with where it went."""
    details = []
    for problem in error.errors():
        location = problem["loc"]
        if problem["type"] == "extra_forbidden" and len(location) == 1 and location[0] in moved:
            kind: Any = PydanticCustomError("moved", "{where}", {"where": moved[str(location[0])]})
        elif problem["type"] in _PYDANTIC_ERRORS:
            kind = problem["type"]
        else:  # a validator's own error type: its message as it was
            kind = PydanticCustomError(problem["type"], "{message}", {"message": problem["msg"]})
        details.append(InitErrorDetails(type=kind, loc=location, input=problem["input"], ctx=problem.get("ctx", {})))
    return ValidationError.from_exception_data(error.title, details)


def describe_validation_error(
    error: ValidationError, source: str, data: Any, flags: Mapping[str, str] | None = None
) -> str:
    """One line per problem, naming the field by its path in ``data`` (``workers.0.model``), with
    ``source:line`` when ``source`` is the file ``data`` came from, or the flag when ``flags`` (dotted field →
    flag) says a command-line flag set the field; pydantic's own labels (union members, validator names) are left
    out, and so are the members of a union that the value was not meant for."""
    problems = [(*user_path(problem["loc"], data, missing=problem["type"] == "missing"), problem)
                for problem in error.errors()]  # fmt: skip
    lines = [f"invalid {source}:"]
    for path, at_label, problem in problems:
        if at_label and any(len(other) > len(path) and other[: len(path)] == path for other, _, _ in problems):
            continue  # e.g. "not a string" from `str | PoolConfig` when the PoolConfig member found deeper problems
        field = ".".join(str(part) for part in path) or "(top level)"
        message = str(problem["msg"])
        for prefix in _MESSAGE_PREFIXES:
            message = message.removeprefix(prefix)
        line = field_line(source, path)
        where = _flag_of(path, flags or {}) or (f"{source}:{line}" if line is not None else None)
        text = f"  {where}: {field}: {message}" if where else f"  {field}: {message}"
        if text not in lines:  # the members of a union may each report the same problem
            lines.append(text)
    return "\n".join(lines)


def _flag_of(path: list[int | str], flags: Mapping[str, str]) -> str | None:
    """The flag that set the field at ``path`` or one of the fields holding it."""
    for end in range(len(path), 0, -1):
        flag = flags.get(".".join(str(part) for part in path[:end]))
        if flag:
            return flag
    return None


def user_path(location: tuple[int | str, ...], data: Any, *, missing: bool = False) -> tuple[list[int | str], bool]:
    """The parts of a pydantic error location that are keys, indexes and fields of ``data``, and whether the
    location ended in a part that is not: the labels pydantic adds for union members and validators
    (``function-after[...]``, ``str``, ``PoolConfig``) are not in the data and are dropped. A missing field
    keeps its own name, which the data lacks by definition."""
    kept: list[int | str] = []
    node = data
    dropped = False
    for index, part in enumerate(location):
        dropped = False
        if _holds(node, part):
            node = node[part]
        elif isinstance(node, BaseModel) and part in type(node).model_fields:
            node = getattr(node, str(part))
        elif not (missing and index == len(location) - 1 and isinstance(node, dict | BaseModel)):
            dropped = True
            continue
        kept.append(part)
    return kept, dropped


def _holds(node: Any, part: int | str) -> bool:
    """Whether ``node[part]`` is a key or index of a mapping or list in the data."""
    if isinstance(node, dict):
        return part in node
    return isinstance(node, list | tuple) and isinstance(part, int) and 0 <= part < len(node)


def field_line(source: str, path: list[int | str]) -> int | None:
    """The line of ``path`` in the YAML or JSON file ``source`` (of its deepest part the file holds: for a
    missing field, its parent); None when ``source`` is not such a file."""
    try:
        file = Path(source)
        if not file.is_file() or file.stat().st_size > MAX_FILE_BYTES:
            return None
        node = _compose(file.read_text(encoding="utf-8"), file)
    except (OSError, UnicodeDecodeError, ConfigError):
        return None
    if node is None:
        return None
    line = node.start_mark.line + 1
    for part in path:
        if isinstance(node, yaml.MappingNode):
            entry = next(((key, value) for key, value in node.value if str(key.value) == str(part)), None)
            if entry is None:
                break
            line, node = entry[0].start_mark.line + 1, entry[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            break
    return line


def read_structured_file(path: str | Path) -> Any:
    """Parse a YAML (.yaml/.yml) or JSON file; errors name the file and the line."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise ConfigError(f"{path} holds {size} bytes; files Podium reads hold at most {MAX_FILE_BYTES}")
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"cannot read {path}: {error.strerror}") from error
    except UnicodeDecodeError as error:
        raise ConfigError(f"cannot read {path}: not UTF-8 text (byte {error.start})") from error
    if path.suffix.lower() == ".json":
        return _parse_json(text, path)
    node = _compose(text, path)
    if node is None:
        return None
    loader = _LOADER("")
    with _reading(path):
        try:
            return loader.construct_document(node)
        finally:
            loader.dispose()


def _parse_json(text: str, path: Path) -> Any:
    with _reading(path):
        try:
            return json.loads(text)
        except json.JSONDecodeError as error:
            raise ConfigError(f"{path}:{error.lineno}:{error.colno}: cannot parse: {error.msg}") from error


def _compose(text: str, path: Path) -> yaml.Node | None:
    """The YAML document's node graph (aliases share nodes), refused when aliases expand it too far."""
    loader = _LOADER(text)
    with _reading(path):
        try:
            node = loader.get_single_node()
        finally:
            loader.dispose()
    if node is not None:
        _check_aliases(node, path)
    return node


@contextmanager
def _reading(path: Path) -> Iterator[None]:
    """Parser errors as :class:`ConfigError` naming the file (and, for YAML, the line and column)."""
    try:
        yield
    except yaml.YAMLError as error:
        raise ConfigError(_yaml_problem(error, path)) from error
    except RecursionError as error:
        raise ConfigError(f"{path}: nested too deeply to read") from error


def _check_aliases(root: yaml.Node, path: Path) -> None:
    """Refuse a document whose aliases, written out, add more than :data:`MAX_ALIAS_NODES` nodes, or refer to
    a node they are part of. One pass over the distinct nodes (depth first, without recursion)."""
    sizes: dict[int, int] = {}  # node id → nodes in it with every alias written out
    open_nodes: set[int] = set()
    added = 0
    stack: list[tuple[yaml.Node, yaml.Mark, bool]] = [(root, root.start_mark, False)]
    while stack:
        node, mark, finished = stack.pop()
        key = id(node)
        if finished:
            sizes[key] = 1 + sum(sizes[id(child)] for child, _ in _children(node))
            open_nodes.discard(key)
        elif key in sizes:  # a node met again: an alias
            added += sizes[key]
            if added > MAX_ALIAS_NODES:
                raise ConfigError(
                    f"{path}:{mark.line + 1}: YAML aliases expand this document by more than {MAX_ALIAS_NODES} "
                    "nodes; write the repeated parts out, or repeat less"
                )
        elif key in open_nodes:
            raise ConfigError(f"{path}:{mark.line + 1}: a YAML alias refers to a node that contains it")
        else:
            open_nodes.add(key)
            stack.append((node, mark, True))
            stack.extend((child, where, False) for child, where in reversed(_children(node)))


def _children(node: yaml.Node) -> list[tuple[yaml.Node, yaml.Mark]]:
    """A node's children, each with the mark an alias there is reported at (a mapping entry's key, a
    sequence's start: an alias has no node of its own to carry its place)."""
    if isinstance(node, yaml.MappingNode):
        return [pair for key, value in node.value for pair in ((key, key.start_mark), (value, key.start_mark))]
    if isinstance(node, yaml.SequenceNode):
        return [(item, node.start_mark) for item in node.value]
    return []


def _yaml_problem(error: yaml.YAMLError, path: Path) -> str:
    """A YAML error as ``file:line:column: cannot parse: problem (context)``."""
    if not isinstance(error, yaml.MarkedYAMLError) or error.problem_mark is None:
        return f"{path}: cannot parse: {error}"
    mark = error.problem_mark
    context = f" ({error.context}, line {error.context_mark.line + 1})" if error.context and error.context_mark else ""
    return f"{path}:{mark.line + 1}:{mark.column + 1}: cannot parse: {error.problem}{context}"
