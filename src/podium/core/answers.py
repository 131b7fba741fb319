"""Pulling a final answer out of free text."""

from collections import Counter


def last_boxed(text: str) -> str | None:
    r"""The content of the last ``\boxed{…}`` (or ``\fbox{…}``), braces balanced; None when there is none."""
    start = max(text.rfind("\\boxed"), text.rfind("\\fbox"))
    if start < 0:
        return None
    opening = text.find("{", start)
    if opening < 0:
        return None
    depth = 0
    for position in range(opening, len(text)):
        if text[position] == "{":
            depth += 1
        elif text[position] == "}":
            depth -= 1
            if depth == 0:
                return text[opening + 1 : position].strip()
    return None


def extract_answer(text: str) -> str:
    """The boxed answer if there is one, else the last non-empty line (stripped of an "Answer:" label)."""
    boxed = last_boxed(text)
    if boxed is not None:
        return boxed
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    last = lines[-1]
    for label in ("final answer:", "answer:"):
        if last.lower().startswith(label):
            return last[len(label) :].strip()
    return last


def majority(answers: list[str]) -> tuple[str, dict[str, int]]:
    """The most common answer (ties go to the earliest) and the vote counts, comparing answers with
    whitespace and case folded."""
    keyed = [" ".join(answer.split()).casefold() for answer in answers]
    counts = Counter(keyed)
    if not counts:
        return "", {}
    best = max(counts, key=lambda key: (counts[key], -keyed.index(key)))
    return answers[keyed.index(best)], dict(counts)
