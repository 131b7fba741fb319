"""What every stage shares: the settings that may change between invocations, opening a stage directory
(manifest check, runner), and finishing it (funnel saved)."""

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from pydantic import Field, PositiveFloat, PositiveInt

from podium.config import MAX_USD_SPLIT, Config
from podium.data.funnel import FunnelBuilder, save_funnel, why_empty
from podium.data.store import check_stage
from podium.solve.records import Funnel
from podium.solve.runner import BatchRunner

RUN_SETTINGS = frozenset({"out", "concurrency", "max_run_usd", "limit"})
"""Settings a resumed stage may change; any other change needs a new output directory."""


class StageSettings(Config):
    """Where a stage writes and how it runs."""

    moved: ClassVar[dict[str, str]] = MAX_USD_SPLIT

    out: str
    """Output directory; rerunning with the same one resumes."""
    concurrency: PositiveInt = 4
    """Units (questions, trajectories, steps) worked on at once."""
    max_run_usd: PositiveFloat | None = None
    """Stop starting units once the stage (every invocation) has spent this; a unit whose cost is bounded in
    advance starts only if it fits."""
    seed: int = 0
    """Seed of sampling orders, blind labels and splits."""
    quiet: bool = Field(False, exclude=True)
    """No progress bar (how this invocation shows itself: not part of the stage's settings)."""


class LLMStageSettings(StageSettings):
    """A stage whose steps ask an LLM for JSON (:mod:`podium.data.llm`)."""

    attempts: PositiveInt = 2
    """Requests per step: a reply that fails its checks is sent back with the problem, until this many were made."""
    prompts_dir: str | None = None
    """Directory searched first for the stage's versioned prompt files (``<group>/<name>.vN.txt``)."""


@dataclass
class Stage:
    """An open stage directory and its runner."""

    name: str
    out: Path
    runner: BatchRunner


def open_stage(out: Path, name: str, config: Config, *, progress: bool = True) -> Stage:
    """Check (or create) the manifest of ``out`` and start the stage's runner."""
    settings = config.model_dump(mode="json", exclude=set(RUN_SETTINGS))
    check_stage(out, name, settings)
    concurrency = getattr(config, "concurrency", 4)
    runner = BatchRunner(concurrency=concurrency, max_usd=getattr(config, "max_run_usd", None), progress=progress)
    return Stage(name, out, runner)


def finish_stage(stage: Stage, funnel: FunnelBuilder, outputs: dict[str, int], products: Sequence[str]) -> Funnel:
    """Build and save the funnel of this invocation; when the ``products`` (the outputs the stage exists to make)
    hold no row, the funnel says which filter removed everything."""
    if stage.runner.stopped_by_budget:
        funnel.note("the USD cap left units unstarted: rerun with a higher --max-run-usd to finish")
    built = funnel.build(outputs, usd=stage.runner.spent, wall_s=stage.runner.wall_s)
    built.stopped_by_budget = stage.runner.stopped_by_budget
    if not any(outputs[name] for name in products):
        built.empty = why_empty(built.steps, products, built.notes)
    save_funnel(stage.out, built)
    return built
