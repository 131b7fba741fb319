"""What a verifier says about one answer."""

from typing import Any, Protocol, runtime_checkable

from pydantic import Field, field_validator

from podium.core.calls import MAX_STORED_REASON_CHARS, truncate
from podium.core.record import Record


class Verdict(Record):
    """A verifier's judgement: the outcome b ∈ {0, 1}, a graded score, and why."""

    correct: bool
    """Whether the answer matches the gold (b = 1)."""
    score: float = Field(ge=0.0, le=1.0)
    """Graded agreement where the metric has one (token F1); otherwise 1.0 or 0.0 as ``correct``."""
    extracted: str | None = None
    """What was actually compared after extraction (the parsed expression, the chosen letter…)."""
    reason: str | None = None
    """Why the answer was judged wrong (a failing test, the judge's verdict text…)."""
    error: str | None = None
    """Set when the verifier could not decide (judge backend failed, unreadable verdict). ``correct`` is then
    False, but callers should report such answers as unverified rather than count them as wrong."""
    grader: str | None = None
    """Which grader gave the verdict ("math-verify 0.9.0 + Podium rules", "LLM judge (gpt-4o)"…); reports name
    it beside the accuracy it yields. None on records written before graders were named."""

    @field_validator("extracted", "reason", "error")
    @classmethod
    def _excerpt(cls, text: str | None) -> str | None:
        """Kept to an excerpt, as a call's reason is: the answer itself is stored whole elsewhere in the record."""
        return None if text is None else truncate(text, MAX_STORED_REASON_CHARS)[0]

    @property
    def outcome(self) -> int:
        """b: 1 if correct else 0."""
        return int(self.correct)

    @classmethod
    def binary(cls, correct: bool, *, extracted: str | None = None, reason: str | None = None) -> "Verdict":
        """A pass/fail verdict whose score is 1 or 0."""
        return cls(correct=correct, score=1.0 if correct else 0.0, extracted=extracted, reason=reason)

    @classmethod
    def undecided(cls, error: str) -> "Verdict":
        """The verifier failed; never scored as correct."""
        return cls(correct=False, score=0.0, error=error)


@runtime_checkable
class Verifier(Protocol):
    """Checks an answer against a gold reference; never raises for a wrong or malformed answer."""

    name: str
    """How reports name the grader (what it checks and with which library or model)."""

    async def verify(self, answer: str, gold: Any, question: str | None = None) -> Verdict:
        """Judge ``answer`` against ``gold`` (whose type depends on the verifier); ``question`` is context that
        some verifiers use (the judge shows it, the math rules reject a restated question) and others ignore."""
        ...
