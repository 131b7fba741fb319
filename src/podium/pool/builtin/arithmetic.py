"""The ``check_arithmetic`` tool: recompute the arithmetic a worked solution states and say what does not hold.

A cheap model's worked answer usually shows its errors: a calculation whose stated result is wrong (``12 * 7 =
94``, or a calculator annotation ``<<12*7=94>>``), no final answer, a final answer that is not a whole number
where counts are asked for, a final answer that no calculation produced, hedging ("assuming", "however",
"approximately"), second thoughts ("wait", "actually", "instead"), or a reply cut off mid-sentence. Read against
the question it answers, as a careful grader reads it, a reply also shows the quantities of the question it never
used, and the question shows its size (how many quantities, how many words) and whether it deals in percentages:
the longer the question, the likelier a slip. The tool reads a reply (and the episode's question, where it runs in
one) and reports exactly these findings in a fixed wording, so an orchestrator can decide to keep the reply or
escalate; :func:`check_text` gives the same findings as data (the features a learned router reads).

Only ``+ - * /`` over decimal numbers are evaluated (by walking the parsed expression, never ``eval``), on text
cut to :data:`MAX_CHARS`, so a hostile reply costs microseconds.
"""

import ast
import itertools
import math
import operator
import re
from dataclasses import dataclass, field
from typing import Literal

from podium.core.answers import ANSWER_INSTRUCTIONS, extract_answer
from podium.pool.context import current_episode
from podium.pool.tool import Tool, ToolOutput, tool

MAX_CHARS = 20_000
"""Characters of a reply that are checked."""
MAX_SHOWN = 3
"""Wrong calculations quoted in the report."""

_NUMBER = r"\(?\$?\d[\d,]*(?:\.\d+)?\)?%?"
_OPERATOR = r"[-+*/x×÷]"
_EXPRESSION = rf"{_NUMBER}(?:\s*{_OPERATOR}\s*{_NUMBER})*"
_EQUATION = re.compile(rf"(?<![\w.]){_EXPRESSION}(?:\s*=\s*{_EXPRESSION})+")
_ANNOTATION = re.compile(r"<<([^=<>]{1,200})=([^<>]{1,60})>>")
_HEDGES = re.compile(
    r"\b(assum\w*|however|approximately|roughly|cannot|can't|impossible|not possible|unclear|"
    r"not enough|estimate\w*|round(?:ed|ing)?)\b",
    re.IGNORECASE,
)
_SECOND_THOUGHTS = re.compile(
    r"\b(wait|actually|mistake|correct(?:ion|ed)?|re-?evaluate|instead|but since)\b", re.IGNORECASE
)
_ENDS_SENTENCE = re.compile(r"(?:####\s*\S.*|[.!?)\]}*%$\d\"'])\s*$")
_CLOCK = re.compile(r"\b\d{1,2}:\d{2}\b")
_QUANTITY = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?")
_QUANTITY_WORDS = {
    "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
    "eleven": 11, "twelve": 12, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "hundred": 100, "dozen": 12,
}  # fmt: skip
"""Quantities a question writes in words (``one``, ``half``: too often not a quantity to count)."""
_WORDS = re.compile(r"\b(" + "|".join(_QUANTITY_WORDS) + r")\b", re.IGNORECASE)
_PERCENT = re.compile(r"%|\bpercent", re.IGNORECASE)
MAX_COUNTED = 3
"""Wrong calculations, hedges, second thoughts and unused quantities count up to this in the features."""
_STATED_FINAL = re.compile(r"####|\\boxed\{|\banswer is\b", re.IGNORECASE)
_HASH_LINE = re.compile(r"####\s*(.+)")
_LAST_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?!.*\d)", re.DOTALL)
_COMPUTED_WORDS = {"last": "the last result computed", "earlier": "computed, but not last", "no": "not computed"}
_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


def evaluate(expression: str) -> float:
    """The value of ``+ - * /`` over decimal numbers (``$``, ``%`` and thousands separators ignored, ``x``/``×``
    multiply, ``÷`` divides); ValueError for anything else."""
    text = re.sub(r"(\d+(?:\.\d+)?)\s*%", r"(\1/100)", expression.replace("$", "").replace(",", ""))
    text = text.replace("×", "*").replace("x", "*").replace("÷", "/")

    def value(node: ast.expr) -> float:
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
            return float(node.value)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -value(node.operand)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
            return _OPERATORS[type(node.op)](value(node.left), value(node.right))
        raise ValueError(f"not plain arithmetic: {expression!r}")

    try:
        return value(ast.parse(text.strip(), mode="eval").body)
    except (SyntaxError, ZeroDivisionError, OverflowError, RecursionError) as error:
        raise ValueError(f"cannot evaluate {expression!r}: {error}") from error


def agrees(computed: float, stated: str) -> bool:
    """Whether ``stated`` is ``computed``, allowing the rounding to the decimals ``stated`` shows."""
    text = stated.replace("$", "").replace(",", "").strip("() ")
    percent = text.endswith("%")
    try:
        value = float(text.rstrip("%"))
    except ValueError:
        return True  # not a number: nothing to disagree with
    decimals = len(text.rstrip("%").split(".", 1)[1]) if "." in text else 0
    tolerance = 0.5 * 10.0**-decimals if decimals else 1e-9 * max(1.0, abs(value))
    candidates = (computed, computed * 100) if percent else (computed,)
    return any(abs(candidate - value) <= tolerance for candidate in candidates)


@dataclass(frozen=True)
class QuestionReport:
    """A reply read against its question: the question's size and the quantities the reply never mentions."""

    quantities: list[str] = field(default_factory=list)
    """The question's distinct quantities, as written (digits, or number words such as "twelve")."""
    words: int = 0
    """The question's length in words."""
    percentages: bool = False
    """The question deals in percentages."""
    unused: list[str] = field(default_factory=list)
    """The quantities the reply never mentions (neither the number nor its word)."""

    def text(self) -> str:
        """The findings in one fixed wording."""
        count = len(self.quantities)
        size = f"question: {count} quantit{'y' if count == 1 else 'ies'} in {self.words} words"
        size += ", with percentages" if self.percentages else ""
        if not self.quantities:
            return size
        if not self.unused:
            return f"{size}, every one used"
        return f"{size}, {len(self.unused)} never used: {', '.join(self.unused[:MAX_SHOWN])}"

    def features(self) -> list[float]:
        """Unused quantities (capped), the question's words and quantities (log-scaled to about 0–1), and
        percentages."""
        return [
            float(min(len(self.unused), MAX_COUNTED)) / MAX_COUNTED,
            math.log1p(self.words) / 6.0,
            math.log1p(len(self.quantities)) / 3.0,
            float(self.percentages),
        ]


@dataclass(frozen=True)
class ArithmeticReport:
    """What the checks found in one reply."""

    calculations: int = 0
    """Calculations found (written equations and calculator annotations) that could be evaluated."""
    wrong: list[str] = field(default_factory=list)
    """Each calculation whose stated result is not what it computes, as ``12 * 7 = 94 (is 84)``."""
    results: list[float] = field(default_factory=list)
    """The values the calculations compute."""
    final: str | None = None
    """The final answer as stated (``####`` line, ``\\boxed{}``, "the answer is", else the final line's number)."""
    final_stated: bool = False
    """The reply marks its final answer (``####``, ``\\boxed{}`` or "the answer is")."""
    final_whole: bool | None = None
    """The final answer is a whole number (None: no numeric final answer)."""
    final_computed: Literal["last", "earlier", "no"] | None = None
    """Whether the final answer is the result of the last calculation, of an earlier one, or of none (None: no
    numeric final answer)."""
    hedges: list[str] = field(default_factory=list)
    """Hedging words used ("assuming", "however", "approximately"…), lower-cased, once each."""
    second_thoughts: list[str] = field(default_factory=list)
    """Words of a reply changing its mind ("wait", "actually", "instead"…), lower-cased, once each."""
    cut_off: bool = False
    """The reply stops mid-sentence (its last line is no ``####`` line and ends in no full stop, bracket or
    number)."""
    question: QuestionReport | None = None
    """What the reply shows read against its question (None: checked without one)."""

    def text(self) -> str:
        """The findings in one fixed wording (what the orchestrator reads)."""
        parts = [f"{len(self.wrong)} of {self.calculations} calculations wrong"]
        parts[0] += ": " + "; ".join(self.wrong[:MAX_SHOWN]) if self.wrong else ""
        if self.final is None:
            parts.append("no final answer")
        else:
            marked = "stated final answer" if self.final_stated else "final answer (not marked)"
            notes = []
            if self.final_whole is not None:
                notes.append("a whole number" if self.final_whole else "not a whole number")
            if self.final_computed is not None:
                notes.append(_COMPUTED_WORDS[self.final_computed])
            parts.append(f"{marked} {self.final}" + (f": {', '.join(notes)}" if notes else ""))
        parts.append(f"hedges: {', '.join(self.hedges)}" if self.hedges else "no hedging")
        parts.append(
            f"second thoughts: {', '.join(self.second_thoughts)}" if self.second_thoughts else "no second thoughts"
        )
        if self.cut_off:
            parts.append("the reply stops mid-sentence")
        if self.question is not None:
            parts.append(self.question.text())
        return ". ".join(parts) + "."

    def features(self) -> list[float]:
        """The findings as numbers, for a learned router: wrong calculations, no calculation, no final answer,
        unmarked final answer, not a whole number, not computed, computed but not last, hedging words, second
        thoughts, cut off, then the question's (:meth:`QuestionReport.features`; zeros without a question).
        Counts stop at :data:`MAX_COUNTED`."""
        numeric = self.final_whole is not None
        return [
            float(min(len(self.wrong), MAX_COUNTED)),
            float(self.calculations == 0),
            float(self.final is None),
            float(self.final is not None and not self.final_stated),
            float(numeric and not self.final_whole),
            float(self.final_computed == "no"),
            float(self.final_computed == "earlier"),
            float(min(len(self.hedges), MAX_COUNTED)),
            float(min(len(self.second_thoughts), MAX_COUNTED)),
            float(self.cut_off),
            *(self.question or QuestionReport()).features(),
        ]


def _calculations(text: str) -> tuple[int, list[str], list[float]]:
    """(count, wrong ones, computed values) of the equations and calculator annotations in ``text``."""
    count, wrong, values = 0, [], []
    checks: list[tuple[str, str]] = [(left, right) for left, right in _ANNOTATION.findall(text)]
    for match in _EQUATION.finditer(_ANNOTATION.sub("", text)):
        sides = [side.strip() for side in match.group(0).split("=")]
        checks.extend(itertools.pairwise(sides))
    for left, right in checks:
        if not re.search(_OPERATOR, left.strip().lstrip("-(")):
            continue  # "20% of 50 = 10" reads "50 = 10": a restatement, not a calculation
        try:
            computed = evaluate(left)
        except ValueError:
            continue
        count += 1
        values.append(computed)
        if not agrees(computed, right):
            wrong.append(f"{left.strip()} = {right.strip()} (is {computed:g})")
    return count, wrong, values


def final_answer(text: str) -> str | None:
    """The final answer a reply states: its last ``####`` line, else its boxed or stated answer, else its final
    line (Podium's math answer extraction)."""
    marked = _HASH_LINE.findall(text)
    return marked[-1].strip() if marked else extract_answer(text, "math")


def _number(answer: str) -> float | None:
    """The value of ``answer`` when it is arithmetic, else of the last number in it (units and words dropped)."""
    try:
        return evaluate(answer)
    except ValueError:
        last = _LAST_NUMBER.search(answer)
        return float(last.group(0).replace(",", "")) if last else None


def _quantities(text: str) -> dict[float, str]:
    """The quantities ``text`` states (numbers in digits, clock times left out, and number words), by value."""
    found: dict[float, str] = {}
    for written in _QUANTITY.findall(_CLOCK.sub(" ", text)):
        found.setdefault(float(written.replace(",", "")), written.rstrip(","))
    for word in _WORDS.findall(text):
        found.setdefault(float(_QUANTITY_WORDS[word.lower()]), word.lower())
    return found


def check_question(question: str, reply: str) -> QuestionReport:
    """What ``reply`` shows read against ``question`` (the answer format an item's verifier appends to a task is
    not part of it)."""
    text = question[:MAX_CHARS]
    for instruction in ANSWER_INSTRUCTIONS.values():
        text = text.removesuffix(f"\n\n{instruction}")
    asked, mentioned = _quantities(text), _quantities(reply)
    unused = [written for value, written in asked.items()
              if not any(abs(value - other) <= 1e-9 * max(1.0, abs(value)) for other in mentioned)]  # fmt: skip
    return QuestionReport(list(asked.values()), len(text.split()), bool(_PERCENT.search(text)), unused)


def check_text(reply: str, question: str | None = None) -> ArithmeticReport:
    """The findings of the checks on ``reply``, read against ``question`` where one is given (see the module
    notes)."""
    text = reply[:MAX_CHARS]
    count, wrong, values = _calculations(text)
    final = final_answer(text)
    whole = computed = None
    if final is not None:
        number = _number(final)
        if number is not None:
            whole = abs(number - round(number)) < 1e-9
            matches = [abs(number - value) <= 1e-9 * max(1.0, abs(value)) for value in values]
            computed = "last" if matches and matches[-1] else "earlier" if any(matches) else "no"
    hedges = list(dict.fromkeys(match.lower() for match in _HEDGES.findall(text)))
    second_thoughts = list(dict.fromkeys(match.lower() for match in _SECOND_THOUGHTS.findall(text)))
    return ArithmeticReport(
        calculations=count,
        wrong=wrong,
        results=values,
        final=final,
        final_stated=bool(_STATED_FINAL.search(text)),
        final_whole=whole,
        final_computed=computed,
        hedges=hedges,
        second_thoughts=second_thoughts,
        cut_off=bool(text.strip()) and not _ENDS_SENTENCE.search(text.strip()),
        question=None if question is None else check_question(question, text),
    )


def check_arithmetic_tool() -> Tool:
    """The ``check_arithmetic`` tool (in-process and deterministic: free and instant)."""

    def check_arithmetic(text: str, question: str | None = None) -> ToolOutput:
        """Recompute the arithmetic of a worked solution and report what does not hold: wrong calculations,
        a missing or unmarked final answer, a final answer that is not a whole number or that no calculation
        produced, hedging, second thoughts, a reply cut off, and, read against the question, its size and the
        quantities the solution never used.

        Args:
            text: the worked solution to check (for instance a worker's reply).
            question: the question it answers (default: the episode's question, where the tool runs in one).
        """
        if question is None:
            episode = current_episode.get()
            question = episode.question if episode is not None and episode.question else None
        report = check_text(text, question)
        return ToolOutput({"features": report.features(), "report": report.text()}, observation=report.text())

    return tool(check_arithmetic)
