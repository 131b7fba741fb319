"""``podium data classify-failures``: Uno's failure classifier (prompt F.4). Each failed trajectory gets one of
four root causes, an evidence span (checked to be a real slice of the trajectory) and a task-agnostic constraint
of at most 30 words (checked). Failures that need no LLM are classified by rule: unrepaired format errors and
answers in the wrong shape (format_mismatch), episodes that ran out of turns, tokens, money or time without an
answer (delegation_scope_error: the work was decomposed beyond the budget). Infrastructure failures are not the
orchestrator's and are left out.

Outputs in ``--out``: ``classifications.jsonl`` (one row per failure, ``category`` empty when the classifier's
replies never passed the checks, with the reason), ``constraints.json`` (the category histogram and one constraint
per category seen at least ``min_count`` times: pass it to ``collect`` or ``curriculum`` with ``--constraints`` to
add it to the orchestrator's prompt in the next round) and ``funnel.json``.
"""

import re
from collections import Counter
from pathlib import Path
from typing import Any

from pydantic import Field, NonNegativeFloat, PositiveInt

from podium.backends.base import ChatBackend
from podium.core.budget import StopReason
from podium.core.files import write_atomically
from podium.core.record import Record
from podium.data.common import LLMStageSettings, finish_stage, open_stage
from podium.data.constraints import Constraint, ConstraintSet
from podium.data.eval_input import read_rows
from podium.data.funnel import FunnelBuilder
from podium.data.llm import Prompt, StepModel, ask_json, load_prompt, request_bound
from podium.data.provenance import podium_version
from podium.data.traces import infrastructure_failure, render_trace
from podium.pool.config import PoolConfig
from podium.solve.jsonl import JsonlLog, write_jsonl
from podium.solve.records import DataRow, Funnel, Provenance

STAGE = "classify-failures"
CATEGORIES = ("information_loss", "premature_aggregation", "format_mismatch", "delegation_scope_error")
BUDGET_STOPS = (StopReason.MAX_TURNS, StopReason.MAX_TOKENS, StopReason.MAX_USD, StopReason.DEADLINE)
SHAPE_REASONS = re.compile(r"no mathematical expression|no option letter|no answer", re.IGNORECASE)
"""Verifier notes that say the answer could not be read in the expected shape."""
RULE_CONSTRAINTS = {
    "format_mismatch": "Write every action in the exact required format and give the final answer in the shape "
    "the task asks for, with nothing else around it.",
    "delegation_scope_error": "Decompose only as far as the task needs and give a final answer before the turn, "
    "token, cost or time budget runs out.",
}
"""The constraint a rule attaches to the failures it classifies."""


class ClassifyConfig(LLMStageSettings):
    """The failure classifier."""

    inputs: list[str] = Field(min_length=1)
    """Failed attempts: ``failures.jsonl`` of collect or curriculum, ``podium eval`` runs or results files."""
    pool: str | PoolConfig | None = None
    """Pool holding the classifier model; default: the embedded offline pool."""
    worker: str | None = None
    """The classifier model (a worker of the pool); default: the pool's first worker."""
    max_words: PositiveInt = 30
    """Longest constraint accepted, in words (Uno: 30)."""
    min_count: PositiveInt = 1
    """A category yields a constraint once it accounts for at least this many failures."""
    max_tokens: PositiveInt = 384
    """Completion budget of one classifier reply."""
    temperature: NonNegativeFloat = 0.0
    """Sampling temperature of the classifier."""
    max_trace_chars: PositiveInt = 12_000
    """The trajectory shown to the classifier is cut to this many characters (start and end kept)."""


class Classification(Record):
    """The root cause of one failed trajectory."""

    id: str
    """The failed row's id."""
    item_id: str
    """The item."""
    question: str
    """The task."""
    category: str | None
    """One of the four categories; ``None`` when no reply passed the checks."""
    evidence_span: str = ""
    """A slice of the trajectory that justifies the category."""
    constraint: str = ""
    """A task-agnostic instruction that would have prevented the failure."""
    by: str
    """``rule`` or ``llm``."""
    reason: str = ""
    """What the rule matched, or why the classifier's replies were rejected."""
    usd: NonNegativeFloat = 0.0
    """What classifying it cost."""
    provenance: Provenance
    """Who classified it and with which prompt."""


def normalized(text: str) -> str:
    return " ".join(text.split())


def evidence_problem(span: str, trace: str) -> str | None:
    """Why ``span`` is not usable evidence from ``trace`` (it must be a verbatim slice, whitespace aside)."""
    if len(span.strip()) < 3:
        return "the evidence span is empty or shorter than 3 characters"
    if span not in trace and normalized(span) not in normalized(trace):
        return "the evidence span is not a verbatim slice of the trajectory"
    return None


def constraint_problem(constraint: str, max_words: int) -> str | None:
    words = len(constraint.split())
    if words == 0:
        return "the constraint is empty"
    if words > max_words:
        return f"the constraint has {words} words, more than {max_words}"
    return None


def rule_category(row: DataRow) -> tuple[str, str, str] | None:
    """``(category, evidence, what matched)`` for failures a rule can classify."""
    trajectory = row.trajectory
    trace = render_trace(trajectory)
    errors = [turn.parse_error for turn in trajectory.turns if turn.parse_error]
    if trajectory.answer is None and (trajectory.stop_reason is StopReason.MAX_PARSE_ERRORS or errors):
        evidence = next((error for error in reversed(errors) if error in trace), trajectory.turns[-1].output)
        return "format_mismatch", evidence, "unrepaired format error"
    if trajectory.answer is None and trajectory.stop_reason in BUDGET_STOPS:
        return "delegation_scope_error", trajectory.stop_reason.value, f"stopped by {trajectory.stop_reason.value}"
    if trajectory.answer and SHAPE_REASONS.search(row.reason):
        return "format_mismatch", trajectory.answer, f"verifier: {row.reason}"
    return None


def _schema(max_chars: int) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "category": {"enum": list(CATEGORIES)},
            "evidence_span": {"type": "string", "maxLength": 400},
            "suggested_constraint": {"type": "string", "maxLength": max_chars},
        },
        "required": ["category", "evidence_span", "suggested_constraint"],
        "additionalProperties": False,
    }


class Classifier:
    """Classifies failures by rule, else with the classifier model under the F.4 prompt."""

    def __init__(self, config: ClassifyConfig, backend: ChatBackend | None = None) -> None:
        self.config = config
        self.model = StepModel.from_pool(config.pool, config.worker)
        if backend is not None:
            self.model = StepModel(backend, self.model.pool_hash, self.model.prices_hash)
        self.prompt: Prompt = load_prompt("failures/classify", config.prompts_dir)

    def provenance(self, row: DataRow, by: str) -> Provenance:
        return Provenance(
            stage=STAGE,
            source=row.benchmark,
            item_id=row.item_id,
            model=self.model.backend.model if by == "llm" else "rule",
            temperature=self.config.temperature if by == "llm" else None,
            pool_hash=self.model.pool_hash if by == "llm" else None,
            prices_hash=self.model.prices_hash if by == "llm" else None,
            podium_version=podium_version(),
            prompt=self.prompt.id if by == "llm" else None,
        )

    def by_rule(self, row: DataRow) -> Classification | None:
        found = rule_category(row)
        if found is None:
            return None
        category, evidence, matched = found
        return Classification(
            id=row.id,
            item_id=row.item_id,
            question=row.question,
            category=category,
            evidence_span=evidence,
            constraint=RULE_CONSTRAINTS[category],
            by="rule",
            reason=matched,
            provenance=self.provenance(row, "rule"),
        )

    def request(self, row: DataRow) -> str:
        return self.prompt.render(
            trajectory=render_trace(row.trajectory, self.config.max_trace_chars),
            gold=row.gold,
            verdict=row.reason or "wrong answer",
            max_words=self.config.max_words,
        )

    def bound(self, row: DataRow) -> float:
        return request_bound(self.model.backend, self.request(row), self.config.max_tokens, self.config.attempts)

    async def by_llm(self, row: DataRow) -> Classification:
        trace = render_trace(row.trajectory, self.config.max_trace_chars)

        def check(value: dict[str, Any]) -> str | None:
            return evidence_problem(value["evidence_span"], trace) or constraint_problem(
                value["suggested_constraint"], self.config.max_words
            )

        reply = await ask_json(
            self.model.backend,
            self.request(row),
            _schema(self.config.max_words * 12),
            check=check,
            max_tokens=self.config.max_tokens,
            temperature=self.config.temperature,
            attempts=self.config.attempts,
        )
        value = reply.value or {}
        return Classification(
            id=row.id,
            item_id=row.item_id,
            question=row.question,
            category=value.get("category"),
            evidence_span=value.get("evidence_span", ""),
            constraint=normalized(value.get("suggested_constraint", "")),
            by="llm",
            reason=reply.reason or "",
            usd=reply.usage.usd,
            provenance=self.provenance(row, "llm"),
        )


def constraint_set(classifications: list[Classification], min_count: int) -> ConstraintSet:
    """The histogram of categories and, for each frequent one, its most often suggested constraint."""
    classified = [entry for entry in classifications if entry.category]
    histogram = Counter(entry.category for entry in classified)
    constraints = []
    for category, count in histogram.most_common():
        if count < min_count:
            continue
        suggestions = Counter(entry.constraint for entry in classified if entry.category == category)
        text = max(suggestions, key=lambda suggestion: (suggestions[suggestion], -list(suggestions).index(suggestion)))
        constraints.append(Constraint(category=str(category), count=count, constraint=text))
    return ConstraintSet(histogram={str(key): value for key, value in histogram.items()}, constraints=constraints)


def _failure_reason(row: DataRow) -> str | None:
    if row.correct:
        return "correct (not a failure)"
    return infrastructure_failure(row.trajectory)


async def classify_failures(
    config: ClassifyConfig, *, progress: bool = True, backend: ChatBackend | None = None
) -> Funnel:
    """Classify (or resume classifying) the failures of ``config.inputs`` into ``config.out``; ``backend`` replaces
    the pool's classifier model (any :class:`ChatBackend`)."""
    out = Path(config.out)
    rows = [row for path in config.inputs for row in read_rows(path, STAGE)]
    classifier = Classifier(config, backend)
    stage = open_stage(out, STAGE, config, progress=progress)  # only once the inputs are known to be good
    funnel = FunnelBuilder(STAGE)
    failures = funnel.apply("failures", "trajectories", rows, _failure_reason)
    ruled = {row.id: classifier.by_rule(row) for row in failures}
    funnel.count(
        "rule-based pre-classifier",
        "trajectories",
        len(failures),
        Counter(f"by rule: {entry.category}" for entry in ruled.values() if entry is not None),
    )
    pending = [row for row in failures if ruled[row.id] is None]
    log = JsonlLog(out / "work" / "classifications.jsonl", Classification, lambda entry: entry.id)
    stage.runner.charge(sum(entry.usd for entry in log.values()))
    done = await stage.runner.run(
        "classifying failures",
        pending,
        lambda row: row.id,
        classifier.by_llm,
        log,
        cost=lambda entry: entry.usd,
        bound=lambda row: classifier.bound(row) or None,
    )
    funnel.count(
        "LLM classifier (checked)",
        "trajectories",
        len(pending),
        Counter(f"unclassified: {entry.reason.split(':')[0]}" for entry in done if not entry.category)
        + Counter({"not classified: USD cap reached": len(pending) - len(done)}),
    )
    results = [entry for entry in ruled.values() if entry is not None] + done
    constraints = constraint_set(results, config.min_count)
    seen = len(constraints.histogram)
    funnel.count(
        "constraints",
        "categories",
        seen,
        {f"seen fewer than {config.min_count} times": seen - len(constraints.constraints)},
    )
    write_atomically(out / "constraints.json", constraints.model_dump_json(indent=2) + "\n")
    outputs = {"classifications.jsonl": write_jsonl(out / "classifications.jsonl", results)}
    outputs["constraints.json"] = len(constraints.constraints)
    return finish_stage(stage, funnel, outputs, ["classifications.jsonl"])
