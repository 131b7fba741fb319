"""Turning a model's reply into a final answer, and answers into keys that can be voted on."""

import re

from podium.core.answers import last_boxed
from podium.evaluate.benchmarks import VerifierKind
from podium.evaluate.code_tests import extract_code
from podium.evaluate.verifiers import extract_choice, normalize_answer

ANSWER_INSTRUCTIONS: dict[VerifierKind, str] = {
    "math": "Solve the problem. Reason step by step, then give only the final answer inside \\boxed{}.",
    "multiple_choice": "Answer the multiple-choice question. Reason briefly, then end with 'Answer: X' where X is "
    "the letter of the correct option.",
    "qa": "Answer the question. Reason briefly if needed, then end with a line 'Answer: ' followed by a short answer "
    "(a name, number, date or phrase).",
    "code": "Write a correct Python solution. Reply with one complete ```python code block.",
    "environment": "Help the user while following the policy.",
}
"""The answer format each kind of verifier expects, told to the model as its system prompt."""

_ANSWER_LINE = re.compile(r"\banswer\s*\**\s*(?:is\s*:?|[:：])\s*\**\s*(.+?)[\s*.]*$", re.IGNORECASE | re.MULTILINE)
"""A stated answer: "Answer: X", "**Final answer:** X", "The answer is X." (the rest of the line; the last wins)."""
_NUMBER = re.compile(r"-?\d(?:[\d,]*\d)?(?:\.\d+)?")
_TEXT_WRAPPER = re.compile(r"\\(?:text|mathrm|textbf|mbox)\{([^{}]*)\}")


def _final_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _last_number_or_line(text: str) -> str:
    """The last number of the final line (GSM8K-style flexible extraction), or the line itself when it holds LaTeX
    or no number."""
    final = _final_line(text)
    numbers = _NUMBER.findall(final)
    return numbers[-1].replace(",", "") if numbers and "\\" not in final else final


def extract_answer(text: str, kind: VerifierKind) -> str | None:
    """The final answer stated in ``text`` for a verifier of ``kind``; None when the reply is empty.

    Math: the last ``\\boxed{}``, else a stated answer, else the final line's last number (or the line).
    Multiple choice: the chosen letter when one is found. QA: a stated answer or ``\\boxed{}``, else the last
    line. Code: the fenced code, else the whole reply.
    """
    if not text.strip():
        return None
    if kind == "code":
        code = extract_code(text)  # not stripped: a HumanEval body's first line keeps its indentation
        return code if code.strip() else None
    if kind == "multiple_choice":
        return extract_choice(text) or _final_line(text)
    boxed = last_boxed(text)
    stated = _ANSWER_LINE.findall(text)
    if kind == "math":
        return boxed or (stated[-1] if stated else _last_number_or_line(text))
    return (stated[-1] if stated else None) or boxed or _final_line(text)


def vote_key(answer: str, kind: VerifierKind) -> str:
    """A normal form under which equal answers written differently count as one vote.

    Math: LaTeX spacing, ``\\left``/``\\right``, ``\\text{}``, dollar signs, thousands separators and a trailing
    ``.0`` or full stop dropped. Multiple choice: the letter. QA: SQuAD normalisation. Code: whitespace collapsed.
    """
    if kind == "multiple_choice":
        return (extract_choice(answer) or answer).strip().upper()
    if kind == "qa":
        return normalize_answer(answer)
    if kind == "code":
        return " ".join(answer.split())
    key = _TEXT_WRAPPER.sub(r"\1", answer)
    for noise in ("\\left", "\\right", "\\!", "\\,", "\\;", "$", " "):
        key = key.replace(noise, "")
    key = key.replace("dfrac", "frac").replace("tfrac", "frac").rstrip(".")
    if re.fullmatch(r"-?\d{1,3}(,\d{3})+(\.\d+)?", key):
        key = key.replace(",", "")
    if re.fullmatch(r"-?\d+\.0+", key):
        key = key.split(".")[0]
    return key
