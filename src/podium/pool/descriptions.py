"""Model descriptions written from evidence (ToolOrchestra §3.1), as the pool reads them: a descriptions file holds,
per worker, the text and where it came from (which tasks, which describer, when, and a fingerprint of the worker
config it describes). ``podium describe-model`` and ``podium pool refresh-descriptions`` write it
(:mod:`podium.evaluate.describe`); a pool whose ``descriptions`` names it shows those texts in its table and its
model tools instead of the hand-written ones, for each worker whose config still matches the fingerprint. An entry
whose worker has changed since (another model, endpoint or completion budget) is stale and not used.

Each description is written beside the figures measured when it was written (solved / attempted, per task kind,
USD and seconds per task); the describer's claims that contradict them are left out, and the pool shows the figures
with the text.

Example::

    version: 1
    workers:
      qwen:
        description: Strong at multi-step arithmetic; unreliable on dates.
        figures: {solved: 2, attempted: 3, usd_per_task: 0.0004, seconds_per_task: 2.1,
                  by_kind: {math: {solved: 2, attempted: 3}}}
        provenance:
          tasks: tasks.jsonl
          tasks_sha256: 9f2c…
          task_ids: [3, 17, 42]
          solved: 2
          verifier: math
          describer: judge (Qwen/Qwen3-32B)
          written_at: 2025-01-31T12:00:00+00:00
          worker_sha256: 41ab…
"""

import hashlib
import json
from pathlib import Path
from typing import Literal

from pydantic import Field, NonNegativeFloat, NonNegativeInt

from podium.config import Config, read_structured_file
from podium.pool.config import PoolConfig, WorkerConfig

IDENTITY_FIELDS = {"backend", "model", "base_url", "path", "replies", "max_tokens"}
"""The worker fields a description depends on: which model answers, and how long it may answer."""
ABSENT_IDENTITY = {"base_url": None, "path": None, "replies": []}
"""The value an identity field has in the fingerprint of a worker whose backend has no such field (the value every
worker config held before backends had their own fields, so descriptions written then stay fresh)."""
DescriptionState = Literal["fresh", "stale", "missing"]


class Provenance(Config):
    """Where a description came from."""

    tasks: str
    """The tasks file the worker was run on."""
    tasks_sha256: str
    """SHA-256 of that file's bytes when it was read."""
    task_ids: list[NonNegativeInt]
    """Line numbers (from 1) of the sampled tasks in that file."""
    solved: NonNegativeInt
    """How many of them the worker solved."""
    verifier: str
    """How answers were checked (qa, math, mc)."""
    describer: str
    """The worker (and model) that wrote the description."""
    written_at: str
    """When, in ISO 8601 (UTC)."""
    worker_sha256: str
    """Fingerprint of the described worker's config (:func:`worker_fingerprint`)."""


class KindFigures(Config):
    """How the worker did on the sampled tasks of one kind."""

    solved: NonNegativeInt
    """Tasks it solved."""
    attempted: NonNegativeInt
    """Tasks it was given."""


class Figures(Config):
    """What the described worker did on the sampled tasks, measured: the facts its description must agree with."""

    solved: NonNegativeInt
    """Tasks it solved."""
    attempted: NonNegativeInt
    """Tasks it was given."""
    usd_per_task: NonNegativeFloat
    """Mean USD of one task (its tokens at the worker's price)."""
    seconds_per_task: NonNegativeFloat
    """Mean wall-clock seconds of one task."""
    by_kind: dict[str, KindFigures] = Field(default_factory=dict)
    """Task kind (a tasks file's ``kind`` field, else how answers were checked) → how it did on that kind."""

    @property
    def rate(self) -> float:
        return self.solved / self.attempted if self.attempted else 0.0

    def summary(self) -> str:
        """The figures in one line, as the pool table shows them beside the description."""
        kinds = ", ".join(f"{kind} {f.solved}/{f.attempted}" for kind, f in sorted(self.by_kind.items()))
        return (
            f"measured: solved {self.solved}/{self.attempted} sampled tasks ({kinds}); "
            f"${self.usd_per_task:.6f} and {self.seconds_per_task:.1f} s per task"
        )


class WorkerDescription(Config):
    """One worker's description and its provenance."""

    description: str = Field(min_length=1)
    """What the worker is good and bad at, as shown to the orchestrator (never contradicting ``figures``)."""
    provenance: Provenance
    """Where it came from."""
    figures: Figures | None = None
    """What the worker did on the sampled tasks; absent from files written before descriptions were measured."""
    rejected: list[str] = Field(default_factory=list)
    """Sentences of the describer's text left out because they contradicted the figures."""

    def shown(self) -> str:
        """The description with its measured figures, as the orchestrator sees it."""
        return f"{self.description} ({self.figures.summary()})" if self.figures else self.description


class DescriptionsFile(Config):
    """The descriptions of a pool's workers, by worker name."""

    version: Literal[1] = 1
    """Format version."""
    workers: dict[str, WorkerDescription] = Field(default_factory=dict)
    """Worker name → its description."""


def worker_fingerprint(worker: WorkerConfig) -> str:
    """SHA-256 of the worker's identity fields (:data:`IDENTITY_FIELDS`), so a description is known stale once the
    worker it describes changes."""
    entry = worker.model_dump(mode="json")
    identity = {field: entry.get(field, ABSENT_IDENTITY.get(field)) for field in IDENTITY_FIELDS}
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()


def read_descriptions(path: str | Path) -> DescriptionsFile:
    """The descriptions file at ``path``; an absent file holds none (a refresh creates it), a malformed one is a
    ConfigError naming the field."""
    if not Path(path).exists():
        return DescriptionsFile()
    return DescriptionsFile.from_dict(read_structured_file(path) or {}, source=str(path))


def description_states(config: PoolConfig, descriptions: DescriptionsFile) -> dict[str, DescriptionState]:
    """Worker name → whether its entry in ``descriptions`` is usable (``fresh``), describes an older config
    (``stale``), or is absent (``missing``)."""
    states: dict[str, DescriptionState] = {}
    for worker in config.workers:
        entry = descriptions.workers.get(worker.name)
        if entry is None:
            states[worker.name] = "missing"
        else:
            fresh = entry.provenance.worker_sha256 == worker_fingerprint(worker)
            states[worker.name] = "fresh" if fresh else "stale"
    return states


def with_descriptions(config: PoolConfig) -> PoolConfig:
    """``config`` with each worker's fresh description from its ``descriptions`` file, with the figures measured
    when it was written, in place of the hand-written one (unchanged when the pool names no file)."""
    if config.descriptions is None:
        return config
    descriptions = read_descriptions(config.descriptions)
    states = description_states(config, descriptions)
    workers = [
        worker.model_copy(update={"description": descriptions.workers[worker.name].shown()})
        if states[worker.name] == "fresh"
        else worker
        for worker in config.workers
    ]
    return config.model_copy(update={"workers": workers})
