"""Experiment configs: the papers' ablations as files. An experiment names a benchmark, a base system (a ``podium
eval`` system config), optional training (teacher runs for SFT data, ``podium train sft`` and ``grpo`` configs),
and two or more arms that each change some of it; two scales say how much to run (``small``: the embedded model,
a few items, a step or two of training; ``full``: real endpoints and the papers' sizes) and may patch any part.

Example::

    name: serial-vs-parallel
    about: ParaManager §5 ablation — parallel rounds against serial calls.
    benchmark: gsm8k
    system: {kind: orchestrator, pool: pools/small.yaml, max_turns: 3}
    arms:
      - {name: serial, system: {policy: serial}}
      - {name: parallel, system: {policy: parallel}}
    scales:
      small: {limit: 4}
      full: {limit: 500, samples: 4, patch: {system: {pool: pools/full.yaml, max_turns: 12}}}

Paths in an experiment file (pools, trajectories, tasks, price sheets) are relative to the file.
"""

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal, Self

from pydantic import Field, PositiveFloat, PositiveInt, model_validator

from podium.config import MAX_USD_SPLIT, Config, read_structured_file
from podium.errors import ConfigError
from podium.evaluate.system_config import EvalSystemConfig, build_system, system_config_from_dict
from podium.pool.pool import load_pool_config
from podium.train.config import GRPOConfig, SFTConfig

Scale = Literal["small", "full"]
PLACEHOLDER = "(set by the experiment)"


class TeacherConfig(Config):
    """Where SFT trajectories come from: a teacher system run on the training items (SPEC §6.4)."""

    system: dict[str, Any] | None = None
    """The teacher's system config (``podium eval`` format); default: the experiment's base system."""
    keep: Literal["correct", "answered", "all"] = "correct"
    """Which teacher trajectories become SFT data: correct ones (the papers), answered ones, or all."""


class TrainingConfig(Config):
    """The training an arm goes through before it is evaluated: teacher → SFT → GRPO, each optional."""

    teacher: TeacherConfig | None = None
    """Run a teacher for SFT data (needed by ``sft`` unless it names its own trajectories)."""
    sft: dict[str, Any] | None = None
    """``podium train sft`` config fields; output_dir (and trajectories, with a teacher) are set per arm."""
    grpo: dict[str, Any] | None = None
    """``podium train grpo`` config fields; output_dir, tasks (the training items) and, after SFT, model.path
    are set per arm."""

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.sft is None and self.grpo is None:
            raise ValueError("training needs sft, grpo or both")
        if self.sft is not None and self.teacher is None and not self.sft.get("trajectories"):
            raise ValueError("sft needs a teacher (or trajectories of its own)")
        if self.teacher is not None and self.sft is None:
            raise ValueError("a teacher only makes SFT data: add sft")
        return self

    def sft_config(self, output_dir: str, trajectories: list[str] | None = None) -> SFTConfig:
        """The SFT stage's config for one arm."""
        fields = {**(self.sft or {}), "output_dir": output_dir}
        if trajectories is not None:
            fields["trajectories"] = trajectories
        return SFTConfig.from_dict(fields, source="training.sft")

    def grpo_config(self, output_dir: str, tasks: str, start: str | None) -> GRPOConfig:
        """The GRPO stage's config for one arm, starting from ``start`` (the SFT checkpoint) when given."""
        fields = copy.deepcopy(self.grpo or {})
        fields.update(output_dir=output_dir, tasks=tasks, benchmark=None)
        if start is not None:
            fields.setdefault("model", {})["path"] = start
        return GRPOConfig.from_dict(fields, source="training.grpo")


class ArmConfig(Config):
    """One arm of an experiment."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.\-]+$")
    """The arm's name: its run directory and its system's name in the report."""
    about: str = ""
    """What this arm is."""
    system: dict[str, Any] = Field(default_factory=dict)
    """Fields merged over the experiment's base system."""
    training: dict[str, Any] | None = None
    """Fields merged over the experiment's training; absent: the arm is evaluated untrained."""


class ScaleConfig(Config):
    """How much one scale runs."""

    moved: ClassVar[dict[str, str]] = MAX_USD_SPLIT

    limit: PositiveInt | None = None
    """Evaluation items: the benchmark's first N (all when absent)."""
    train_items: PositiveInt = 8
    """Training items (teacher runs and GRPO tasks): the N items after the evaluation items."""
    samples: PositiveInt = 1
    """Evaluation samples per item."""
    concurrency: PositiveInt = 1
    """Evaluation samples solved at once."""
    max_run_usd: PositiveFloat | None = None
    """Most USD each evaluation run may spend."""
    patch: dict[str, Any] = Field(default_factory=dict)
    """Merged over the experiment at this scale: ``system``, ``training``, and ``arms`` as arm name → fields."""


class ExperimentConfig(Config):
    """An ablation: arms that differ in one respect, evaluated on one benchmark and reported side by side."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.\-]+$")
    """The experiment's name."""
    about: str
    """Which paper result it reproduces and what the arms compare."""
    benchmark: str
    """Benchmark name (``podium eval --benchmark``)."""
    system: dict[str, Any]
    """The base system config (``podium eval --system`` format)."""
    training: dict[str, Any] = Field(default_factory=dict)
    """Training fields shared by the arms that train."""
    arms: list[ArmConfig] = Field(min_length=2)
    """The arms compared."""
    scales: dict[Scale, ScaleConfig]
    """``small`` and ``full``."""

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        names = [arm.name for arm in self.arms]
        if len(set(names)) != len(names):
            raise ValueError(f"arms: names must be unique, got {names}")
        missing = {"small", "full"} - set(self.scales)
        if missing:
            raise ValueError(f"scales: give both small and full (missing {sorted(missing)})")
        return self


class ExperimentRunConfig(Config):
    """``podium experiment run``: an experiment file at one scale, its arms, where they run and what is shown."""

    experiment: str
    """Experiment file (experiments/*.yaml)."""
    scale: Scale = "small"
    """small: the embedded model, a few items; full: real endpoints, paper sizes."""
    out: str | None = None
    """Output directory (default: runs/experiments/NAME-SCALE)."""
    arms: list[str] | None = None
    """Only these arms (default: every arm)."""
    data_dir: str | None = None
    """Benchmark data (default: $PODIUM_DATA or ../shared/data)."""
    quiet: bool = False
    """No progress bar."""


@dataclass(frozen=True)
class Arm:
    """An arm at one scale, validated."""

    name: str
    about: str
    system: dict[str, Any]
    """The system config as a dict (validated), named after the arm."""
    training: TrainingConfig | None


@dataclass(frozen=True)
class Experiment:
    """An experiment at one scale, ready to run."""

    name: str
    about: str
    benchmark: str
    scale: Scale
    settings: ScaleConfig
    arms: list[Arm]
    source: str
    """The file it came from."""


def load_experiment(path: str | Path, scale: Scale) -> Experiment:
    """Read an experiment file and resolve it at ``scale``: the scale's patch merged in, paths made absolute,
    every arm's system and training configs validated (nothing is built or run)."""
    path = Path(path)
    raw = read_structured_file(path)
    config = ExperimentConfig.from_dict(raw, source=str(path))
    settings = config.scales[scale]
    patch = copy.deepcopy(settings.patch)
    arm_patches = patch.pop("arms", {}) or {}
    unknown = set(arm_patches) - {arm.name for arm in config.arms}
    if unknown:
        raise ConfigError(f"{path}: scales.{scale}.patch.arms names unknown arms {sorted(unknown)}")
    base = merged(config.model_dump(include={"system", "training"}), patch)
    arms = []
    for arm in config.arms:
        fields = merged(arm.model_dump(), arm_patches.get(arm.name, {}))
        system = _absolute(merged(base["system"], fields["system"]), path.parent, SYSTEM_PATHS)
        system["name"] = arm.name
        arms.append(Arm(arm.name, arm.about, system, _training(base["training"], fields["training"], path, arm.name)))
    for arm in arms:
        _validate_system(arm.system, f"{path} (arm {arm.name}, {scale})")
    return Experiment(config.name, config.about, config.benchmark, scale, settings, arms, str(path))


SYSTEM_PATHS = (("pool",),)
TRAINING_PATHS = (
    ("teacher", "system", "pool"),
    ("sft", "trajectories"),
    ("grpo", "tasks"),
    ("grpo", "rollout", "pool"),
    ("grpo", "rollout", "price_sheets"),
)


def _training(base: dict[str, Any], arm: dict[str, Any] | None, path: Path, name: str) -> TrainingConfig | None:
    if arm is None:
        return None
    fields = _absolute(merged(base, arm), path.parent, TRAINING_PATHS)
    training = TrainingConfig.from_dict(fields, source=f"{path} (training of arm {name})")
    # Check the stage configs now, with placeholders for what each arm's run fills in.
    if training.sft is not None:
        training.sft_config(PLACEHOLDER, None if training.sft.get("trajectories") else [PLACEHOLDER])
    if training.grpo is not None:
        rollout = training.grpo_config(PLACEHOLDER, PLACEHOLDER, None).rollout
        if rollout.pool is not None:
            load_pool_config(rollout.pool)
    if training.teacher is not None and training.teacher.system is not None:
        _validate_system(training.teacher.system, f"{path} (teacher of arm {name})")
    return training


def arm_errors(experiment: Experiment) -> list[ConfigError]:
    """Why arms could not run, from building every arm's system and teacher (nothing runs): a system that cannot
    produce an action (:class:`~podium.runtime.checks.NotRunnable`) or that names what is not there. An experiment
    with any stops before its first arm."""
    found = []
    for arm in experiment.arms:
        systems = [("system", arm.system)]
        teacher = arm.training.teacher if arm.training is not None else None
        if teacher is not None:
            systems.append(("teacher", teacher.system or arm.system))
        for role, system in systems:
            source = f"{experiment.source} ({role} of arm {arm.name}, {experiment.scale})"
            try:
                build_system(system_config_from_dict(system, source=source))
            except ConfigError as error:
                found.append(error)
    return found


def _validate_system(system: dict[str, Any], source: str) -> EvalSystemConfig:
    """The system config, its pool file (if it names one) read and validated too."""
    config = system_config_from_dict(system, source=source)
    if isinstance(system.get("pool"), str):
        load_pool_config(system["pool"])
    return config


def merged(base: Any, patch: Any) -> Any:
    """``patch`` merged into a copy of ``base``: mappings merge key by key (recursively), anything else in the
    patch replaces what was there (``None`` too)."""
    if not isinstance(base, dict) or not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(base)
    for key, value in patch.items():
        result[key] = merged(result.get(key), value) if isinstance(value, dict) else copy.deepcopy(value)
    return result


def _absolute(fields: dict[str, Any], base: Path, keys: tuple[tuple[str, ...], ...]) -> dict[str, Any]:
    """``fields`` with the relative paths at ``keys`` (a string or a list of strings) made absolute from ``base``."""
    for key in keys:
        parent = fields
        for part in key[:-1]:
            parent = parent.get(part) if isinstance(parent, dict) else None
        if not isinstance(parent, dict):
            continue
        value = parent.get(key[-1])
        if isinstance(value, str):
            parent[key[-1]] = str((base / value).resolve())
        elif isinstance(value, list):
            parent[key[-1]] = [str((base / item).resolve()) if isinstance(item, str) else item for item in value]
    return fields
