"""The ``check_arithmetic`` tool: recompute the arithmetic a worked solution states and say what does not hold.

A cheap model's worked answer usually shows its errors: a calculation whose stated result is wrong (``12 * 7 =
94``, or a calculator annotation ``<<12*7=94>>``), no final answer, a final answer that is not a whole number
where counts are asked for, a final answer that no calculation produced, or hedging ("assuming", "however",
"approximately"). The tool reads a reply and reports exactly these findings in a fixed wording, so an
orchestrator can decide to keep the reply or escalate; :func:`check_text` gives the same findings as data (the
features a learned router reads).

Only ``+ - * /`` over decimal numbers are evaluated (by walking the parsed expression, never ``eval``), on text
cut to :data:`MAX_CHARS`, so a hostile reply costs microseconds.
"""

import ast
import itertools
import operator
import re
from dataclasses import dataclass, field
from typing import Literal

from podium.core.answers import extract_answer
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
        return ". ".join(parts) + "."

    def features(self) -> list[float]:
        """The findings as numbers, for a learned router: wrong calculations (capped at 3), no calculation, no
        final answer, unmarked final answer, not a whole number, not computed, computed but not last, hedging
        words (capped at 3)."""
        numeric = self.final_whole is not None
        return [
            float(min(len(self.wrong), 3)),
            float(self.calculations == 0),
            float(self.final is None),
            float(self.final is not None and not self.final_stated),
            float(numeric and not self.final_whole),
            float(self.final_computed == "no"),
            float(self.final_computed == "earlier"),
            float(min(len(self.hedges), 3)),
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


def check_text(reply: str) -> ArithmeticReport:
    """The findings of the checks on ``reply`` (see the module notes)."""
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
    return ArithmeticReport(
        calculations=count,
        wrong=wrong,
        results=values,
        final=final,
        final_stated=bool(_STATED_FINAL.search(text)),
        final_whole=whole,
        final_computed=computed,
        hedges=hedges,
    )


def check_arithmetic_tool() -> Tool:
    """The ``check_arithmetic`` tool (in-process and deterministic: free and instant)."""

    def check_arithmetic(text: str) -> ToolOutput:
        """Recompute the arithmetic of a worked solution and report what does not hold: wrong calculations,
        a missing or unmarked final answer, a final answer that is not a whole number or that no calculation
        produced, and hedging.

        Args:
            text: the worked solution to check (for instance a worker's reply).
        """
        report = check_text(text)
        return ToolOutput({"features": report.features(), "report": report.text()}, observation=report.text())

    return tool(check_arithmetic)
