"""Verifiers: the outcome b ∈ {0, 1} of an answer, one evaluator per kind of reward (SPEC §5.4).

- :class:`MathVerifier`: symbolic equivalence with ``math-verify`` (LaTeX or plain expressions, ``\\boxed{}``).
- :class:`QAVerifier`: exact match after SQuAD-style normalisation, with token F1 as the graded score.
- :class:`MultipleChoiceVerifier`: the chosen letter, extracted from free text, against the gold letter.
- :class:`~podium.evaluate.code_tests.CodeVerifier`: unit tests in the sandbox (HumanEval and MBPP formats).
- :class:`~podium.evaluate.judge.JudgeVerifier`: an LLM judge's yes/no against the gold.
- :class:`~podium.evaluate.environment.EnvironmentVerifier`: the three tau2 criteria for tool-use tasks.
"""

import re
import string
import threading
from collections import Counter
from collections.abc import Sequence

from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

from podium.evaluate.code_tests import AssertTests, CodeVerifier, HumanEvalTests
from podium.evaluate.environment import EnvironmentVerifier
from podium.evaluate.judge import JudgeVerifier, parse_judgement
from podium.evaluate.verdict import Verdict, Verifier

__all__ = [
    "AssertTests",
    "CodeVerifier",
    "EnvironmentVerifier",
    "HumanEvalTests",
    "JudgeVerifier",
    "MathVerifier",
    "MultipleChoiceVerifier",
    "QAVerifier",
    "Verdict",
    "Verifier",
    "exact_match",
    "extract_choice",
    "math_equivalent",
    "normalize_answer",
    "parse_judgement",
    "token_f1",
]

# ---------------------------------------------------------------------------------------------------- math

_MATH_TARGETS = (LatexExtractionConfig(), ExprExtractionConfig())
_MATH_DELIMITER = re.compile(r"(?<!\\)\$")
"""An unescaped dollar sign opens or closes inline LaTeX (``\\$`` is a currency sign inside it)."""
MATH_TIMEOUT_S = 5
"""Seconds math-verify may spend parsing or comparing one expression."""


def _math_timeout() -> int | None:
    # math-verify enforces its time limit with SIGALRM, which only the main thread may use; elsewhere it
    # would raise, so off the main thread the comparison runs without a limit.
    return MATH_TIMEOUT_S if threading.current_thread() is threading.main_thread() else None


def _parse_math(text: str, *, as_gold: bool) -> list:
    timeout = _math_timeout()
    # A bare gold such as "\frac{14}{3}" is LaTeX without delimiters; math-verify looks for delimited or boxed
    # LaTeX first, so wrap it. A model's answer is parsed as written (it may hold prose and a \boxed{}).
    delimited = _MATH_DELIMITER.search(text) is not None
    if as_gold and not delimited and "\\boxed" not in text:
        parsed = parse(f"${text}$", _MATH_TARGETS, parsing_timeout=timeout)
        if parsed:
            return parsed
    parsed = parse(text, _MATH_TARGETS, parsing_timeout=timeout)
    if not parsed and not delimited:
        parsed = parse(f"${text}$", _MATH_TARGETS, parsing_timeout=timeout)
    return parsed


def math_equivalent(answer: str, gold: str) -> bool:
    """Whether ``answer`` states a value mathematically equal to ``gold`` (math-verify's comparison)."""
    gold_parsed = _parse_math(gold, as_gold=True)
    answer_parsed = _parse_math(answer, as_gold=False)
    if not gold_parsed or not answer_parsed:
        return False
    return bool(verify(gold_parsed, answer_parsed, timeout_seconds=_math_timeout()))


class MathVerifier:
    """Symbolic equivalence of a final answer and the gold."""

    async def verify(self, answer: str, gold: str) -> Verdict:
        parsed = _parse_math(answer, as_gold=False)
        if not parsed:
            return Verdict.binary(False, reason="no mathematical expression found in the answer")
        extracted = str(parsed[-1])
        if math_equivalent(answer, gold):
            return Verdict.binary(True, extracted=extracted)
        return Verdict.binary(False, extracted=extracted, reason=f"{extracted!r} is not equivalent to {gold!r}")


# ------------------------------------------------------------------------------------------------------ QA

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = set(string.punctuation)
# HotpotQA scores these special answers all-or-nothing: a "yes" must not earn F1 credit against "no".
_SPECIAL_ANSWERS = {"yes", "no", "noanswer"}


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower case, punctuation and the articles a/an/the removed, whitespace collapsed."""
    lowered = "".join(char for char in text.lower() if char not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", lowered).split())


def exact_match(answer: str, gold: str) -> bool:
    """Equality after :func:`normalize_answer`."""
    return normalize_answer(answer) == normalize_answer(gold)


def token_f1(answer: str, gold: str) -> float:
    """Harmonic mean of token precision and recall after normalisation (0 when either side is empty)."""
    predicted, reference = normalize_answer(answer), normalize_answer(gold)
    if (predicted in _SPECIAL_ANSWERS or reference in _SPECIAL_ANSWERS) and predicted != reference:
        return 0.0
    predicted_tokens, reference_tokens = predicted.split(), reference.split()
    common = sum((Counter(predicted_tokens) & Counter(reference_tokens)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted_tokens), common / len(reference_tokens)
    return 2 * precision * recall / (precision + recall)


class QAVerifier:
    """Exact match against the gold (or any of its aliases); the score is the best token F1."""

    async def verify(self, answer: str, gold: str | Sequence[str]) -> Verdict:
        aliases = [gold] if isinstance(gold, str) else list(gold)
        if not aliases:
            raise ValueError("a QA gold needs at least one answer")
        matched = any(exact_match(answer, alias) for alias in aliases)
        score = 1.0 if matched else max(token_f1(answer, alias) for alias in aliases)
        reason = None if matched else f"no exact match (best token F1 {score:.3f})"
        return Verdict(correct=matched, score=score, extracted=normalize_answer(answer), reason=reason)


# ------------------------------------------------------------------------------------------ multiple choice

DEFAULT_LETTERS = "ABCDEFGHIJ"
"""MMLU-Pro has up to ten options."""


def _choice_patterns(letters: str) -> list[re.Pattern[str]]:
    choice = f"[{letters}]"
    # Letters stay case-sensitive even in case-insensitive patterns: "the answer is a bit…" names no option.
    # Strongest evidence first; within one pattern the last match wins (a model may revise its choice).
    return [
        re.compile(rf"\\boxed\{{\s*(?:\\text\{{\s*)?\(?({choice})\)?\s*\}}"),
        re.compile(rf"answer\s*(?:is|:)?\s*(?:option\s*)?[\s*:(\[]*(?-i:({choice}))\b", re.IGNORECASE),
        re.compile(rf"(?:option|choice)\s*\(?(?-i:({choice}))\)?(?![A-Za-z])", re.IGNORECASE),
        re.compile(rf"^\s*\(?({choice})\)?\s*(?:[.:)]|$)", re.MULTILINE),
        re.compile(rf"\(({choice})\)"),
    ]


def extract_choice(text: str, letters: str = DEFAULT_LETTERS) -> str | None:
    """The option letter ``text`` commits to, or None when it names none unambiguously."""
    stripped = text.strip().strip("*").strip()
    if len(stripped) == 1 and stripped.upper() in letters:
        return stripped.upper()
    for pattern in _choice_patterns(letters):
        found = pattern.findall(text)
        if found:
            return found[-1].upper()
    return None


class MultipleChoiceVerifier:
    """The letter the answer chooses against the gold letter."""

    def __init__(self, letters: str = DEFAULT_LETTERS) -> None:
        self.letters = letters

    async def verify(self, answer: str, gold: str) -> Verdict:
        gold_letter = gold.strip().upper()
        if len(gold_letter) != 1 or gold_letter not in self.letters:
            raise ValueError(f"gold {gold!r} is not one of the letters {self.letters}")
        chosen = extract_choice(answer, self.letters)
        if chosen is None:
            return Verdict.binary(False, reason="no option letter found in the answer")
        reason = None if chosen == gold_letter else f"chose {chosen}, gold is {gold_letter}"
        return Verdict.binary(chosen == gold_letter, extracted=chosen, reason=reason)
