"""Pulling a final answer out of free text."""

from collections import Counter

BOXED = "\\boxed{"


def extract_boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{...}`` (braces balanced), or None."""
    start = text.rfind(BOXED)
    if start < 0:
        return None
    depth, index = 1, start + len(BOXED)
    for position in range(index, len(text)):
        depth += {"{": 1, "}": -1}.get(text[position], 0)
        if depth == 0:
            return text[index:position].strip()
    return None


def extract_answer(text: str) -> str:
    """The boxed answer if there is one, else the last non-empty line (stripped of an "Answer:" label)."""
    boxed = extract_boxed(text)
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
