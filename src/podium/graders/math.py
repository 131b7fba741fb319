"""Math grader: symbolic equivalence of a final answer and the gold with ``math-verify``."""

import re
import threading

from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

from podium.graders.verdict import Verdict

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
