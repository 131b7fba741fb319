"""Benchmark items: a question, its gold reference and the verifier that judges answers to it."""

from typing import Any

from pydantic import Field

from podium.core.answers import VerifierKind
from podium.core.record import Record


class HumanEvalTests(Record):
    """A HumanEval problem's test harness."""

    prompt: str
    """The function signature and docstring the completion continues (imports and helpers included)."""
    test: str
    """Source defining ``check(candidate)``."""
    entry_point: str
    """Name of the function under test."""


class AssertTests(Record):
    """MBPP-style tests: assert statements run after the candidate code."""

    test_list: list[str]
    """One ``assert`` statement per item."""
    test_setup_code: str = ""
    """Code the tests need (imports, fixtures); it runs after the candidate because MBPP's fixtures may use
    the candidate's classes (task 367 builds trees of the solution's ``Node``)."""


class BenchmarkItem(Record):
    """One evaluation item."""

    id: str
    """Unique within the benchmark; results are keyed by it."""
    question: str
    """The task as the system sees it (answer-format instructions are the system's business)."""
    gold: str | list[str] | HumanEvalTests | AssertTests
    """Reference: an answer, QA aliases, a code test harness, or (tool use) the environment task id."""
    verifier: VerifierKind
    """Which verifier judges the answer."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    """Provenance and extras (subject, level, HotpotQA context, tau2 domain and split…)."""
