"""The JSON Lines files the top layers read and write: reading any JSONL file line by line (errors name the file
and line), tasks files, files replaced atomically, and :class:`JsonlLog`, the append-only log of finished units
that ``podium eval`` results and ``podium data`` work logs are.

A log is appended one synced line at a time, so a process killed mid-write leaves at most a torn last line. When
a log is opened, lines that cannot be read (torn, corrupt) or that repeat a key are moved to
``<name>.rejected.jsonl`` beside it, never dropped unseen, and the log is rewritten without them before anything
new is appended.
"""

import json
import os
from collections.abc import Callable, Hashable, Iterable, Iterator
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from podium.core.files import write_atomically
from podium.core.trajectory import to_json_line
from podium.datasets.benchmark import Benchmark
from podium.datasets.items import BenchmarkItem
from podium.errors import PodiumError

T = TypeVar("T", bound=BaseModel)


class RecordError(PodiumError, ValueError):
    """A line of a records file is not any known row; the message names the file and line."""


def read_jsonl(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for each non-empty line; a line that is not a JSON object is a
    :class:`RecordError` naming the file and line."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").split("\n")
    except OSError as error:
        raise RecordError(f"cannot read {path}: {error.strerror}") from error
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError as error:
            raise RecordError(f"{path}:{number} is not JSON: {error}") from error
        if not isinstance(value, dict):
            raise RecordError(f"{path}:{number} is not a JSON object")
        yield number, value


def read_tasks(path: str | Path) -> list[BenchmarkItem]:
    """The items of a tasks file (the RL task format of ``podium train grpo``): one JSON object per line with
    ``question``, ``gold``, ``verifier``, optional ``id`` (default ``<file stem>-<line>``) and ``metadata``."""
    items = []
    for number, value in read_jsonl(path):
        try:
            items.append(BenchmarkItem.model_validate({"id": f"{Path(path).stem}-{number}", **value}))
        except ValidationError as error:
            raise RecordError(f"{path}:{number} is not a task: {error}") from error
    return items


def tasks_benchmark(path: str | Path) -> Benchmark:
    """A tasks file as a benchmark (``podium eval --tasks``): its items, judged by the verifier they all name."""
    items = read_tasks(path)
    kinds = sorted({item.verifier for item in items})
    if len(kinds) != 1:
        raise RecordError(f"{path}: a tasks file to evaluate needs items of one verifier kind, found {kinds or 'none'}")
    return Benchmark(Path(path).stem, kinds[0], f"tasks of {path}", lambda _directory: iter(items))


def write_jsonl(path: Path, rows: Iterable[BaseModel]) -> int:
    """Write ``rows`` as JSON Lines atomically; returns how many."""
    lines = [to_json_line(row) for row in rows]
    write_atomically(path, "".join(lines))
    return len(lines)


def rejected_path(path: Path) -> Path:
    """Where the unreadable lines of the log ``path`` are kept: ``<stem>.rejected.jsonl`` beside it."""
    return path.with_name(f"{path.stem}.rejected.jsonl")


def scan_jsonl(path: Path, model: type[T], key: Callable[[T], Hashable]) -> tuple[dict[Hashable, T], list[bytes]]:
    """The rows of a log by key, in file order, and its unusable lines (unreadable, or repeating a key). Reading
    never changes the file."""
    if not path.exists():
        return {}, []
    rows: dict[Hashable, T] = {}
    unusable: list[bytes] = []
    for raw in path.read_bytes().split(b"\n"):
        if not raw.strip():
            continue
        try:
            value = model.model_validate_json(raw)
        except ValidationError:
            unusable.append(raw)
            continue
        if key(value) in rows:
            unusable.append(raw)
            continue
        rows[key(value)] = value
    return rows, unusable


class JsonlLog(Generic[T]):
    """Finished units, keyed, in a JSONL file that only grows (after the repair made when it is opened).

    ``storable`` turns a value whose line would not read back (a trajectory holding a value JSON cannot carry)
    into one that does, given the error; without it such a value is an error, since it would be run again on
    every resume.
    """

    def __init__(
        self,
        path: Path,
        model: type[T],
        key: Callable[[T], Hashable],
        *,
        storable: Callable[[T, str], T] | None = None,
    ) -> None:
        self.path = path
        self.model = model
        self.key = key
        self.storable = storable
        self.done, unusable = scan_jsonl(path, model, key)
        """Key → the finished unit's value, in the order they finished."""
        self.dropped = len(unusable)
        """Torn, corrupt or duplicate lines moved to :func:`rejected_path` when the log was opened."""
        if unusable or (path.exists() and path.stat().st_size and not path.read_bytes().endswith(b"\n")):
            set_aside(rejected_path(path), unusable)
            write_atomically(path, "".join(to_json_line(value) for value in self.done.values()))

    def __contains__(self, key: object) -> bool:
        return key in self.done

    def __len__(self) -> int:
        return len(self.done)

    def values(self) -> list[T]:
        return list(self.done.values())

    def append(self, value: T) -> T:
        """Record a finished unit: one write, flushed and synced, so a kill can only tear this line. Returns the
        value as stored."""
        value, line = self._line(value)
        append_synced(self.path, line)
        self.done[self.key(value)] = value
        return value

    def _line(self, value: T) -> tuple[T, str]:
        """The value's line, checked to read back."""
        try:
            line = to_json_line(value)
            self.model.model_validate_json(line)
            return value, line
        except ValueError as error:  # pydantic's serialization and validation errors are ValueErrors
            if self.storable is None:
                raise RecordError(f"{self.path}: a record could not be stored: {str(error)[:300]}") from error
            kept = self.storable(value, str(error)[:300])
            return kept, to_json_line(kept)


def append_synced(path: Path, line: str) -> None:
    """Append one line in one write, flushed and synced (a kill can only tear this line)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("ab") as handle:
        handle.write(line.encode("utf-8"))
        handle.flush()
        os.fsync(handle.fileno())


def set_aside(path: Path, lines: list[bytes]) -> None:
    """Append unreadable lines to ``path`` (one per line) before they leave their log."""
    if lines:
        with path.open("ab") as handle:
            handle.write(b"".join(line.rstrip(b"\n") + b"\n" for line in lines))
            handle.flush()
            os.fsync(handle.fileno())
