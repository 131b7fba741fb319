"""Podium's rules on top of math-verify: what an answer must be beyond equal to the gold.

- **Several candidates.** When the gold is one value, an answer offering several ("either 3 or 5",
  ``\\boxed{3} or \\boxed{5}``) is wrong, even if one of them is right; one value written twice ("1/2 or
  equivalently 0.5", "4 or 4.0") is one candidate. A gold that is itself a list (``1,-2``, ``1 \\pm \\sqrt{19}``)
  accepts its values in any order, joined by commas, "and" or "or".
- **Restated question.** An answer whose final expression is the question's own (``\\sqrt{242}`` for "Simplify
  $\\sqrt{242}$") is wrong unless it is the gold as written; math-verify would simplify it and call it equal.
- **Unevaluated expression.** When the gold is a number, the answer must be a number too: an integer, a decimal, a
  fraction, a percentage or scientific notation, possibly with units, not ``9994 * 585 - 9526`` or ``2^{10}``.
"""

import re
from collections.abc import Callable, Sequence
from typing import Any

from sympy import Basic, Integer, MatrixBase, Mul, Number, Pow, Rational, Symbol, UnevaluatedExpr
from sympy.core.relational import Relational

from podium.core.answers import vote_key

Parsed = Sequence[Any]
"""What math-verify's ``parse`` returns: a sympy value first when parsing succeeded, then the text it read."""

_THOUSANDS = re.compile(r"(?<![\d.,(\[{])\d{1,3}(?:,(?:\\![ ]?)?\d{3})+(?![\d,)\]}])")
"""A number with thousands separators (``58,500``, ``10,\\!080``); not a pair or list (``(12,102)``, ``1,234,``)."""
_CHOICE_WORD = re.compile(r"\b(?:either|or)\b", re.IGNORECASE)
_EAGER_COMMANDS = re.compile(r"\\[dt]?binom|\\choose")
"""Operations the LaTeX parser evaluates as it reads them, so that only the text shows them unevaluated."""
_NUMERIC_FRACTION = re.compile(r"\d\s*/\s*-?\d|\\[dt]?frac\s*\{?\s*-?\d")
"""A fraction of numbers as written (``460/2``, ``\\frac{460}{2}``); the parser turns one whose value is a whole
number into that number."""
_OPERATION = re.compile(r"[-+*/^!|]|\\(?:[dt]?frac|sqrt|[dt]?binom|choose|cdot|times|div|log|ln|sin|cos|tan)")
_PERCENT = UnevaluatedExpr(Rational(1, 100))


def normalise_numbers(text: str) -> str:
    """Numbers written with thousands separators (``60,000 * 2``, ``10,\\!080``) without them; the LaTeX parser
    would read the comma as a list."""
    return _THOUSANDS.sub(lambda match: re.sub(r"\D", "", match.group()), text)


def first_value(parsed: Parsed) -> Any:
    """The sympy value of a parse, or None when math-verify read only text."""
    return next((value for value in parsed if isinstance(value, (Basic, MatrixBase))), None)


def is_list(parsed: Parsed) -> bool:
    """Whether a gold is several values (a set), so that an answer may list them."""
    value = first_value(parsed)
    return value is not None and getattr(value, "is_FiniteSet", False) and len(value.args) > 1


def distinct_candidates(
    span: str, parsed: Parsed, parse_answer: Callable[[str], Parsed], same: Callable[[Any, Any], bool]
) -> list[str]:
    """The different values an answer offers: the members of a parsed list, or, in a sentence that says "or",
    the value on each side of it; values ``same`` finds equal count once ("1/2, or equivalently 0.5", "4 or
    4.0" commit to one value). One value (or none) means the answer commits."""
    value = first_value(parsed)
    if value is not None and getattr(value, "is_FiniteSet", False):
        values = list(value.args)
    elif _CHOICE_WORD.search(span):
        values = [first_value(found) for part in _CHOICE_WORD.split(span) if (found := parse_answer(part))]
    else:
        return []
    distinct: list[Any] = []
    for candidate in values:
        if candidate is not None and not any(same(candidate, kept) for kept in distinct):
            distinct.append(candidate)
    return sorted(str(candidate) for candidate in distinct)


def restates_question(span: str, parsed: Parsed, gold: str, question: str) -> bool:
    """Whether the answer is an expression copied from the question (and not the gold as written)."""
    if is_numeral(first_value(parsed), span) or not _OPERATION.search(span):
        return False
    key = vote_key(span, "math")
    return len(key) > 2 and key != vote_key(gold, "math") and key in vote_key(question, "math")


def is_numeral(value: Any, text: str) -> bool:
    """Whether ``value`` (parsed from ``text``) is a number as written: an integer, decimal, fraction, percentage
    or scientific notation, possibly the right side of ``x = …``; not an operation left to do."""
    if isinstance(value, Relational):  # x = 5, or 9994 * 585 - 9526 = 5837864: the right side is the answer
        value, text = value.rhs, re.split(r"=|\\approx", text)[-1]
    if value is None or _EAGER_COMMANDS.search(text):
        return False
    if isinstance(value, Integer) and _NUMERIC_FRACTION.search(text):  # 460/2 is a division left to do
        return False
    return _is_number_literal(value)


def _is_number_literal(value: Any) -> bool:
    if isinstance(value, Number):
        return True
    if isinstance(value, Symbol):  # \text{18}
        return re.fullmatch(r"-?\d+(?:\.\d+)?", value.name) is not None
    if not isinstance(value, Mul) or len(value.args) != 2:
        return False
    first, second = value.args
    if second == _PERCENT or first == Integer(-1):
        return _is_number_literal(first if second == _PERCENT else second)
    if isinstance(first, Number) and isinstance(second, Pow) and isinstance(second.base, Integer):
        ten_to_power = second.base == 10 and isinstance(second.exp, Integer)  # 1.5 \times 10^{3}
        reciprocal = second.exp == -1  # a/b as written in plain text
        return ten_to_power or reciprocal
    return False


def without_question(reply: str, question: str | None) -> str:
    """The reply with verbatim copies of the question taken out (whitespace aside): what the reply adds to it.

    A reply made of the question alone becomes empty, and is then graded as giving no answer."""
    words = question.split() if question else []
    if not words:
        return reply
    return re.sub(r"\s+".join(re.escape(word) for word in words), "\n", reply).strip()
