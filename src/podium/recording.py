"""Recordings: what every worker of a pool answered to every task, graded by the task's own grader.

``podium routing record`` writes one by asking live workers; ``podium routing import`` converts RouteLLM's
recordings (its GSM8K responses, its MMLU outcomes). Replay workers answer from one, routers are fitted on its train
split, and ``podium routing compare`` compares systems on it. A recording is a directory:

- ``manifest.json``: :class:`RecordingManifest` — the workers (model, price and where the price came from), the
  pool file and tasks they came from (with content hashes), the split rule, when and how it was recorded;
- ``tasks.jsonl``: one :class:`RecordedTask` per line — a benchmark item and its split;
- ``outcomes.jsonl``: one :class:`RecordedOutcome` per (task, worker), appended as each finishes — the reply, the
  grade, tokens, USD, latency, or why the call failed (a failed call is never a wrong answer).

**Splits.** Each task's split is fixed when the recording is made, by :class:`SplitRule`: a stable hash of a key
(the normalised question by default, or any metadata field such as a subject, so that whole subjects are held
out), or the value of a metadata field that names the split.
"""

import hashlib
import re
import unicodedata
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal, Self

from pydantic import Field, NonNegativeFloat, NonNegativeInt, ValidationError, model_validator

from podium.config import Config
from podium.core.record import Record
from podium.costs.prices import ModelPrice
from podium.datasets.items import BenchmarkItem
from podium.errors import ConfigError

FORMAT = "podium-recording/1"
"""The format a recording's manifest declares."""
MANIFEST = "manifest.json"
TASKS = "tasks.jsonl"
OUTCOMES = "outcomes.jsonl"
Split = Literal["train", "validation", "test"]
SPLITS: tuple[Split, ...] = ("train", "validation", "test")
_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})
_SPACE = re.compile(r"\s+")


def normalise(text: str) -> str:
    """The form questions are matched and hashed in: NFKC, plain quotes, case folded, whitespace collapsed."""
    return _SPACE.sub(" ", unicodedata.normalize("NFKC", text).translate(_QUOTES).casefold()).strip()


def hashed_split(key: str, test_percent: int = 20, validation_percent: int = 10) -> Split:
    """The split of ``key`` by a stable hash: sha256 of its normalised form, first 8 hex digits as an integer,
    modulo 100; below ``test_percent`` test, then ``validation_percent`` validation, the rest train."""
    bucket = int(hashlib.sha256(normalise(key).encode()).hexdigest()[:8], 16) % 100
    if bucket < test_percent:
        return "test"
    return "validation" if bucket < test_percent + validation_percent else "train"


class SplitRule(Config):
    """How each task's split (train / validation / test) is chosen, once, when the recording is made."""

    by: Literal["hash", "field"] = "hash"
    """``hash``: a stable hash of ``key`` decides (the same key always lands in the same split); ``field``: the
    task's ``key`` field holds the split's name."""
    key: str = "question"
    """What decides: ``question`` (normalised), ``id``, or ``metadata.NAME`` (e.g. ``metadata.subject``, so that
    whole subjects are held out)."""
    test_percent: int = Field(default=20, ge=0, le=100)
    """With ``by: hash``: the share of keys in the test split, in percent."""
    validation_percent: int = Field(default=10, ge=0, le=100)
    """With ``by: hash``: the share of keys in the validation split, in percent."""

    @model_validator(mode="after")
    def _valid(self) -> Self:
        if self.test_percent + self.validation_percent > 100:
            raise ValueError("test_percent + validation_percent must be at most 100")
        if self.key not in ("question", "id") and not self.key.startswith("metadata."):
            raise ValueError(f"key: '{self.key}' is not question, id or metadata.NAME")
        return self

    def split(self, item: BenchmarkItem) -> Split:
        """The split of ``item``; a :class:`ConfigError` naming the item where its key is missing or, with
        ``by: field``, is not a split's name."""
        if self.key == "question":
            value: Any = item.question
        elif self.key == "id":
            value = item.id
        else:
            field = self.key.removeprefix("metadata.")
            if field not in item.metadata:
                raise ConfigError(f"split.key: task {item.id} has no metadata field '{field}'")
            value = item.metadata[field]
        if self.by == "hash":
            return hashed_split(str(value), self.test_percent, self.validation_percent)
        if value not in SPLITS:
            raise ConfigError(f"split.key: task {item.id} has {self.key} {value!r}, not train, validation or test")
        return value  # type: ignore[no-any-return]


class RecordedTask(BenchmarkItem):
    """A task of the recording: the item as asked, and its split."""

    split: Split
    """The split it belongs to (:class:`SplitRule`)."""


class RecordedWorker(Record):
    """A recorded worker: who answered, and at what price."""

    name: str
    """Its name in the recording (and, by default, in a replay pool)."""
    model: str
    """The model it ran, as its backend names it (what a price sheet prices)."""
    backend: str
    """How it was reached when recorded (``http``, ``local``, ``replay``…, or the source an import read)."""
    price: ModelPrice
    """The token prices it was charged at (``price.source`` says where they came from)."""


class RecordingManifest(Record):
    """What a recording holds and where it came from."""

    format: Literal["podium-recording/1"] = FORMAT
    """The recording format."""
    workers: list[RecordedWorker] = Field(min_length=1)
    """The recorded workers, in the pool's order."""
    source: dict[str, Any] = Field(default_factory=dict)
    """Provenance: the pool file and tasks file (paths and sha256), or what was imported; the Podium version."""
    split: SplitRule = Field(default_factory=SplitRule)
    """How the tasks were split."""
    created_at: str
    """When the recording was started (ISO 8601, UTC)."""
    max_tokens: NonNegativeInt | None = None
    """The completion budget each worker was given per task (None for an import)."""

    def worker(self, name: str) -> RecordedWorker:
        """The recorded worker named ``name``."""
        for worker in self.workers:
            if worker.name == name:
                return worker
        raise KeyError(name)


class RecordedOutcome(Record):
    """One worker's answer to one task."""

    task_id: str
    worker: str
    status: Literal["ok", "failed"]
    """``failed``: the call did not produce a reply (unreachable, timed out, refused); it is not graded."""
    reason: str | None = None
    """Why the call failed, or why the grader judged the reply wrong."""
    reply: str | None = None
    """The whole reply (None when the call failed, or the recording kept only the outcome)."""
    correct: bool | None = None
    """The grader's verdict (None when the call failed or the grader could not decide)."""
    score: float | None = Field(default=None, ge=0.0, le=1.0)
    """The grader's graded score where it gives one (token F1); else 1.0 or 0.0 as ``correct``."""
    input_tokens: NonNegativeInt = 0
    output_tokens: NonNegativeInt = 0
    usd: NonNegativeFloat = 0.0
    """What the call cost at the worker's recorded price."""
    latency_s: NonNegativeFloat = 0.0
    recorded_at: str = ""
    """When the reply came (ISO 8601, UTC)."""

    @property
    def key(self) -> tuple[str, str]:
        return self.task_id, self.worker

    @property
    def graded(self) -> bool:
        """Whether the grader decided it (the call succeeded and the verdict is known)."""
        return self.status == "ok" and self.correct is not None


class Recording:
    """A recording read from its directory: manifest, tasks in order, and each (task, worker) outcome."""

    def __init__(self, directory: Path, manifest: RecordingManifest, tasks: list[RecordedTask],
                 outcomes: dict[tuple[str, str], RecordedOutcome]) -> None:  # fmt: skip
        self.directory = directory
        self.manifest = manifest
        self.tasks = tasks
        self.outcomes = outcomes

    @classmethod
    def load(cls, directory: str | Path) -> "Recording":
        """The recording in ``directory``; a :class:`ConfigError` naming the file (and line) where one is not."""
        directory = Path(directory)
        manifest = read_manifest(directory)
        tasks = list(_rows(directory / TASKS, RecordedTask))
        outcomes = {outcome.key: outcome for outcome in _rows(directory / OUTCOMES, RecordedOutcome)}
        known = {worker.name for worker in manifest.workers}
        stranger = next((outcome for outcome in outcomes.values() if outcome.worker not in known), None)
        if stranger is not None:
            raise ConfigError(f"{directory / OUTCOMES}: worker '{stranger.worker}' is not in {MANIFEST}")
        return cls(directory, manifest, tasks, outcomes)

    @property
    def worker_names(self) -> list[str]:
        return [worker.name for worker in self.manifest.workers]

    def in_split(self, split: Split) -> list[RecordedTask]:
        """The tasks of one split, in recording order."""
        return [task for task in self.tasks if task.split == split]

    def missing(self, tasks: Iterable[RecordedTask] | None = None) -> list[tuple[str, str]]:
        """The (task, worker) pairs of ``tasks`` (default: all) that have no outcome yet."""
        chosen = self.tasks if tasks is None else tasks
        return [
            (task.id, name) for task in chosen for name in self.worker_names if (task.id, name) not in self.outcomes
        ]


def read_manifest(directory: str | Path) -> RecordingManifest:
    """The manifest of the recording in ``directory``; a :class:`ConfigError` naming it where there is none."""
    path = Path(directory) / MANIFEST
    if not path.is_file():
        raise ConfigError(f"{directory}: not a recording (no {MANIFEST}); make one with `podium routing record`")
    try:
        return RecordingManifest.model_validate_json(path.read_bytes())
    except ValidationError as error:
        raise ConfigError(f"{path}: not a recording manifest: {error}") from error


def _rows(path: Path, model: type[Record]) -> Iterable[Any]:
    """The rows of a JSONL file of the recording; a line that does not read is an error naming it (a recording
    being written is repaired by resuming it with `podium routing record`)."""
    if not path.is_file():
        raise ConfigError(f"{path.parent}: the recording has no {path.name}")
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                yield model.model_validate_json(line)
            except ValidationError as error:
                raise ConfigError(
                    f"{path}:{number} is not a {model.__name__} ({error.error_count()} problems; a torn last line "
                    "is repaired by resuming the recording)"
                ) from error
