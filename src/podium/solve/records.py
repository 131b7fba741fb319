"""Records evaluation, data and training share: a graded trajectory (one attempt at an item with its verdict: the row of
``podium eval`` results), a data row (a graded trajectory with its provenance and filter decisions: the row of
``podium data`` outputs), the funnel a data stage reports, and one reader that takes the trajectory out of any
of these rows (or of a bare trajectory line), so training and collection accept each other's files.

Data rows are written so that the ``datasets`` library loads them directly: every field has one JSON type in
every row, and the trajectory (whose call arguments and values vary in shape) travels as one JSON text.
"""

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, NonNegativeFloat, NonNegativeInt, ValidationError, field_serializer, field_validator

from podium.core.calls import CallUsage
from podium.core.messages import Message
from podium.core.preference import Preference
from podium.core.record import Record
from podium.core.trajectory import Trajectory
from podium.graders.verdict import Verdict
from podium.solve.jsonl import RecordError, read_jsonl, scan_jsonl


class GradedTrajectory(Record):
    """One finished (item, sample): the attempt, its answer and the verifier's verdict."""

    benchmark: str
    """Benchmark name."""
    system: str
    """System name."""
    item_id: str
    """The item's id within the benchmark."""
    sample: NonNegativeInt
    """Sample index, from 0."""
    answer: str | None
    """The system's final answer."""
    gold: str
    """The gold, as text."""
    verdict: Verdict
    """The verifier's judgement."""
    usage: CallUsage
    """Total tokens, USD and latency of the attempt."""
    wall_s: NonNegativeFloat
    """Wall-clock seconds of the attempt."""
    error: str | None = None
    """Set when the system failed (backend down…); the sample then counts as wrong."""
    trajectory: Trajectory
    """The full attempt."""

    @property
    def key(self) -> tuple[str, int]:
        return self.item_id, self.sample


def read_graded(path: str | Path) -> tuple[list[GradedTrajectory], int]:
    """Graded trajectories of a results file and how many lines were unusable (torn, corrupt or duplicate keys).

    Reading never changes the file.
    """
    records, unusable = scan_jsonl(Path(path), GradedTrajectory, lambda record: record.key)
    return list(records.values()), len(unusable)


RUN_MANIFEST = "manifest.json"
"""The manifest file of an evaluation run directory (beside its ``results.jsonl``)."""
RUN_RESULTS = "results.jsonl"
"""The graded attempts of an evaluation run directory, one :class:`GradedTrajectory` per line."""


class RunManifest(Record):
    """What a run directory holds; a resume must match it."""

    benchmark: str
    """Benchmark name."""
    source: Literal["local", "hub"] = "local"
    """Where the items came from."""
    system: str
    """System name."""
    system_config: dict[str, Any] = Field(default_factory=dict)
    """The system's config as given (empty for systems built in code)."""
    samples: int
    """Samples per item."""
    preferences: list[Preference] = Field(default_factory=list)
    """User preferences given to the items (item i gets preference i mod n); empty when none."""


class Provenance(Record):
    """Where a data row comes from: enough to reproduce it, or to know it cannot be compared with another."""

    stage: str
    """The ``podium data`` stage that wrote the row (collect, filter-rl, curriculum, …)."""
    source: str
    """The source benchmark, tasks file or results file of the item."""
    item_id: str
    """The item's id within its source."""
    model: str | None = None
    """The model that produced the row: the teacher orchestrator, the sampled worker or the LLM of a step."""
    solver: str | None = None
    """The name of the solver (teacher, worker, cold-start policy) configuration."""
    temperature: float | None = None
    """Sampling temperature of the model."""
    seed: int | None = None
    """Seed of the attempt (blind labels, sampling order)."""
    policy: str | None = None
    """Action space of the orchestrator (serial, parallel, dag)."""
    pool_hash: str | None = None
    """SHA-256 (first 16 hex digits) of the pool configuration."""
    prices_hash: str | None = None
    """SHA-256 (first 16 hex digits) of the price sheet the pool was priced with."""
    podium_version: str
    """Version of Podium that wrote the row."""
    distillation_pass: str | None = None
    """Uno curriculum: ``primary``, ``augmentation`` or ``fallback``."""
    prompt: str | None = None
    """Versioned prompt of an LLM step (``name@vN``) that made the row."""
    system_version: str | None = None
    """The version of the system whose episode the row is (:mod:`podium.solve.version`), where it was recorded."""
    episode_id: str | None = None
    """Served traffic: the episode the row is (its first response's id; ``:shadow`` for a shadow's)."""


class FilterDecision(Record):
    """What one filter decided about a row."""

    stage: str
    """The stage the filter belongs to."""
    filter: str
    """The filter's name."""
    kept: bool
    """Whether the row passed."""
    reason: str = ""
    """Why (for a row dropped or preferred)."""


class DataRow(Record):
    """A graded trajectory with provenance and filter decisions: the row of SFT data and of failure sets."""

    id: str
    """Unique id of the row."""
    item_id: str
    """The item's id within its source."""
    benchmark: str
    """The source benchmark (or tasks file)."""
    question: str
    """The task as given."""
    gold: str
    """The gold, as text."""
    verifier: str
    """Which verifier judged the answer."""
    sample: NonNegativeInt = 0
    """Sample index of the attempt."""
    answer: str | None = None
    """The final answer."""
    correct: bool
    """The verifier's outcome b."""
    score: float = 0.0
    """The verifier's graded score."""
    reason: str = ""
    """Why the verdict is what it is (or why the attempt failed)."""
    messages: list[Message] = Field(default_factory=list)
    """The orchestrator's conversation (system, task, its outputs, observations): the chat column for SFT."""
    trajectory: Trajectory
    """The full attempt; stored as one JSON text so every row has the same columns."""
    provenance: Provenance
    """Where the row comes from."""
    decisions: list[FilterDecision] = Field(default_factory=list)
    """Every filter decision about the row, in order."""

    @field_validator("trajectory", mode="before")
    @classmethod
    def _parse_trajectory(cls, value: Any) -> Any:
        return Trajectory.model_validate_json(value) if isinstance(value, str | bytes) else value

    @field_serializer("trajectory")
    def _trajectory_text(self, trajectory: Trajectory) -> str:
        return trajectory.model_dump_json()


class TrajectoryLine(Record):
    """A trajectory read from any row shape, with the verdict when the row was graded."""

    trajectory: Trajectory
    """The attempt."""
    correct: bool | None = None
    """The verifier's outcome for graded rows (results, data rows); ``None`` for a bare trajectory."""
    error: str | None = None
    """A graded row's system failure, if any."""
    kept_wrong: bool = False
    """A data row whose stage kept it as a label though its answer is wrong (``podium data collect --keep-wrong``)."""


def read_trajectory_lines(path: str | Path) -> Iterator[TrajectoryLine]:
    """The trajectory of every line of ``path``: a bare trajectory, a graded trajectory (``podium eval``
    results) or a data row (``podium data`` outputs). Anything else is a :class:`RecordError` naming the line."""
    for number, value in read_jsonl(path):
        try:
            yield _trajectory_line(value)
        except ValidationError as error:
            raise RecordError(f"{path}:{number} is not a trajectory, graded trajectory or data row: {error}") from error


def _trajectory_line(value: dict[str, Any]) -> TrajectoryLine:
    if "trajectory" not in value:
        return TrajectoryLine(trajectory=Trajectory.model_validate(value))
    if "verdict" in value:
        graded = GradedTrajectory.model_validate(value)
        return TrajectoryLine(trajectory=graded.trajectory, correct=graded.verdict.correct, error=graded.error)
    row = DataRow.model_validate(value)
    kept = not row.correct and any(decision.filter == "verifier" and decision.kept for decision in row.decisions)
    return TrajectoryLine(trajectory=row.trajectory, correct=row.correct, kept_wrong=kept)


class FunnelStep(Record):
    """One filter of a data stage: how many units entered, how many it kept, and why the others left."""

    name: str
    """The filter."""
    unit: str
    """What is counted (questions, trajectories, records, functions, tasks, pairs…)."""
    entered: NonNegativeInt
    """Units that reached the filter."""
    kept: NonNegativeInt
    """Units that passed it."""
    left: dict[str, NonNegativeInt] = Field(default_factory=dict)
    """Why the others left: reason → count (the counts add up to ``entered - kept``)."""

    @property
    def consistent(self) -> bool:
        """Whether the counts add up."""
        return self.entered == self.kept + sum(self.left.values())


class Funnel(Record):
    """What a data stage did, filter by filter: the file ``funnel.json`` beside a stage's outputs.

    ``podium report`` renders it as data (it never imports the data stages): a JSON object with ``stage``,
    ``steps`` (each ``name``, ``unit``, ``entered``, ``kept``, ``left``: reason → count), ``outputs`` (file →
    rows), ``usd``, ``wall_s``, ``podium_version``, ``stopped_by_budget``, ``empty`` and ``notes``.
    """

    stage: str
    """The stage (collect, filter-rl, curriculum, classify-failures, preferences, synth-domain)."""
    steps: list[FunnelStep] = Field(default_factory=list)
    """The filters in the order they ran."""
    outputs: dict[str, NonNegativeInt] = Field(default_factory=dict)
    """Output file → rows written."""
    usd: NonNegativeFloat = 0.0
    """Spend of the stage (every invocation)."""
    wall_s: NonNegativeFloat = 0.0
    """Wall-clock seconds of the last invocation."""
    podium_version: str = ""
    """Version of Podium that wrote it."""
    stopped_by_budget: bool = False
    """Whether the USD cap left units unstarted (rerun with a higher cap to finish)."""
    empty: str | None = None
    """Set when the stage produced nothing it exists to produce: which filter removed everything, and why."""
    notes: list[str] = Field(default_factory=list)
    """Remarks (a filter that could not apply, a cap that could not be met)."""


FUNNEL_FILE = "funnel.json"
"""The funnel's file name in a stage's output directory."""


def read_funnel(path: str | Path) -> Funnel:
    """A funnel file, or the funnel of a stage directory."""
    path = Path(path)
    if path.is_dir():
        path = path / FUNNEL_FILE
    try:
        return Funnel.model_validate_json(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise RecordError(f"cannot read {path}: {error.strerror}") from error
    except ValidationError as error:
        raise RecordError(f"{path} is not a funnel: {error}") from error
