"""What a worker's reply shows about its own errors, as numbers a cascade's logistic regression reads.

``reply_checks`` work for every answer kind: whether the reply states an answer in the format the task asks for (the
answer its verifier would extract), its length, and hedging ("not sure", "probably", "assuming"…); then what the kind
adds — for maths the calculations whose stated result is wrong, for multiple choice how many different options the
reply names, for code whether the code parses. ``verify_checks`` are what a pool's verify tool reports on a reply
(``check_arithmetic`` for maths: the report the trained orchestrator reads), for the cascade that sees the same
evidence as the orchestrator; kinds without such a tool have none.
"""

import ast
import math
import re
import warnings

from podium.core.answers import VerifierKind, extract_choice, extract_code
from podium.pool.builtin.arithmetic import check_text

MAX_CHARS = 20_000
"""Characters of a reply that are checked (a hostile reply costs microseconds)."""
_HEDGES = re.compile(
    r"\b(not sure|unsure|uncertain|i think|i believe|probably|possibly|perhaps|might be|may be|likely|guess|"
    r"assum\w*|approximately|roughly|unclear|cannot|can't|not enough|however)\b",
    re.IGNORECASE,
)
_STATED = re.compile(r"\banswer\s*\**\s*(?:is\b|[:：])|\\boxed\{", re.IGNORECASE)
_OPTION = re.compile(r"\b(?:answer|option|choice)\s*(?:is|:)?\s*\(?([A-J])\)?\b", re.IGNORECASE)


def reply_checks(reply: str, kind: VerifierKind) -> list[float]:
    """The reply's checks for a task of ``kind`` (see the module notes); the same length for every reply of a kind.
    Surrounding whitespace is not part of a reply (the orchestrator's observation shows it stripped)."""
    text = reply.strip()[:MAX_CHARS]
    hedges = len(set(match.lower() for match in _HEDGES.findall(text)))
    common = [math.log1p(len(text)) / 8.0, float(min(hedges, 3))]
    if kind == "math":
        report = check_text(text)
        return [float(report.final_stated), *common, float(min(len(report.wrong), 3))]
    if kind == "multiple_choice":
        return [float(extract_choice(text) is not None), *common, float(min(len(set(_OPTION.findall(text))), 3))]
    if kind == "code":
        code = extract_code(text)
        return [float(bool(code.strip()) and "```" in text), *common, float(_parses(code))]
    return [float(bool(_STATED.search(text))), *common]


def verify_checks(reply: str, kind: VerifierKind) -> list[float] | None:
    """What the verify tool of ``kind`` reports on the reply, as numbers (None: the kind has no such tool)."""
    if kind != "math":
        return None
    return check_text(reply.strip()[:MAX_CHARS]).features()


def _parses(code: str) -> bool:
    """Whether ``code`` is syntactically valid Python (never run)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a reply's invalid escape sequences are its business
            ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return bool(code.strip())
