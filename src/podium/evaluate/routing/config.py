"""The configs of the routing commands: every field is a flag and a YAML key (``--config FILE``), written once."""

from typing import Any, ClassVar, Literal, Self, get_args

from pydantic import Field, NonNegativeInt, PositiveFloat, PositiveInt, field_validator, model_validator

from podium.config import MAX_USD_SPLIT, Config
from podium.graders.grader import GradingConfig
from podium.recording import Split, SplitRule
from podium.routers.models import RouterKind


class RecordConfig(Config):
    """``podium routing record``: ask every worker of a pool every task and grade each reply."""

    moved: ClassVar[dict[str, str]] = MAX_USD_SPLIT

    pool: str
    """The pool file whose workers are recorded."""
    out: str
    """The recording's directory; recording into it again resumes."""
    tasks: str | None = None
    """A tasks file (JSONL of ``question``, ``gold``, ``verifier``, optional ``id`` and ``metadata``)."""
    benchmark: str | None = None
    """Or a benchmark's name (``mmlu_pro``, ``gsm8k``, ``math500``…), read from the benchmark data."""
    workers: list[str] = Field(default_factory=list)
    """The workers to record; default: every worker of the pool."""
    limit: PositiveInt | None = None
    """Only the first N tasks."""
    max_tokens: PositiveInt = 1024
    """Completion budget of each worker per task."""
    concurrency: PositiveInt = 8
    """Calls in flight at once."""
    per_worker: PositiveInt = 4
    """Calls in flight at once to one worker."""
    max_run_usd: PositiveFloat | None = None
    """Hard cap on the recording's spend (earlier runs of it included): a call starts only when its cost bound fits."""
    split: SplitRule = Field(default_factory=SplitRule)
    """How tasks are split into train, validation and test."""
    grading: GradingConfig | None = None
    """How replies are graded; default: each task's own verifier. ``{verifier: judge, judge: {…}}``: an LLM judge."""
    data_dir: str | None = None
    """Benchmark data (default: $PODIUM_DATA or ../shared/data)."""
    quiet: bool = Field(False, exclude=True)
    """No progress bar (how this invocation shows itself: not part of the recording's settings)."""

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        if (self.tasks is None) == (self.benchmark is None):
            raise ValueError("give tasks (a file) or benchmark (a name), one of them")
        return self


Source = Literal["routellm-gsm8k", "routellm-mmlu"]
"""RouteLLM's recordings Podium imports: GSM8K responses, MMLU outcomes."""


class ImportConfig(Config):
    """``podium routing import``: one of RouteLLM's recordings of Mixtral and GPT-4 as a Podium recording."""

    source: Source
    """routellm-gsm8k (GSM8K responses) or routellm-mmlu (MMLU outcomes)."""
    out: str
    """The recording's directory."""
    data_dir: str | None = None
    """Benchmark data (default: $PODIUM_DATA or ../shared/data)."""

    @field_validator("source", mode="before")
    @classmethod
    def _known(cls, source: Any) -> Any:
        if source not in get_args(Source):
            raise ValueError(f"'{source}' is not {' or '.join(get_args(Source))}")
        return source


class TasksConfig(Config):
    """``podium routing tasks``: the tasks of a recording's split as a tasks file."""

    recording: str
    """A recording (``podium routing record`` or ``import``)."""
    out: str
    """Tasks JSONL to write (what ``podium eval``, ``data`` and ``train`` read)."""
    split: Split = "train"
    """The split whose tasks are written."""
    limit: PositiveInt | None = None
    """Only the first N tasks of the split."""


class CompareConfig(Config):
    """``podium routing compare``: routers and evaluated orchestrators on one split of a recording."""

    recording: str
    """The recording (``podium routing record`` or ``import``)."""
    split: Split = "test"
    """The split compared on; the routers are fitted on the train split."""
    limit: PositiveInt | None = None
    """Only the first N tasks of the split."""
    train_limit: PositiveInt | None = None
    """Fit the routers on the first N train tasks only (default: all; give the orchestrator's training set to
    compare on equal data)."""
    routers: list[RouterKind] | None = None
    """The routers to fit and trace; default: every one the recording allows (cascades need recorded replies)."""
    orchestrators: dict[str, str] = Field(default_factory=dict)
    """Name → a ``podium eval`` run directory of an escalate-policy orchestrator over the recording's workers
    (flag: ``--orchestrator NAME=RUN_DIR``)."""
    calibrations: dict[str, str] = Field(default_factory=dict)
    """Orchestrator name → its ``podium eval`` run on the validation split, which calibrates its escalation
    probability for ``reward_from`` (flag: ``--calibration NAME=RUN_DIR``); without one it gets no priced row."""
    reward_from: str | None = None
    """A ``podium train grpo`` config whose reward is ``cost_penalty``: each probability router and each calibrated
    orchestrator is also shown as ``NAME_priced``, where the reward picks its operating point at these prices."""
    prices: str | None = None
    """A price sheet merged over the recorded prices (as the runs were priced)."""
    out: str | None = None
    """Also write ``results.json`` and ``routing.html`` (chart and table) here."""
    seed: NonNegativeInt = 0
    """Seed of the random router and of the bootstrap's resamples."""
    bootstrap: NonNegativeInt = 1000
    """Resamples of the tasks behind each metric's 95 % interval and the paired difference of the best
    orchestrator and the best router (0: no intervals)."""

    @model_validator(mode="after")
    def _calibrations(self) -> Self:
        if self.calibrations and self.reward_from is None:
            raise ValueError("calibrations calibrate an orchestrator for reward_from, which is not given")
        unknown = sorted(set(self.calibrations) - set(self.orchestrators))
        if unknown:
            raise ValueError(f"calibrations: {', '.join(unknown)} is no orchestrator")
        return self


class ThresholdConfig(Config):
    """``podium routing threshold``: the escalation threshold a price sheet picks for an orchestrator."""

    recording: str
    """The recording whose train split prices the decision."""
    reward_from: str
    """A ``podium train grpo`` config whose reward (``cost_penalty``) the threshold serves."""
    calibration: str | None = None
    """A ``podium eval`` run of the orchestrator on the validation split, which calibrates its escalation
    probability (default: its probability read as it is)."""
    prices: str | None = None
    """A price sheet merged over the recorded prices."""
    train_limit: PositiveInt | None = None
    """Price on the first N train tasks only."""
    system: str | None = None
    """An escalate-policy system file to write again with the threshold (with ``system_out``)."""
    system_out: str | None = None
    """Where ``system`` is written with its ``escalate_above``."""

    @model_validator(mode="after")
    def _together(self) -> Self:
        if (self.system is None) != (self.system_out is None):
            raise ValueError("system and system_out go together: the system file to write again, and where")
        return self
