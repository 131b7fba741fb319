"""A stage's output directory: its manifest (a resume must match it), work logs (one JSON line per finished unit,
appended and synced as units finish, so a killed run keeps everything it finished) and its outputs, rewritten whole
and atomically from the work logs at the end of each invocation.

A process killed mid-write leaves at most a torn last line in a work log; it is dropped (the file rewritten
without it) before anything new is appended, as ``podium eval`` does with its results.
"""

import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from podium.core.record import Record
from podium.core.trajectory import to_json_line
from podium.errors import PodiumError

STAGE_FILE = "stage.json"
"""The manifest of a stage directory."""

T = TypeVar("T", bound=BaseModel)


class DataError(PodiumError):
    """A data stage cannot start, resume or read its input; the message says why."""


class StageManifest(Record):
    """What a stage directory holds; a resume must match it."""

    stage: str
    """The stage that wrote the directory."""
    settings: dict[str, Any]
    """The stage's configuration, less the settings that may change between invocations."""


def check_stage(out: Path, stage: str, settings: dict[str, Any]) -> None:
    """Save the manifest of a new stage directory, or refuse to resume one made with other settings. A directory
    holding nothing but its manifest (a run that failed before its first unit) is taken over as new."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / STAGE_FILE
    current = StageManifest(stage=stage, settings=json.loads(json.dumps(settings, default=str)))
    if not path.exists() or not holds_work(out):
        write_text_atomic(path, current.model_dump_json(indent=2) + "\n")
        return
    try:
        saved = StageManifest.model_validate_json(path.read_text(encoding="utf-8"))
    except ValidationError as error:
        raise DataError(f"{path} is not a stage manifest: {error}") from error
    if saved.stage != stage:
        raise DataError(f"{out} holds a '{saved.stage}' stage, not '{stage}'; use another --out")
    changed = sorted(
        name
        for name in set(saved.settings) | set(current.settings)
        if saved.settings.get(name) != current.settings.get(name)
    )
    if changed:
        details = "; ".join(
            f"{name}: was {saved.settings.get(name)!r}, now {current.settings.get(name)!r}" for name in changed
        )
        raise DataError(f"{out} holds a run with other settings ({details}); use another --out to start anew")


def holds_work(out: Path) -> bool:
    """Whether a stage directory holds anything besides its manifest: a work log, an output, a funnel."""
    return any(entry.is_file() and entry.stat().st_size for entry in out.rglob("*") if entry.name != STAGE_FILE)


def write_text_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` in one step: a reader sees the old file or the new one, never half."""
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


def write_jsonl(path: Path, rows: Iterable[BaseModel]) -> int:
    """Write ``rows`` as JSON Lines atomically; returns how many."""
    lines = [to_json_line(row) for row in rows]
    write_text_atomic(path, "".join(lines))
    return len(lines)


class WorkLog(Generic[T]):
    """Finished units of one phase of a stage, keyed, in a JSONL file that only grows (after repair)."""

    def __init__(self, path: Path, model: type[T], key: Callable[[T], str]) -> None:
        self.path = path
        self.model = model
        self.key = key
        self.done: dict[str, T] = {}
        """Key → the finished unit's value, in the order they finished."""
        self.dropped = self._load()
        """Torn, corrupt or duplicate lines removed when the log was opened."""

    def _load(self) -> int:
        if not self.path.exists():
            return 0
        raw = self.path.read_bytes()
        dropped = 0
        for line in raw.split(b"\n"):
            if not line.strip():
                continue
            try:
                value = self.model.model_validate_json(line)
            except ValidationError:
                dropped += 1
                continue
            if self.key(value) in self.done:
                dropped += 1
                continue
            self.done[self.key(value)] = value
        if dropped or (raw and not raw.endswith(b"\n")):
            write_text_atomic(self.path, "".join(to_json_line(value) for value in self.done.values()))
        return dropped

    def __contains__(self, key: object) -> bool:
        return key in self.done

    def __len__(self) -> int:
        return len(self.done)

    def values(self) -> list[T]:
        return list(self.done.values())

    def append(self, value: T) -> None:
        """Record a finished unit: one write, flushed and synced, so a kill can only tear this line."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("ab") as handle:
            handle.write(to_json_line(value).encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())
        self.done[self.key(value)] = value
