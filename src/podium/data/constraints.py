"""Constraints learned from failures (Uno's failure-driven prompt repair): the file ``podium data
classify-failures`` writes and the stages read back into their orchestrator's system prompt."""

from pathlib import Path

from pydantic import Field, NonNegativeInt, ValidationError

from podium.core.record import Record
from podium.data.store import DataError


class Constraint(Record):
    """One task-agnostic instruction, from one failure category."""

    category: str
    """The failure category it addresses."""
    count: NonNegativeInt
    """Failures of that category it was drawn from."""
    constraint: str
    """The instruction added to the orchestrator's system prompt."""


class ConstraintSet(Record):
    """The constraints of one classification run."""

    histogram: dict[str, NonNegativeInt] = Field(default_factory=dict)
    """Failure category → classified failures."""
    constraints: list[Constraint] = Field(default_factory=list)
    """One constraint per high-frequency category, most frequent first."""


def read_constraints(path: str | Path | None) -> list[str]:
    """The constraint texts of a constraints file (none without a file)."""
    if path is None:
        return []
    try:
        loaded = ConstraintSet.model_validate_json(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise DataError(f"cannot read constraints {path}: {error.strerror}") from error
    except ValidationError as error:
        raise DataError(f"{path} is not a constraints file (from `podium data classify-failures`): {error}") from error
    return [entry.constraint for entry in loaded.constraints]
