"""LLM judge: any chat backend compares an answer with the gold and says yes or no (ToolOrchestra's judge).

The verdict is parsed robustly (reasoning blocks dropped, an explicit ``verdict:`` line preferred, then a
leading or lone yes/no). A backend failure or an unreadable reply is reported as undecided, never as correct.
"""

import re

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


def judge_messages(question: str | None, answer: str, gold: str) -> list[Message]:
    """The judge's prompt."""
    parts = [f"Question: {question}"] if question else []
    parts += [f"Gold answer: {gold}", f"Response: {answer}", "Does the response give the gold answer? yes or no"]
    return [Message(role="system", content=JUDGE_SYSTEM), Message(role="user", content="\n\n".join(parts))]


class JudgeVerifier:
    """Asks a chat model whether the answer matches the gold."""

    def __init__(self, backend: ChatBackend, *, max_tokens: int = MAX_VERDICT_TOKENS) -> None:
        self.backend = backend
        self.max_tokens = max_tokens

    async def verify(self, answer: str, gold: str, question: str | None = None) -> Verdict:
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
