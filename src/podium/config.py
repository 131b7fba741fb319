"""Typed configuration: pydantic models whose attribute docstrings are the per-field help.

Every config class derives from :class:`Config`. Loading a file turns validation failures into a
:class:`~podium.errors.ConfigError` that names each offending field and the file it came from.
"""

import json
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from podium.errors import ConfigError

ConfigT = TypeVar("ConfigT", bound="Config")


class Config(BaseModel):
    """Base of all configs: unknown fields are errors, attribute docstrings become field descriptions."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, validate_assignment=True)

    @classmethod
    def from_dict(cls: type[ConfigT], data: Any, *, source: str = "config") -> ConfigT:
        """Validate ``data`` into this config, raising :class:`ConfigError` naming the bad fields."""
        try:
            return cls.model_validate(data)
        except ValidationError as error:
            raise ConfigError(describe_validation_error(error, source)) from error

    @classmethod
    def from_file(cls: type[ConfigT], path: str | Path) -> ConfigT:
        """Load a YAML or JSON file into this config."""
        return cls.from_dict(read_structured_file(path), source=str(path))

    @classmethod
    def field_help(cls) -> dict[str, str]:
        """Field name → its documented meaning (drives CLI help and docs)."""
        return {name: field.description or "" for name, field in cls.model_fields.items()}


def describe_validation_error(error: ValidationError, source: str) -> str:
    """One line per problem, each naming the dotted field path."""
    lines = [f"invalid {source}:"]
    for problem in error.errors():
        location = ".".join(str(part) for part in problem["loc"]) or "(root)"
        lines.append(f"  {location}: {problem['msg']}")
    return "\n".join(lines)


def read_structured_file(path: str | Path) -> Any:
    """Parse a YAML (.yaml/.yml) or JSON file; errors name the file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"cannot read {path}: {error.strerror}") from error
    try:
        if path.suffix.lower() == ".json":
            return json.loads(text)
        return yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as error:
        raise ConfigError(f"cannot parse {path}: {error}") from error
