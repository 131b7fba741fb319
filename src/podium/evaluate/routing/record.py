"""Record a model's answers to GSM8K questions in RouteLLM's layout, so it can be replayed as a pool member.

The CSV has ``prompt`` (the question, verbatim), ``MODEL`` (``True``/``False``: Podium's math verifier on the
answer) and ``MODEL_response`` (the full reply). ``podium routing record`` writes it for a pool worker (by
default the embedded SmolLM2-135M-Instruct); ``kind: replay`` workers read it.
"""

import asyncio
import csv
from collections.abc import Callable, Sequence
from pathlib import Path

from podium.backends.base import BackendError, ChatBackend
from podium.core.answers import ANSWER_INSTRUCTIONS
from podium.core.messages import Message
from podium.evaluate.routing.data import RoutingItem, graded

Progress = Callable[[int, int], None]
"""Called after each question with (done, total)."""


def answer(backend: ChatBackend, question: str, max_tokens: int) -> str:
    """The model's reply to ``question`` under Podium's math answer instruction (a failure: empty)."""
    messages = [
        Message(role="system", content=ANSWER_INSTRUCTIONS["math"]),
        Message(role="user", content=question),
    ]
    try:
        return asyncio.run(backend.generate(messages, max_tokens=max_tokens)).text
    except BackendError:
        return ""


def record(
    backend: ChatBackend,
    items: Sequence[RoutingItem],
    out: Path,
    column: str,
    *,
    max_tokens: int = 256,
    progress: Progress | None = None,
) -> int:
    """Ask ``backend`` every question of ``items``, grade and write the recording; returns how many are right."""
    right = 0
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["prompt", column, f"{column}_response"])
        for done, item in enumerate(items, start=1):
            reply = answer(backend, item.question, max_tokens)
            correct = graded(reply, str(item.item.gold))
            right += correct
            writer.writerow([item.question, str(correct), reply])
            handle.flush()
            if progress is not None:
                progress(done, len(items))
    return right
