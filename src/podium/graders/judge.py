"""LLM judge: any chat backend compares an answer with the gold and says yes or no (ToolOrchestra's judge).

The verdict is parsed robustly (reasoning blocks dropped, an explicit ``verdict:`` line preferred, then a
leading or lone yes/no). A backend failure or an unreadable reply is reported as undecided, never as correct.
"""

import re
from collections.abc import Sequence

from podium.backends.base import BackendError, ChatBackend
from podium.core.messages import Message
from podium.graders.verdict import Verdict

JUDGE_SYSTEM = (
    "You grade answers. Decide whether the response gives the same final answer as the gold answer: the same "
    "entity, number, date or fact, allowing different wording, formatting, units written out and harmless "
    "extra detail, but not a different, partial, hedged or contradictory answer. Reply with one word: yes or no."
)
_THINKING = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_EXPLICIT = re.compile(r"(?:verdict|judgement|judgment|final answer|answer)\s*[:=\-]\s*\**\s*(yes|no)\b", re.IGNORECASE)
_LEADING = re.compile(r"^\W*(yes|no)\b", re.IGNORECASE)
_ANY = re.compile(r"\b(yes|no)\b", re.IGNORECASE)
MAX_VERDICT_TOKENS = 512
"""Room for a reasoning model to think before its one-word verdict."""


def parse_judgement(text: str) -> bool | None:
    """True for yes, False for no, None when the reply does not commit to one."""
    reply = _THINKING.sub(" ", text).strip()
    explicit = _EXPLICIT.findall(reply)
    if explicit:
        return explicit[-1].lower() == "yes"
    leading = _LEADING.match(reply)
    if leading:
        return leading.group(1).lower() == "yes"
    words = {word.lower() for word in _ANY.findall(reply)}
    if len(words) == 1:
        return words == {"yes"}
    return None


def judge_messages(question: str | None, answer: str, gold: str | Sequence[str]) -> list[Message]:
    """The judge's prompt; a gold with aliases lists them all."""
    parts = [f"Question: {question}"] if question else []
    golds = f"Gold answer: {gold}" if isinstance(gold, str) else f"Gold answer (any of): {' | '.join(gold)}"
    parts += [golds, f"Response: {answer}", "Does the response give the gold answer? yes or no"]
    return [Message(role="system", content=JUDGE_SYSTEM), Message(role="user", content="\n\n".join(parts))]


class JudgeVerifier:
    """Asks a chat model whether the answer matches the gold (a text gold or its aliases; not a code harness)."""

    def __init__(self, backend: ChatBackend, *, max_tokens: int = MAX_VERDICT_TOKENS) -> None:
        self.backend = backend
        self.max_tokens = max_tokens
        self.name = f"LLM judge ({backend.model})"

    async def verify(self, answer: str, gold: str | Sequence[str], question: str | None = None) -> Verdict:
        if not isinstance(gold, (str, list, tuple)):
            return Verdict.undecided(f"the judge compares text answers; it cannot grade against {type(gold).__name__}")
        try:
            generation = await self.backend.generate(
                judge_messages(question, answer, gold), max_tokens=self.max_tokens, temperature=0.0
            )
        except BackendError as error:
            return Verdict.undecided(f"judge '{self.backend.model}' failed: {error}")
        decision = parse_judgement(generation.text)
        if decision is None:
            return Verdict.undecided(f"judge '{self.backend.model}' gave no yes/no verdict: {generation.text[:200]!r}")
        reason = None if decision else f"judge '{self.backend.model}' said no"
        return Verdict.binary(decision, extracted=generation.text.strip()[:200], reason=reason)
