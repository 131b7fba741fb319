"""Math grader: math-verify's parsing and comparison, with Podium's rules on top.

An answer is graded in four steps:

1. **The final answer.** A restated question is dropped from the reply, then :func:`extract_answer` picks the
   final answer: the final ``\\boxed{}``, a stated answer ("The answer is …"), or the final line.
2. **Parsing** with math-verify. Delimited or boxed LaTeX goes through math-verify's own extraction (its LaTeX and
   expression patterns, its normalisation of units, ``\\text{}``, percent, degrees). A bare formula (``x^2-1``,
   ``\\frac{14}{3}``, ``(3,4]``), or one ending a sentence ("… telescopes to p - q."), is parsed whole as LaTeX,
   so no fragment of it stands for the answer; other sentences go through math-verify's extraction. An answer
   in words only ("Evelyn") is compared as ``\\text{}``. The gold is always a bare formula.
3. **Podium's rules** (:mod:`podium.graders.math_rules`): an answer offering several candidates for a
   single-valued gold, one restating the question's own expression, and one left as an unevaluated expression
   when the gold is a number are wrong.
4. **Comparison** with math-verify's ``verify`` (numbers, fractions and decimals, symbolic equality, sets in any
   order, tuples, intervals, matrices, equations).

math-verify limits the time of parsing and comparison with SIGALRM, which only the main thread may use, so the
limit applies when grading runs on the main thread (the event loop of ``podium eval``, ``podium grade`` and
training) and is off elsewhere. Its warnings ("Timeout during parsing: …") quote the text it was given: they are
kept to a printable excerpt (:class:`~podium.core.printable.ExcerptFilter`).
"""

import logging
import re
import threading
from functools import lru_cache
from importlib.metadata import version

from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

from podium.core.answers import extract_answer, formula_tail, is_prose
from podium.core.printable import ExcerptFilter
from podium.graders.math_rules import (
    Parsed,
    distinct_candidates,
    first_value,
    is_list,
    is_numeral,
    normalise_numbers,
    restates_question,
    without_question,
)
from podium.graders.verdict import Verdict

MATH_GRADER = f"math-verify {version('math-verify')} + Podium rules"
"""How reports name this grader."""
MATH_TIMEOUT_S = 5
"""Seconds math-verify may spend parsing or comparing one expression."""
_TARGETS = (LatexExtractionConfig(), ExprExtractionConfig())
_LATEX_ONLY = (LatexExtractionConfig(),)
_DELIMITED = re.compile(r"(?<!\\)\$|\\\(|\\\[|\\boxed|\\fbox")
"""Inline or display LaTeX, or a box: math-verify's extraction finds the answer in such text."""
for _module in ("parser", "grader", "metric"):
    logging.getLogger(f"math_verify.{_module}").addFilter(ExcerptFilter())


def _math_timeout() -> int | None:
    # Off the main thread SIGALRM cannot be used and math-verify would raise; there the work runs without a limit.
    return MATH_TIMEOUT_S if threading.current_thread() is threading.main_thread() else None


def parse_formula(text: str) -> Parsed:
    """``text`` parsed whole as LaTeX (boxed, so math-verify's normalisation of a box applies); [] if it fails."""
    parsed = parse(f"\\boxed{{{normalise_numbers(text)}}}", _LATEX_ONLY, parsing_timeout=_math_timeout())
    return parsed if first_value(parsed) is not None else []


def parse_math(span: str) -> Parsed:
    """The number or formula a final answer states, as math-verify values (a sympy value first, then its text);
    [] when it states none."""
    if _DELIMITED.search(span):
        return parse(span, _TARGETS, parsing_timeout=_math_timeout())
    formula = formula_tail(span) if is_prose(span) else span
    parsed = parse_formula(formula) if formula else []
    return parsed or parse(span, _TARGETS, parsing_timeout=_math_timeout())


@lru_cache(maxsize=4096)
def parse_gold(gold: str) -> Parsed:
    """The gold (a bare formula or number) as math-verify values; cached, a benchmark repeats its golds."""
    return tuple(parse_formula(gold) or parse(gold, _TARGETS, parsing_timeout=_math_timeout()))


def _equal(gold: Parsed, answer: Parsed) -> bool:
    return bool(verify(list(gold), list(answer), timeout_seconds=_math_timeout()))


def _same(first: object, second: object) -> bool:
    """Whether two parsed values are one value written two ways (``1/2`` and ``0.5``)."""
    return bool(verify(first, second, timeout_seconds=_math_timeout()))


def _one_value(parsed: Parsed) -> Parsed:
    """A list whose members are one value written several ways (``4, 4.0``) as that value; others unchanged."""
    value = first_value(parsed)
    if value is None or not getattr(value, "is_FiniteSet", False) or len(value.args) < 2:
        return parsed
    first, *others = value.args
    return [first, *parsed[1:]] if all(_same(first, other) for other in others) else parsed


def _extracted(span: str, parsed: Parsed) -> str:
    return str(parsed[-1]) if parsed and isinstance(parsed[-1], str) else span


def grade_math(answer: str, gold: str, question: str | None = None) -> Verdict:
    """The verdict on ``answer`` (a whole reply or its final answer) against ``gold``."""
    reply = without_question(answer, question)
    span = extract_answer(reply, "math") if reply.strip() else None
    if span is None:
        return Verdict.binary(False, reason="the reply only restates the question" if answer.strip() else "empty")
    parsed = parse_math(span)
    # An answer in words only ("Evelyn", "east") is compared as text, as golds write \text{Evelyn}; the rules
    # about numbers and expressions do not apply to it.
    words = [] if parsed else parse_formula(f"\\text{{{span}}}")
    if not parsed and not words:
        return Verdict.binary(False, extracted=span, reason="no mathematical expression found in the answer")
    extracted = _extracted(span, parsed or words)
    parsed = _one_value(parsed)
    gold_parsed = parse_gold(gold)
    reason = _rule_broken(span, extracted, parsed, gold, gold_parsed, question) if parsed else None
    if reason is not None:
        return Verdict.binary(False, extracted=extracted, reason=reason)
    if _equal(gold_parsed, parsed or words):
        return Verdict.binary(True, extracted=extracted)
    return Verdict.binary(False, extracted=extracted, reason=f"'{extracted}' is not equivalent to '{gold}'")


def _rule_broken(
    span: str, extracted: str, parsed: Parsed, gold: str, gold_parsed: Parsed, question: str | None
) -> str | None:
    """Why Podium's rules reject the answer before any comparison, or None. ``extracted`` is the part of the
    final answer ``span`` that math-verify read."""
    offered = [] if is_list(gold_parsed) else distinct_candidates(span, parsed, parse_math, _same)
    if len(offered) > 1:
        return f"offers several candidate answers ({', '.join(offered)}) where one is asked for"
    if question and restates_question(extracted, parsed, gold, question):
        return f"'{extracted}' restates the question's own expression"
    gold_value, value = first_value(gold_parsed), first_value(parsed)
    if gold_value is not None and is_numeral(gold_value, gold) and not is_numeral(value, extracted):
        return f"'{extracted}' is an unevaluated expression; the gold is a number, the answer must be computed"
    return None


def math_equivalent(answer: str, gold: str, question: str | None = None) -> bool:
    """Whether ``answer`` states a value equal to ``gold`` under math-verify and Podium's rules."""
    return grade_math(answer, gold, question).correct


class MathVerifier:
    """Symbolic equivalence of a final answer and the gold (math-verify), under Podium's rules."""

    name = MATH_GRADER

    async def verify(self, answer: str, gold: str, question: str | None = None) -> Verdict:
        return grade_math(answer, gold, question)
