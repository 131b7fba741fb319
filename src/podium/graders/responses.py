"""Grading a file of responses (``podium grade``): each JSONL row is a ``response`` and either the ``id`` of a
benchmark item or a ``gold`` to grade against directly, with an optional ``question``.

Rows go through the same :class:`Grader` as evaluation and training. A row that cannot be graded (not JSON, no
response, an unknown id, a gold the grader cannot use) becomes a result with an ``error``, in its place.
"""

import asyncio
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, NonNegativeInt, PositiveInt

from podium.config import Config
from podium.core.answers import VerifierKind
from podium.core.record import Record
from podium.datasets.items import AssertTests, BenchmarkItem, HumanEvalTests
from podium.errors import PodiumError
from podium.graders.grader import Grader
from podium.graders.verdict import Verdict

GradeKind = Literal["math", "mc", "em", "f1", "code", "judge"]
"""What ``--kind`` names: the grader of rows that carry their own gold."""
KIND_VERIFIERS: dict[GradeKind, VerifierKind] = {
    "math": "math",
    "mc": "multiple_choice",
    "em": "qa",
    "f1": "qa",
    "code": "code",
    "judge": "qa",
}
"""The item kind a row with a gold becomes (``f1`` and ``judge`` are QA items graded by an overriding verifier)."""


class GradeConfig(Config):
    """What ``podium grade`` grades: a responses file against a benchmark's items or the rows' own golds."""

    responses: str
    """JSONL file: response, and id or gold per row."""
    benchmark: str | None = None
    """Benchmark whose items the rows' ids name (math500, gsm8k…)."""
    kind: GradeKind | None = None
    """Grader of rows with a gold: math, mc, em, f1, code, or judge (also for ids)."""
    judge_model: str | None = None
    """With kind judge: the pool worker that judges."""
    pool: str | None = None
    """Pool YAML of the judge (default: the embedded offline pool)."""
    f1_threshold: float = Field(default=0.5, ge=0.0, le=1.0)
    """With kind f1: the F1 that counts as correct."""
    data_dir: str | None = None
    """Benchmark data (default: $PODIUM_DATA, else ../shared/data)."""
    sandbox_config: str | None = None
    """YAML/JSON file of sandbox limits (SandboxConfig) for code rows."""
    allow_unisolated: bool = False
    """Run code without isolation if bubblewrap is unavailable (unsafe)."""
    concurrency: PositiveInt = 8
    """Rows graded at once."""
    quiet: bool = False
    """No progress bar."""


class RowError(PodiumError):
    """A row cannot be graded; the message says why."""


class GradedRow(Record):
    """The outcome for one input row, in the shape ``podium grade --json`` prints."""

    line: PositiveInt
    """Line number in the responses file (1-based)."""
    id: str | None = None
    """The row's id, when it gave one."""
    correct: bool
    """Whether the response is right (False for a row that could not be graded)."""
    score: float
    """The grader's graded score (token F1 for QA), 1.0 or 0.0 otherwise."""
    extracted: str | None
    """What the grader compared (the parsed final answer, the chosen letter…)."""
    reason: str | None
    """Why the response is wrong, or why the row could not be graded."""
    grader: str | None
    """Which grader judged it."""
    error: str | None = None
    """Set when the row was not graded (malformed row, unknown id, judge failure): ``correct`` then means nothing."""

    @classmethod
    def failed(cls, line: int, row_id: str | None, error: str) -> "GradedRow":
        return cls(
            line=line, id=row_id, correct=False, score=0.0, extracted=None, reason=error, grader=None, error=error
        )

    @classmethod
    def from_verdict(cls, line: int, row_id: str | None, verdict: Verdict) -> "GradedRow":
        return cls(
            line=line,
            id=row_id,
            correct=verdict.correct,
            score=verdict.score,
            extracted=verdict.extracted,
            reason=verdict.reason or verdict.error,
            grader=verdict.grader,
            error=verdict.error,
        )


class GradeSummary(Record):
    """Totals of a graded file."""

    rows: NonNegativeInt
    correct: NonNegativeInt
    wrong: NonNegativeInt
    failed: NonNegativeInt
    """Rows not graded (malformed, unknown id, undecided)."""

    @property
    def accuracy(self) -> float:
        graded = self.correct + self.wrong
        return self.correct / graded if graded else 0.0


def summarise(results: Sequence[GradedRow]) -> GradeSummary:
    failed = sum(result.error is not None for result in results)
    correct = sum(result.correct for result in results if result.error is None)
    return GradeSummary(rows=len(results), correct=correct, wrong=len(results) - failed - correct, failed=failed)


def item_index(items: Sequence[BenchmarkItem]) -> dict[str, BenchmarkItem]:
    """Items by the ids a row may use: the loader's id (``math500-test/algebra/1.json``, ``gsm8k-0``,
    ``HumanEval/0``) or what follows its prefix (``test/algebra/1.json``, ``0``), which is the item's own id field
    or, where the data has none, its 0-based line number. A short form two items share is not used."""
    index = {item.id: item for item in items}
    short: dict[str, list[BenchmarkItem]] = {}
    for item in items:
        if "-" in item.id:
            short.setdefault(item.id.split("-", 1)[1], []).append(item)
    for key, named in short.items():
        if len(named) == 1:
            index.setdefault(key, named[0])
    return index


def _gold(value: Any, kind: GradeKind) -> str | list[str] | HumanEvalTests | AssertTests:
    if kind == "code":
        if isinstance(value, dict):
            return HumanEvalTests.model_validate(value) if "entry_point" in value else AssertTests.model_validate(value)
        if isinstance(value, list) and all(isinstance(test, str) for test in value):
            return AssertTests(test_list=value)
        raise RowError("a code gold is {prompt, test, entry_point}, {test_list, test_setup_code} or a list of asserts")
    if isinstance(value, float) and value.is_integer():
        return str(int(value))  # 27.0 is the answer 27
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return str(value)
    if kind in ("em", "f1", "judge") and isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return value
    raise RowError(f"gold must be a string or number{' (or a list of aliases)' if kind != 'math' else ''}")


def row_item(row: Any, kind: GradeKind | None, items: dict[str, BenchmarkItem] | None) -> BenchmarkItem:
    """The item a parsed row is graded as."""
    if not isinstance(row, dict):
        raise RowError("a row must be a JSON object")
    row_id = None if row.get("id") is None else str(row["id"])
    question = row.get("question")
    if "gold" in row:
        if kind is None:
            raise RowError("the row gives a gold but no --kind says how to grade it")
        gold = _gold(row["gold"], kind)
        return BenchmarkItem(id=row_id or "", question=str(question or ""), gold=gold, verifier=KIND_VERIFIERS[kind])
    if row_id is None:
        raise RowError("the row needs an 'id' (an item of --benchmark) or a 'gold'")
    if items is None:
        raise RowError("the row names an id but no --benchmark was given to look it up in")
    if row_id not in items:
        raise RowError(f"no item with id {row_id!r} in the benchmark")
    return items[row_id]


def _response(row: Any) -> str | None:
    if not isinstance(row, dict) or "response" not in row:
        raise RowError("the row has no 'response'")
    response = row["response"]
    if response is not None and not isinstance(response, str):
        raise RowError("'response' must be a string (or null for no answer)")
    return response


async def grade_row(
    grader: Grader, line: int, text: str, kind: GradeKind | None, items: dict[str, BenchmarkItem] | None
) -> GradedRow:
    """One line of the file, graded (or the reason it could not be)."""
    row_id = None
    try:
        row = json.loads(text)
        row_id = None if not isinstance(row, dict) or row.get("id") is None else str(row["id"])
        response, item = _response(row), row_item(row, kind, items)
        return GradedRow.from_verdict(line, row_id, await grader.grade_answer(item, response))
    except json.JSONDecodeError as error:
        return GradedRow.failed(line, None, f"malformed row: not JSON ({error.msg})")
    except (RowError, ValueError) as error:  # ValueError: a gold the verifier rejects (an MC gold "Z")
        return GradedRow.failed(line, row_id, f"malformed row: {error}")


def read_lines(path: Path) -> list[tuple[int, str]]:
    """The non-blank lines of a JSONL file with their 1-based numbers."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [(number, line) for number, line in enumerate(lines, 1) if line.strip()]


async def grade_lines(
    grader: Grader,
    lines: Sequence[tuple[int, str]],
    *,
    kind: GradeKind | None = None,
    items: dict[str, BenchmarkItem] | None = None,
    concurrency: int = 8,
    on_done: Callable[[GradedRow], None] | None = None,
) -> list[GradedRow]:
    """Every line graded, ``concurrency`` at a time (code runs and judge calls wait on I/O), in input order."""
    gate = asyncio.Semaphore(concurrency)

    async def one(line: int, text: str) -> GradedRow:
        async with gate:
            result = await grade_row(grader, line, text, kind, items)
        if on_done is not None:
            on_done(result)
        return result

    return list(await asyncio.gather(*(one(line, text) for line, text in lines)))
