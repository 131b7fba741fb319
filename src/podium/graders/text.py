"""Graders of text answers: QA by exact match with token F1 as the graded score (SQuAD normalisation), QA by a
token-F1 threshold, and multiple choice by the option letter the answer commits to."""

from collections import Counter
from collections.abc import Sequence

from podium.core.answers import DEFAULT_LETTERS, extract_answer, extract_choice, normalize_answer
from podium.graders.verdict import Verdict

# HotpotQA scores these special answers all-or-nothing: a "yes" must not earn F1 credit against "no".
_SPECIAL_ANSWERS = {"yes", "no", "noanswer"}


def exact_match(answer: str, gold: str) -> bool:
    """Equality after :func:`normalize_answer`."""
    return normalize_answer(answer) == normalize_answer(gold)


def token_f1(answer: str, gold: str) -> float:
    """Harmonic mean of token precision and recall after normalisation (0 when either side is empty)."""
    predicted, reference = normalize_answer(answer), normalize_answer(gold)
    if (predicted in _SPECIAL_ANSWERS or reference in _SPECIAL_ANSWERS) and predicted != reference:
        return 0.0
    predicted_tokens, reference_tokens = predicted.split(), reference.split()
    common = sum((Counter(predicted_tokens) & Counter(reference_tokens)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted_tokens), common / len(reference_tokens)
    return 2 * precision * recall / (precision + recall)


def final_answer(reply: str, aliases: Sequence[str]) -> str:
    """The answer of a QA reply: the reply itself when it is one of the aliases (a gold may read "III (the answer
    is …)"), else the answer it states ("Answer: …", a box, else its last line)."""
    if any(exact_match(reply, alias) for alias in aliases):
        return reply
    return extract_answer(reply, "qa") or reply


def _aliases(gold: str | Sequence[str]) -> list[str]:
    aliases = [gold] if isinstance(gold, str) else list(gold)
    if not aliases:
        raise ValueError("a QA gold needs at least one answer")
    return aliases


class QAVerifier:
    """Exact match of the stated answer against the gold (or any of its aliases); the score is the best token F1."""

    name = "exact match (SQuAD normalisation)"

    async def verify(self, answer: str, gold: str | Sequence[str], question: str | None = None) -> Verdict:
        aliases = _aliases(gold)
        answer = final_answer(answer, aliases)
        matched = any(exact_match(answer, alias) for alias in aliases)
        score = 1.0 if matched else max(token_f1(answer, alias) for alias in aliases)
        reason = None if matched else f"no exact match (best token F1 {score:.3f})"
        return Verdict(correct=matched, score=score, extracted=normalize_answer(answer), reason=reason)


class TokenF1Verifier:
    """Token F1 of the stated answer against the gold (the best over its aliases): correct when it reaches
    ``threshold``."""

    def __init__(self, threshold: float = 0.5) -> None:
        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"the F1 threshold must be in (0, 1], got {threshold}")
        self.threshold = threshold
        self.name = f"token F1 ≥ {threshold:g} (SQuAD normalisation)"

    async def verify(self, answer: str, gold: str | Sequence[str], question: str | None = None) -> Verdict:
        aliases = _aliases(gold)
        answer = final_answer(answer, aliases)
        score = max(token_f1(answer, alias) for alias in aliases)
        passed = score >= self.threshold
        reason = None if passed else f"token F1 {score:.3f} is below {self.threshold:g}"
        return Verdict(correct=passed, score=score, extracted=normalize_answer(answer), reason=reason)


class MultipleChoiceVerifier:
    """The letter the answer chooses against the gold letter."""

    name = "option letter"

    def __init__(self, letters: str = DEFAULT_LETTERS) -> None:
        self.letters = letters

    async def verify(self, answer: str, gold: str, question: str | None = None) -> Verdict:
        gold_letter = gold.strip().upper()
        if len(gold_letter) != 1 or gold_letter not in self.letters:
            raise ValueError(f"gold {gold!r} is not one of the letters {self.letters}")
        chosen = extract_choice(answer, self.letters)
        if chosen is None:
            return Verdict.binary(False, reason="no option letter found in the answer")
        reason = None if chosen == gold_letter else f"chose {chosen}, gold is {gold_letter}"
        return Verdict.binary(chosen == gold_letter, extracted=chosen, reason=reason)
