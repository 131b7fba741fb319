"""``podium data curriculum``: Uno-Orchestra's verifier-gated curriculum (SPEC §6.4, seed 003 appendix A.4).

A cold-start policy π0 and a teacher π* each attempt every question at pass@k (k = 3). Questions π0 solves teach
nothing and are dropped; D_SFT = {(q, τ*): π0 fails, π* succeeds}; D_RL = {q: both fail}. SFT questions get extra
teacher samples at temperatures {0.5, 1.0}, RL questions at {0.3, 0.7, 1.0}; only verifier-passing rollouts
survive, and an RL question with one is promoted to D_SFT. The RL questions left are retried by a cascade of
stronger teachers, in order; a success promotes the question. Trajectories whose infrastructure failed never count.
Every SFT row records its teacher and ``distillation_pass`` (primary, augmentation, fallback).

Outputs in ``--out``: ``sft.jsonl`` (data rows), ``rl.jsonl`` (tasks for ``podium train grpo``), ``failures.jsonl``
(the teachers' failed attempts, for ``podium data classify-failures``), ``funnel.json``; ``work/`` resumes.
"""

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from pydantic import Field, NonNegativeFloat, PositiveInt

from podium.core.record import Record
from podium.data.common import Stage, StageSettings, finish_stage, open_stage
from podium.data.constraints import read_constraints
from podium.data.funnel import FunnelBuilder
from podium.data.pools import PoolCache
from podium.data.preferences import read_preferences
from podium.data.solver import Solver, data_row, grade
from podium.data.sources import ItemSource, SourcedItem, load_items, unique_ids
from podium.data.tasks import pick_preference, rl_task
from podium.data.traces import format_failure, infrastructure_failure
from podium.datasets.items import BenchmarkItem
from podium.graders.grader import Grader
from podium.solve.config import SystemConfig
from podium.solve.jsonl import JsonlLog, write_jsonl
from podium.solve.records import DataRow, FilterDecision, Funnel
from podium.solve.system import sample_seed

STAGE = "curriculum"


class CurriculumConfig(ItemSource, StageSettings):
    """Uno's verifier-gated split of a task pool into SFT and RL data."""

    cold_start: SystemConfig = Field(default_factory=SystemConfig)
    """π0: the untrained orchestrator (an orchestrator configuration)."""
    teacher: SystemConfig = Field(default_factory=SystemConfig)
    """π*: the teacher orchestrator."""
    fallback: list[SystemConfig] = Field(default_factory=list)
    """Stronger teachers tried in order on the RL questions left; a success promotes the question to SFT."""
    attempts: PositiveInt = 3
    """k of the pass@k probes (Uno: 3), also the attempts of each fallback teacher."""
    probe_temperature: NonNegativeFloat = 1.0
    """Sampling temperature of the probes and the fallback attempts."""
    sft_temperatures: list[NonNegativeFloat] = Field(default_factory=lambda: [0.5, 1.0])
    """Extra teacher samples for SFT questions, one per temperature (Uno: 0.5 and 1.0)."""
    rl_temperatures: list[NonNegativeFloat] = Field(default_factory=lambda: [0.3, 0.7, 1.0])
    """Extra teacher samples for RL questions, one per temperature (Uno: 0.3, 0.7 and 1.0)."""
    constraints: str | None = None
    """Constraints file from ``podium data classify-failures``, added to the teachers' system prompts."""
    preferences: str | None = None
    """Preference pairs to attach, one per RL task, for ToolOrchestra's reward."""


class Attempts(Record):
    """One solver's attempts at one question in one phase (a unit of work)."""

    item_id: str
    rows: list[DataRow]

    @property
    def usd(self) -> float:
        return sum(row.trajectory.usage.usd for row in self.rows)


def usable(rows: Sequence[DataRow]) -> list[DataRow]:
    """Attempts whose infrastructure held."""
    return [row for row in rows if infrastructure_failure(row.trajectory) is None]


def passing(rows: Sequence[DataRow]) -> list[DataRow]:
    """Attempts the verifier accepted that ended well formed."""
    return [row for row in usable(rows) if row.correct and format_failure(row.trajectory) is None]


class Curriculum:
    """The phases of one curriculum run."""

    def __init__(self, config: CurriculumConfig, stage: Stage, items: list[SourcedItem]) -> None:
        self.config = config
        self.stage = stage
        self.items = {entry.item.id: entry for entry in items}
        self.grader = Grader(data_dir=config.data_dir)
        constraints = read_constraints(config.constraints)
        pools: PoolCache = {}
        self.cold = Solver(config.cold_start, pools=pools)
        self.teacher = Solver(config.teacher, constraints=constraints, pools=pools)
        self.fallback = [Solver(solver, constraints=constraints, pools=pools) for solver in config.fallback]
        for solver in (self.cold, self.teacher, *self.fallback):
            solver.check(items)

    async def attempt(
        self, solver: Solver, phase: str, distillation: str, entry: SourcedItem, temperatures: Sequence[float]
    ) -> Attempts:
        """``solver``'s graded attempts at one question, one per temperature (the unit of work)."""
        rows = []
        for index, temperature in enumerate(temperatures):
            seed = sample_seed(self.config.seed, f"{phase}:{entry.item.id}", index)
            trajectory = await solver.attempt(entry, temperature=temperature, seed=seed)
            verdict = await grade(self.grader, entry, trajectory)
            extra = {"distillation_pass": distillation} if distillation else {}
            provenance = solver.provenance(STAGE, entry, temperature=temperature, seed=seed, **extra)
            row_id = f"{STAGE}:{phase}:{entry.item.id}:{index}"
            rows.append(data_row(row_id, entry, index, trajectory, verdict, provenance))
        return Attempts(item_id=entry.item.id, rows=rows)

    async def phase(
        self,
        phase: str,
        solver: Solver,
        distillation: str,
        item_ids: Sequence[str],
        temperatures: dict[str, list[float]],
    ) -> dict[str, Attempts]:
        """Run (or resume) one phase over ``item_ids``; ``temperatures`` per question."""
        log = JsonlLog(self.stage.out / "work" / f"{phase}.jsonl", Attempts, lambda unit: unit.item_id)
        self.stage.runner.charge(sum(unit.usd for unit in log.values()))
        entries = [self.items[item_id] for item_id in item_ids]
        bound = (solver.config.max_episode_usd or 0.0) * max((len(t) for t in temperatures.values()), default=0)
        done = await self.stage.runner.run(
            f"{phase} · {solver.name}",
            entries,
            lambda entry: entry.item.id,
            lambda entry: self.attempt(solver, phase, distillation, entry, temperatures[entry.item.id]),
            log,
            cost=lambda unit: unit.usd,
            bound=lambda _entry: bound or None,
        )
        return {unit.item_id: unit for unit in done}

    def rl_decisions(self) -> list[FilterDecision]:
        """What sent a question to D_RL: every probe and rescue failed."""
        k = self.config.attempts
        steps = [f"cold-start π0 pass@{k}", f"teacher π* pass@{k}", "RL pool: augmentation"]
        steps += [f"RL pool: fallback {solver.name}" for solver in self.fallback]
        return [FilterDecision(stage=STAGE, filter=step, kept=True, reason="not solved") for step in steps]

    def rl_tasks(self, item_ids: Sequence[str], cold: dict[str, Attempts]) -> list[BenchmarkItem]:
        """The RL questions as tasks, each with the teacher's provenance (and a preference pair, when given)."""
        config = self.config
        preferences = read_preferences(config.preferences) if config.preferences else []
        tasks = []
        for item_id in item_ids:
            entry = self.items[item_id]
            provenance = self.teacher.provenance(STAGE, entry, temperature=config.probe_temperature, seed=config.seed)
            details = {"cold_start_attempts": len(cold[item_id].rows), "teacher_attempts": config.attempts}
            preference = pick_preference(preferences, config.seed, item_id)
            tasks.append(rl_task(entry, provenance, details, self.rl_decisions(), preference))
        return tasks

    def probes(self, item_ids: Sequence[str]) -> dict[str, list[float]]:
        return {item_id: [self.config.probe_temperature] * self.config.attempts for item_id in item_ids}


def split_cold(item_ids: list[str], cold: dict[str, Attempts], funnel: FunnelBuilder, k: int) -> list[str]:
    """The questions π0 failed (attempts lost to infrastructure aside)."""
    left: Counter[str] = Counter()
    failed = []
    for item_id in item_ids:
        if item_id not in cold:
            left["not attempted: USD cap reached"] += 1
        elif not usable(cold[item_id].rows):
            left["infrastructure: every π0 attempt failed"] += 1
        elif any(row.correct for row in usable(cold[item_id].rows)):
            left["solved by π0 (no learning signal)"] += 1
        else:
            failed.append(item_id)
    funnel.count(f"cold-start π0 pass@{k}", "questions", len(item_ids), left)
    return failed


def promote_solved(
    name: str, item_ids: list[str], found: dict[str, Attempts], funnel: FunnelBuilder, label: str, *, first: bool
) -> tuple[list[str], list[str]]:
    """``(promoted, still failing)``: a question with a passing attempt in ``found`` goes to D_SFT. In the first
    (teacher) phase a question never attempted, or whose attempts all failed for infrastructure, leaves; in later
    phases it stays in the RL pool."""
    left: Counter[str] = Counter()
    promoted, failing = [], []
    for item_id in item_ids:
        attempts = found.get(item_id)
        if attempts is not None and passing(attempts.rows):
            left[f"→ D_SFT: {label}"] += 1
            promoted.append(item_id)
        elif first and attempts is None:
            left["not attempted: USD cap reached"] += 1
        elif first and not usable(attempts.rows):  # type: ignore[union-attr]
            left["infrastructure: every teacher attempt failed"] += 1
        else:
            failing.append(item_id)
    funnel.count(name, "questions", len(item_ids), left)
    return promoted, failing


def _row_reason(row: DataRow) -> str | None:
    return (
        infrastructure_failure(row.trajectory)
        or format_failure(row.trajectory)
        or (None if row.correct else "wrong answer")
    )


def sft_rows(funnel: FunnelBuilder, chosen: dict[str, list[DataRow]], extra: dict[str, list[DataRow]]) -> list[DataRow]:
    """The SFT rows: per question the first passing attempt of ``chosen`` (primary or fallback) and every passing
    attempt of ``extra`` (augmentation)."""
    kept: list[DataRow] = []
    left: Counter[str] = Counter()
    entered = 0
    for item_id in sorted(set(chosen) | set(extra)):
        first_taken = False
        for row in chosen.get(item_id, []):
            entered += 1
            reason = _row_reason(row) or ("another trajectory of the question kept" if first_taken else None)
            first_taken = first_taken or reason is None
            left.update([reason] if reason else [])
            kept.extend([] if reason else [row])
        for row in extra.get(item_id, []):
            entered += 1
            reason = _row_reason(row)
            left.update([reason] if reason else [])
            kept.extend([] if reason else [row])
    funnel.count("SFT trajectories", "trajectories", entered, left)
    for row in kept:
        row.decisions.append(FilterDecision(stage=STAGE, filter="verifier gate", kept=True))
    return kept


def failed_rows(*phases: dict[str, Attempts]) -> list[DataRow]:
    """The teachers' wrong attempts whose infrastructure held."""
    return [row for phase in phases for unit in phase.values() for row in usable(unit.rows) if not row.correct]


async def curriculum(config: CurriculumConfig, *, progress: bool = True) -> Funnel:
    """Split (or resume splitting) the task pool of ``config`` into SFT and RL data in ``config.out``."""
    items = unique_ids(load_items(config))
    stage = open_stage(Path(config.out), STAGE, config, progress=progress)
    funnel = FunnelBuilder(STAGE)
    run = Curriculum(config, stage, items)
    ids = [entry.item.id for entry in items]
    k = config.attempts
    cold = await run.phase("cold-start", run.cold, "", ids, run.probes(ids))
    failed = split_cold(ids, cold, funnel, k)
    teacher = await run.phase("teacher", run.teacher, "primary", failed, run.probes(failed))
    sft_ids, rl_ids = promote_solved(f"teacher π* pass@{k}", failed, teacher, funnel, "teacher solved", first=True)
    temperatures = {**{i: config.rl_temperatures for i in rl_ids}, **{i: config.sft_temperatures for i in sft_ids}}
    wanted = [item_id for item_id in sft_ids + rl_ids if temperatures[item_id]]
    augmented = await run.phase("augmentation", run.teacher, "augmentation", wanted, temperatures)
    by_augmentation, rl_ids = promote_solved(
        "RL pool: augmentation", rl_ids, augmented, funnel, "passed at augmentation", first=False
    )
    fallbacks: list[dict[str, Attempts]] = []
    chosen = {item_id: teacher[item_id].rows for item_id in sft_ids}
    for index, solver in enumerate(run.fallback):
        found = await run.phase(f"fallback-{index}", solver, "fallback", rl_ids, run.probes(rl_ids))
        promoted, rl_ids = promote_solved(
            f"RL pool: fallback {solver.name}", rl_ids, found, funnel, f"passed by {solver.name}", first=False
        )
        chosen.update({item_id: found[item_id].rows for item_id in promoted})
        fallbacks.append(found)
    extra = {item_id: augmented[item_id].rows for item_id in [*sft_ids, *by_augmentation] if item_id in augmented}
    rows = sft_rows(funnel, chosen, extra)
    tasks = run.rl_tasks(rl_ids, cold)
    outputs = {
        "sft.jsonl": write_jsonl(stage.out / "sft.jsonl", rows),
        "rl.jsonl": write_jsonl(stage.out / "rl.jsonl", tasks),
        "failures.jsonl": write_jsonl(stage.out / "failures.jsonl", failed_rows(teacher, *fallbacks)),
    }
    return finish_stage(stage, funnel, outputs, ["sft.jsonl", "rl.jsonl"])
