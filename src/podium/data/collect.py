"""``podium data collect``: ParaManager SFT data (SPEC §6.4). A teacher orchestrator attempts each question n
times in Podium's runtime; attempts are graded with Podium's verifiers; infrastructure failures (a worker's 5xx,
the teacher's backend down) and unrepaired format errors are dropped, wrong answers go to ``failures.jsonl`` (and
are kept too with ``keep_wrong``); at most one correct trajectory per question is kept, recoveries from PARSE_ERR /
EXEC_ERR / TIMEOUT first; finally no tool may take more than a set share of all calls. ``podium eval`` results can
stand in for the teacher's attempts, and so can served traffic (:mod:`podium.data.served`).

Outputs in ``--out``: ``sft.jsonl`` (data rows ``podium train sft`` reads), ``failures.jsonl`` (wrong attempts
for ``podium data classify-failures``), ``funnel.json``; the work log ``work/attempts.jsonl`` makes reruns resume.
"""

from collections import defaultdict
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, NonNegativeFloat, PositiveFloat, PositiveInt, model_validator

from podium.core.record import Record
from podium.data.common import StageSettings, finish_stage, open_stage
from podium.data.constraints import read_constraints
from podium.data.eval_input import rows_from_eval
from podium.data.funnel import FunnelBuilder
from podium.data.selection import balance_tools, per_question
from podium.data.served import ServedSelection, served_data, write_heldout
from podium.data.solver import Solver, data_row, grade
from podium.data.sources import ItemSource, SourcedItem, load_items, unique_ids
from podium.data.store import DataError
from podium.data.traces import format_failure, infrastructure_failure, recovered_from
from podium.graders.grader import Grader
from podium.runtime.explore import MAX_PATHS
from podium.solve.config import SystemConfig
from podium.solve.jsonl import JsonlLog, write_jsonl
from podium.solve.records import DataRow, FilterDecision, Funnel
from podium.solve.system import sample_seed

STAGE = "collect"


class CollectConfig(ItemSource, StageSettings):
    """Teacher trajectories for SFT (ParaManager)."""

    teacher: SystemConfig = Field(default_factory=SystemConfig)
    """The teacher orchestrator (any pool member or endpoint as orchestrator, under any policy)."""
    from_eval: list[str] = Field(default_factory=list)
    """``podium eval`` run directories or results files to select from instead of running the teacher."""
    from_served: str | None = None
    """A traffic directory (``podium serve --served DIR``) whose graded episodes to select from instead of running
    the teacher: SFT rows (the cheapest correct episode of each prompt), GRPO tasks (``tasks.jsonl``, one per
    prompt, with what traffic said of it) and the held-back slice (``heldout.jsonl`` and ``heldout-VERSION/``)."""
    served: ServedSelection = Field(default_factory=ServedSelection)
    """With ``from_served``: which episodes (versions, keys, roles, time window, outcome) and which are held back."""
    samples: PositiveInt | Literal["all"] = 8
    """Attempts per question (ParaManager: 8). ``all``: every path of the teacher's action tree once, for a policy
    whose every action is one of a few words (``escalate``) over workers that answer deterministically (replays):
    with ``prefer_cheap``, an oracle teacher that labels each question with its cheapest correct path."""
    temperature: NonNegativeFloat = 1.0
    """Sampling temperature of the teacher (above 0, or the attempts are alike); not used with ``samples: all``."""
    per_question: PositiveInt = 1
    """Correct trajectories kept per question (ParaManager: at most one)."""
    prefer_recovered: bool = True
    """Prefer trajectories that recovered from a PARSE_ERR, EXEC_ERR or TIMEOUT."""
    prefer_cheap: bool = False
    """Then prefer the trajectory that spent least turn by turn (compared at its first turn, then the next…): it
    tries the cheap worker before the dear one and escalates only when that fails."""
    keep_wrong: bool = False
    """Keep attempts whose answer is wrong as well (they still go to ``failures.jsonl``): for a teacher whose every
    decision is a label, such as a priced decision that accepts a cheap reply likely to be wrong where escalating
    would cost more than it gains; keeping only its right answers would leave out exactly those decisions.
    Infrastructure failures and format errors are dropped all the same."""
    max_tool_share: PositiveFloat = Field(0.5, le=1.0)
    """No tool may take more than this share of all calls in the kept set (1 disables the cap)."""
    constraints: str | None = None
    """Constraints file from ``podium data classify-failures``, added to the teacher's system prompt."""

    @model_validator(mode="after")
    def _sampling_used(self) -> "CollectConfig":
        if self.samples == "all" and "temperature" in self.model_fields_set:
            raise ValueError("temperature: not used with samples: all (every path is played once, nothing sampled)")
        if self.from_served is None and "served" in self.model_fields_set:
            raise ValueError("served: selects served traffic, which only from_served reads")
        return self

    @model_validator(mode="before")
    @classmethod
    def _cheapest_served(cls, data: Any) -> Any:
        """Served traffic keeps the cheapest correct episode of each prompt, unless the config says otherwise."""
        if isinstance(data, dict) and data.get("from_served") is not None:
            return {"prefer_cheap": True, "prefer_recovered": False, **data}
        return data


class ItemAttempts(Record):
    """The teacher's attempts at one question (one unit of work)."""

    item_id: str
    """The question."""
    rows: list[DataRow]
    """Its graded attempts."""


async def collect_item(solver: Solver, grader: Grader, entry: SourcedItem, config: CollectConfig) -> ItemAttempts:
    """One question: ``samples`` teacher attempts (or every path), each graded (the unit a distributed run would
    ship)."""
    if config.samples == "all":
        seed = sample_seed(config.seed, entry.item.id, 0)
        attempts = [(seed, trajectory) for trajectory in await solver.explore(entry, seed=seed)]
        temperature = 0.0
    else:
        temperature = config.temperature
        attempts = []
        for sample in range(config.samples):
            seed = sample_seed(config.seed, entry.item.id, sample)
            attempts.append((seed, await solver.attempt(entry, temperature=temperature, seed=seed)))
    rows = []
    for sample, (seed, trajectory) in enumerate(attempts):
        verdict = await grade(grader, entry, trajectory)
        provenance = solver.provenance(STAGE, entry, temperature=temperature, seed=seed)
        rows.append(data_row(f"{STAGE}:{entry.item.id}:{sample}", entry, sample, trajectory, verdict, provenance))
    return ItemAttempts(item_id=entry.item.id, rows=rows)


def _wrong(row: DataRow) -> str | None:
    if row.correct:
        return None
    return "no answer" if row.answer is None else "wrong answer"


def _decide(row: DataRow, name: str, kept: bool, reason: str = "") -> DataRow:
    row.decisions.append(FilterDecision(stage=STAGE, filter=name, kept=kept, reason=reason))
    return row


def select(rows: list[DataRow], config: CollectConfig, funnel: FunnelBuilder) -> tuple[list[DataRow], list[DataRow]]:
    """The kept SFT rows and the wrong attempts, every filter counted in ``funnel``."""
    usable = funnel.apply("infrastructure", "trajectories", rows, lambda row: infrastructure_failure(row.trajectory))
    formatted = funnel.apply("format errors", "trajectories", usable, lambda row: format_failure(row.trajectory))
    if config.keep_wrong:
        graded = formatted
        funnel.note(f"keep_wrong: {sum(not row.correct for row in formatted)} wrong attempt(s) kept as labels")
    else:
        graded = funnel.apply("verifier", "trajectories", formatted, _wrong)
    well_formed = {row.id for row in formatted}
    failures = [  # copies: with keep_wrong the same attempt is also kept, with its own decisions
        _decide(row.model_copy(deep=True), "verifier" if row.id in well_formed else "format errors", False,
                format_failure(row.trajectory) or _wrong(row) or "")
        for row in usable
        if not row.correct
    ]  # fmt: skip
    candidates: dict[str, list[DataRow]] = defaultdict(list)
    for row in graded:
        candidates[row.item_id].append(
            _decide(row, "verifier", True, "" if row.correct else "wrong, kept (keep_wrong)")
        )
    chosen, spare = per_question(candidates, config.per_question, config.prefer_recovered, config.prefer_cheap)
    funnel.count(
        f"at most {config.per_question} per question",
        "trajectories",
        len(graded),
        {"another trajectory of the question kept": sum(len(rows) for rows in spare.values())},
    )
    balance = balance_tools(chosen, spare, config.max_tool_share)
    left: dict[str, int] = defaultdict(int)
    for _, reason in balance.dropped:
        left[reason] += 1
    funnel.count("tool balance", "trajectories", sum(len(rows) for rows in chosen.values()), left)
    if balance.swaps:
        funnel.note(f"tool balance swapped {balance.swaps} trajectory(ies) for another correct one of the question")
    if balance.note:
        funnel.note(balance.note)
    kept = [row for rows in balance.chosen.values() for row in rows]
    for row in kept:
        recovered = recovered_from(row.trajectory)
        _decide(row, "per question", True, f"recovered from {', '.join(recovered)}" if recovered else "")
        _decide(row, "tool balance", True)
    return kept, failures


async def collect(config: CollectConfig, *, progress: bool = True) -> Funnel:
    """Run (or resume) collection into ``config.out``; returns the funnel (also saved as ``funnel.json``)."""
    out = Path(config.out)
    funnel = FunnelBuilder(STAGE)
    given = [name for name, on in [("--from-served", config.from_served), ("--from-eval", config.from_eval),
                                   ("a benchmark / tasks file", config.benchmark or config.tasks)] if on]  # fmt: skip
    if len(given) > 1:
        raise DataError(f"give one source of attempts: {' or '.join(given)}")
    served = None
    if config.from_served is not None:
        served = served_data(config.from_served, config.served, STAGE, funnel)
        rows = served.rows
        stage = open_stage(out, STAGE, config, progress=progress)
    elif config.from_eval:
        rows = [row for path in config.from_eval for row in rows_from_eval(path, STAGE)]
        stage = open_stage(out, STAGE, config, progress=progress)
    else:
        items = unique_ids(load_items(config))
        solver = Solver(config.teacher, constraints=read_constraints(config.constraints))
        solver.check(items)
        grader = Grader(data_dir=config.data_dir)
        stage = open_stage(out, STAGE, config, progress=progress)  # only once the inputs are known to be good
        log = JsonlLog(out / "work" / "attempts.jsonl", ItemAttempts, lambda unit: unit.item_id)
        stage.runner.charge(sum(row.trajectory.usage.usd for unit in log.values() for row in unit.rows))
        done = await stage.runner.run(
            "teacher attempts",
            items,
            lambda entry: entry.item.id,
            lambda entry: collect_item(solver, grader, entry, config),
            log,
            cost=lambda unit: sum(row.trajectory.usage.usd for row in unit.rows),
            bound=lambda _entry: (
                (config.teacher.max_episode_usd or 0.0) * (MAX_PATHS if config.samples == "all" else config.samples)
                or None
            ),
        )
        funnel.count("attempted", "questions", len(items), {"not attempted: USD cap reached": len(items) - len(done)})
        rows = [row for unit in done for row in unit.rows]
    kept, failures = select(rows, config, funnel)
    funnel.count(
        "questions with a kept trajectory",
        "questions",
        len({row.item_id for row in rows}),
        {"no trajectory kept": len({row.item_id for row in rows}) - len({row.item_id for row in kept})},
    )
    outputs = {
        "sft.jsonl": write_jsonl(out / "sft.jsonl", kept),
        "failures.jsonl": write_jsonl(out / "failures.jsonl", failures),
    }
    if served is None:
        return finish_stage(stage, funnel, outputs, ["sft.jsonl"])
    outputs["tasks.jsonl"] = write_jsonl(out / "tasks.jsonl", served.tasks)
    return finish_stage(stage, funnel, outputs | write_heldout(out, served), ["sft.jsonl", "tasks.jsonl"])
