"""``podium data filter-rl``: ParaManager's RL set (SPEC §6.4). A worker answers each question k times; questions
it always or never solves carry no learning signal (or are broken) and are dropped: a question stays when its pass
rate lies strictly inside the band (default: strictly between 0 and 1). Attempts whose infrastructure failed do
not count toward the rate.

Outputs in ``--out``: ``rl.jsonl`` (tasks for ``podium train grpo``, with the pass rate and provenance in their
metadata, and a preference pair each with ``--preferences``), ``funnel.json``; ``work/rates.jsonl`` resumes.
"""

from pathlib import Path

from pydantic import Field, NonNegativeFloat, NonNegativeInt, PositiveInt, model_validator

from podium.core.record import Record
from podium.data.common import StageSettings, finish_stage, open_stage
from podium.data.funnel import FunnelBuilder
from podium.data.preferences import read_preferences
from podium.data.solver import Solver, grade, worker_solver
from podium.data.sources import ItemSource, SourcedItem, load_items, unique_ids
from podium.data.tasks import pick_preference, rl_task
from podium.data.traces import infrastructure_failure
from podium.graders.grader import Grader
from podium.solve.config import SystemConfig
from podium.solve.jsonl import JsonlLog, write_jsonl
from podium.solve.records import FilterDecision, Funnel
from podium.solve.system import sample_seed

STAGE = "filter-rl"


class DifficultyConfig(ItemSource, StageSettings):
    """The difficulty band filter of an RL set."""

    solver: SystemConfig = Field(default_factory=lambda: worker_solver(None, None))
    """Who answers: by default a worker alone (no tools, one turn); any orchestrator configuration works."""
    samples: PositiveInt = 8
    """Answers per question (ParaManager: 8)."""
    temperature: NonNegativeFloat = 1.0
    """Sampling temperature (above 0, or every answer is the same)."""
    min_rate: float = Field(0.0, ge=0.0, le=1.0)
    """Keep questions whose pass rate is strictly above this."""
    max_rate: float = Field(1.0, ge=0.0, le=1.0)
    """… and strictly below this."""
    preferences: str | None = None
    """Preference pairs (``podium data preferences`` output) to attach, one per task, for ToolOrchestra's reward."""
    pool: str | None = Field(None, exclude=True)
    """Pool file of the worker that answers alone (default: embedded); sets ``solver``."""
    worker: str | None = Field(None, exclude=True)
    """The worker that answers alone (default: the pool's first); sets ``solver``."""

    @model_validator(mode="after")
    def _band(self) -> "DifficultyConfig":
        if self.min_rate >= self.max_rate:
            raise ValueError(f"min_rate ({self.min_rate}) must be below max_rate ({self.max_rate})")
        return self

    @model_validator(mode="after")
    def _worker_alone(self) -> "DifficultyConfig":
        """``pool`` and ``worker`` name a worker answering alone: the solver, written where a system would be."""
        if self.pool is None and self.worker is None:
            return self
        if "solver" in self.model_fields_set:
            raise ValueError("give solver (a system) or pool and worker (a worker answering alone), not both")
        self.__dict__["solver"] = worker_solver(self.pool, self.worker)
        return self


class PassRate(Record):
    """A question's answers (one unit of work)."""

    item_id: str
    outcomes: list[bool] = Field(default_factory=list)
    """Verdicts of the answers whose infrastructure held."""
    infrastructure: NonNegativeInt = 0
    """Answers lost to infrastructure failures."""
    answers: list[str | None] = Field(default_factory=list)
    """The answers, in sample order."""
    usd: NonNegativeFloat = 0.0

    @property
    def rate(self) -> float | None:
        return sum(self.outcomes) / len(self.outcomes) if self.outcomes else None


async def pass_rate(solver: Solver, grader: Grader, entry: SourcedItem, config: DifficultyConfig) -> PassRate:
    """k answers to one question, graded (the unit a distributed run would ship)."""
    result = PassRate(item_id=entry.item.id)
    for sample in range(config.samples):
        seed = sample_seed(config.seed, entry.item.id, sample)
        trajectory = await solver.attempt(entry, temperature=config.temperature, seed=seed)
        result.usd += trajectory.usage.usd
        result.answers.append(trajectory.answer)
        if infrastructure_failure(trajectory) is not None:
            result.infrastructure += 1
            continue
        result.outcomes.append((await grade(grader, entry, trajectory)).correct)
    return result


def _band_reason(rate: PassRate, config: DifficultyConfig) -> str | None:
    value = rate.rate
    if value is None:
        return "every answer lost to infrastructure failures"
    if value <= config.min_rate:
        return "never solved" if value == 0 else f"pass rate ≤ {config.min_rate:g}"
    if value >= config.max_rate:
        return "always solved" if value == 1 else f"pass rate ≥ {config.max_rate:g}"
    return None


async def filter_rl(config: DifficultyConfig, *, progress: bool = True) -> Funnel:
    """Build (or resume) the RL set of ``config`` in ``config.out``."""
    out = Path(config.out)
    items = unique_ids(load_items(config))
    solver = Solver(config.solver)
    solver.check(items)
    grader = Grader(data_dir=config.data_dir)
    preferences = read_preferences(config.preferences) if config.preferences else []
    stage = open_stage(out, STAGE, config, progress=progress)  # only once the inputs are known to be good
    funnel = FunnelBuilder(STAGE)
    log = JsonlLog(out / "work" / "rates.jsonl", PassRate, lambda unit: unit.item_id)
    stage.runner.charge(sum(unit.usd for unit in log.values()))
    rates = await stage.runner.run(
        f"sampling {solver.model}",
        items,
        lambda entry: entry.item.id,
        lambda entry: pass_rate(solver, grader, entry, config),
        log,
        cost=lambda unit: unit.usd,
        bound=lambda _entry: (config.solver.max_episode_usd or 0.0) * config.samples or None,
    )
    funnel.count("attempted", "questions", len(items), {"not attempted: USD cap reached": len(items) - len(rates)})
    kept = funnel.apply("pass rate band", "questions", rates, lambda rate: _band_reason(rate, config))
    lost = sum(rate.infrastructure for rate in rates)
    if lost:
        funnel.note(f"{lost} answer(s) lost to infrastructure failures were left out of the pass rates")
    by_id = {entry.item.id: entry for entry in items}
    rows = []
    for rate in kept:
        entry = by_id[rate.item_id]
        provenance = solver.provenance(STAGE, entry, temperature=config.temperature, seed=config.seed)
        details = {"pass_rate": rate.rate, "attempts": len(rate.outcomes)}
        band = f"pass rate {rate.rate:g} in ({config.min_rate:g}, {config.max_rate:g})"
        decisions = [FilterDecision(stage=STAGE, filter="pass rate band", kept=True, reason=band)]
        preference = pick_preference(preferences, config.seed, entry.item.id)
        rows.append(rl_task(entry, provenance, details, decisions, preference))
    return finish_stage(stage, funnel, {"rl.jsonl": write_jsonl(out / "rl.jsonl", rows)}, ["rl.jsonl"])
