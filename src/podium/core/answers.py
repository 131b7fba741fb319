"""Pulling a final answer out of free text: the boxed answer, a stated answer, an option letter, a code
block; the answer format each kind of verifier expects; and keys under which equal answers vote together."""

import re
import string
from collections import Counter
from typing import Literal

VerifierKind = Literal["math", "qa", "multiple_choice", "code", "environment", "recorded"]
"""Which verifier judges an answer (SPEC §5.4), and so which answer format is expected. ``recorded``: the answer
is a replayed model's recorded one, right or wrong as the recording says (outcome-only recordings)."""

_BOX_COMMAND = re.compile(r"\\(?:boxed|fbox)\s*\{")
_BOX_SEPARATOR = re.compile(r"[ \t$]*(?:,|;|,?[ \t]*(?:and|or))?[ \t$]*", re.IGNORECASE)
"""What may stand between two boxes of one answer, on one line: a comma, "and" or "or" (dollar signs and spaces
around it)."""
_FENCED = re.compile(r"```[ \t]*(?:python|py|python3)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)


def boxed_spans(text: str) -> list[tuple[int, int]]:
    r"""Where each ``\boxed{…}`` (or ``\fbox{…}``) of ``text`` starts and ends, braces balanced, in order. A box
    never closed is left out, and so is a box around another (``\boxed{\boxed{5}}`` counts as the inner one).
    One pass over the text with a stack of open braces, so nested or unclosed boxes cost linear time."""
    box_starts = {command.end() - 1: command.start() for command in _BOX_COMMAND.finditer(text)}
    open_braces: list[list] = []  # [box start or None, whether a box closed inside]
    spans: list[tuple[int, int]] = []
    for position, character in enumerate(text):
        if character == "{":
            open_braces.append([box_starts.get(position), False])
        elif character == "}" and open_braces:
            start, holds_box = open_braces.pop()
            if start is not None and not holds_box:
                spans.append((start, position + 1))
            if open_braces:
                open_braces[-1][1] = open_braces[-1][1] or holds_box or start is not None
    return spans


def _box_content(text: str, span: tuple[int, int]) -> str:
    return text[text.index("{", span[0]) + 1 : span[1] - 1].strip()


def last_boxed(text: str) -> str | None:
    r"""The content of the last ``\boxed{…}`` (or ``\fbox{…}``), braces balanced; None when there is none."""
    spans = boxed_spans(text)
    return _box_content(text, spans[-1]) if spans else None


def final_boxed(text: str) -> str | None:
    r"""The final boxed answer: the last box's content, or, when boxes joined by a list word ("or", "and", a comma)
    end the text's last boxed line, those boxes as written (``\boxed{3} or \boxed{5}``), so that an answer
    offering several candidates still shows them all. None when there is no box."""
    spans = boxed_spans(text)
    if not spans:
        return None
    first = len(spans) - 1
    while first > 0 and _BOX_SEPARATOR.fullmatch(text[spans[first - 1][1] : spans[first][0]]):
        first -= 1
    if first == len(spans) - 1:
        return _box_content(text, spans[-1])
    return text[spans[first][0] : spans[-1][1]]


def extract_code(answer: str) -> str:
    """The program in an answer: the fenced code blocks joined, or the whole text when there is no fence."""
    blocks = _FENCED.findall(answer)
    return "\n\n".join(block.strip("\n") for block in blocks) if blocks else answer


_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower case, punctuation and the articles a/an/the removed, whitespace collapsed."""
    lowered = "".join(char for char in text.lower() if char not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", lowered).split())


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


ANSWER_INSTRUCTIONS: dict[VerifierKind, str] = {
    "math": "Solve the problem. Reason step by step, then give only the final answer inside \\boxed{}.",
    "multiple_choice": "Answer the multiple-choice question. Reason briefly, then end with 'Answer: X' where X is "
    "the letter of the correct option.",
    "qa": "Answer the question. Reason briefly if needed, then end with a line 'Answer: ' followed by a short answer "
    "(a name, number, date or phrase).",
    "code": "Write a correct Python solution. Reply with one complete ```python code block.",
    "environment": "Help the user while following the policy.",
    "recorded": "Answer the question.",
}
"""The answer format each kind of verifier expects, told to the model as its system prompt."""

_ANSWER_LINE = re.compile(r"\banswer\s*\**\s*(?:is\s*:?|[:：])\s*\**\s*(.+?)[\s*.]*$", re.IGNORECASE | re.MULTILINE)
"""A stated answer: "Answer: X", "**Final answer:** X", "The answer is X." (the rest of the line; the last wins)."""
_NUMBER = re.compile(r"(?<![\w.^_])-?\d(?:[\d,]*\d)?(?:\.\d+)?(?![\d^_]|(?:st|nd|rd|th)\b)")
"""A number, possibly with a unit (``48g``); not an ordinal (``7th``), an exponent or an index (``x^2``, ``a_2``)."""
_TEXT_WRAPPER = re.compile(r"\\(?:text|mathrm|textbf|mbox)\{([^{}]*)\}")


def _final_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


_LATEX_TEXT = re.compile(r"\\(?:text\w*|mbox|math\w+|operatorname|begin|end)\s*\{[^{}]*\}")
_LATEX_COMMAND = re.compile(r"\\[A-Za-z]+")
_WORD = re.compile(r"[A-Za-z]{3,}")
MATH_WORDS = frozenset({"and", "sin", "cos", "tan", "cot", "sec", "csc", "log", "exp", "sqrt", "inf", "infty"})
"""Words a formula written without LaTeX may hold (``sin x``, ``-2 and 1``); any other word of three letters or more
makes a sentence."""
SHORT_WORDS = frozenset({"is", "it", "so", "to", "be", "of", "as", "at", "by", "if", "on", "we", "us", "an", "no"})
"""Two-letter English words that make a sentence (other pairs of letters, ``xy`` or ``pq``, are products)."""
_SHORT_WORD = re.compile(r"(?<![A-Za-z])[A-Za-z]{2}(?![A-Za-z])")


def is_prose(text: str) -> bool:
    """Whether ``text`` holds a word outside LaTeX commands and ``\\text{}`` (three letters or more, or a short
    English word such as "is"): a sentence rather than a formula. ``x^2-1``, ``5 cm``, ``3 or 5`` and
    ``\\text{Evelyn}`` are formulas; "so x is 5" is prose."""
    bare = _LATEX_COMMAND.sub(" ", _LATEX_TEXT.sub(" ", text))
    words = _WORD.findall(bare)
    return any(word.lower() not in MATH_WORDS for word in words) or any(
        word.lower() in SHORT_WORDS for word in _SHORT_WORD.findall(bare)
    )


_FORMULA_TAIL = re.compile(
    r"^.*\b(?:is|are|was|equals|becomes|gives|to|be)\s+(?P<formula>[^\s.;:,](?:[^;:]*[^\s.;:,])?)[\s.]*$",
    re.IGNORECASE | re.DOTALL,
)


def formula_tail(sentence: str) -> str | None:
    """The formula ending a sentence, after its last linking word ("The sum telescopes to p - q." gives
    ``p - q``); None when the sentence does not end in a formula."""
    tail = _FORMULA_TAIL.search(sentence)
    return tail["formula"] if tail and not is_prose(tail["formula"]) else None


def _final_line_answer(text: str) -> str:
    """The final line; when it is a sentence, the formula ending it ("… is 60,000 * 2 = 120,000."), else its
    number when it holds a single one ("So she earns 2,400 dollars").

    Other lines stay whole: a sentence with several numbers may be a computation whose result comes last or a
    hedge ("either 3 or 5"), and the verifier has to see which."""
    final = _final_line(text)
    if not is_prose(final):
        return final
    numbers = _NUMBER.findall(final)
    return formula_tail(final) or (numbers[0].replace(",", "") if len(numbers) == 1 else final)


_EMPHASIS = re.compile(r"(?<![\w*])(\*\*|__)(?=\S)(.+?)(?<=\S)\1(?![\w*])")
"""Markdown bold around a span (``**1/2**``, ``__5__``); not Python's power operator (``2**10``)."""
TRAILING = " \t.?…"
"""What may end a sentence after its final answer without being part of it: spaces, a full stop, a question mark,
an ellipsis."""


def unemphasised(text: str) -> str:
    """``text`` without markdown bold markers (chat models bold the answer: "So the total is **391**.")."""
    return _EMPHASIS.sub(r"\2", text)


def _unlabelled(line: str) -> str:
    for label in ("final answer:", "answer:"):
        if line.lower().startswith(label):
            return line[len(label) :].strip()
    return line


def extract_answer(text: str, kind: VerifierKind | None = None) -> str | None:
    """The final answer stated in ``text`` for a verifier of ``kind``; None when the reply is empty.

    Math: the final ``\\boxed{}`` (:func:`final_boxed`), else a stated answer, else the final line (the formula
    ending it, or its number, when it is a sentence), markdown bold and a closing ``.``, ``?`` or ``…`` left out.
    Multiple choice: the chosen letter when one is found. Recorded: the whole reply (a reference to a recorded
    answer). QA: a stated answer or ``\\boxed{}``, else the last
    line. Code: the fenced code, else the whole reply. No kind (a free-form answer, e.g. a summarizer's): the
    last ``\\boxed{}``, else the final line without an "Answer:" label.
    """
    if not text.strip():
        return None
    if kind is None:
        return last_boxed(text) or _unlabelled(_final_line(text))
    if kind == "code":
        code = extract_code(text)  # not stripped: a HumanEval body's first line keeps its indentation
        return code if code.strip() else None
    if kind == "multiple_choice":
        return extract_choice(text) or _final_line(text)
    if kind == "recorded":
        return text.strip()
    if kind == "math":
        text = unemphasised(text)
        stated = _ANSWER_LINE.findall(text)
        return final_boxed(text) or (stated[-1] if stated else _final_line_answer(text)).rstrip(TRAILING)
    stated = _ANSWER_LINE.findall(text)
    return (stated[-1] if stated else None) or last_boxed(text) or _final_line(text)


def vote_key(answer: str, kind: VerifierKind) -> str:
    """A normal form under which equal answers written differently count as one vote.

    Math: LaTeX spacing, ``\\left``/``\\right``, ``\\text{}``, dollar signs, thousands separators and a trailing
    ``.0`` or full stop dropped. Multiple choice: the letter. QA: SQuAD normalisation. Code and recorded: whitespace
    collapsed.
    """
    if kind == "multiple_choice":
        return (extract_choice(answer) or answer).strip().upper()
    if kind == "qa":
        return normalize_answer(answer)
    if kind in ("code", "recorded"):
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


def majority(answers: list[str]) -> tuple[str, dict[str, int]]:
    """The most common answer (ties go to the earliest) and the vote counts, comparing answers with
    whitespace and case folded."""
    keyed = [" ".join(answer.split()).casefold() for answer in answers]
    counts = Counter(keyed)
    if not counts:
        return "", {}
    best = max(counts, key=lambda key: (counts[key], -keyed.index(key)))
    return answers[keyed.index(best)], dict(counts)
