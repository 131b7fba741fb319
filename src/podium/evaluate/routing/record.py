"""Record a model's answers to GSM8K questions in RouteLLM's layout, so it can be replayed as a pool member.

The CSV has ``prompt`` (the question, verbatim), ``MODEL`` (``True``/``False``: Podium's math verifier on the
answer) and ``MODEL_response`` (the full reply). ``podium routing record`` writes it for a pool worker (by
default the embedded SmolLM2-135M-Instruct); ``kind: replay`` workers read it.
"""

import asyncio
import csv
import io
from collections.abc import Callable, Sequence
from pathlib import Path

from podium.backends.base import BackendError, ChatBackend
from podium.core.answers import ANSWER_INSTRUCTIONS
from podium.core.messages import Message
from podium.errors import ConfigError
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
    """Ask ``backend`` every question of ``items``, grade and write the recording; returns how many are right. An
    interrupted recording resumes: the questions ``out`` already holds are kept and not asked again."""
    done = recorded(out, column)
    asked = {item.question for item in items}
    right = sum(correct for question, correct in done.items() if question in asked)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "a" if done else "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        if not done:
            writer.writerow(header(column))
        for count, item in enumerate(items, start=1):
            if item.question not in done:
                reply = answer(backend, item.question, max_tokens)
                correct = graded(reply, str(item.item.gold))
                right += correct
                writer.writerow([item.question, str(correct), reply])
                handle.flush()
            if progress is not None:
                progress(count, len(items))
    return right


def header(column: str) -> list[str]:
    """The recording's first row."""
    return ["prompt", column, f"{column}_response"]


def recorded(out: Path, column: str) -> dict[str, bool]:
    """Question → whether it was answered right, for each complete row ``out`` holds (none when it does not exist).
    A row cut short by an interruption is dropped from the file; a recording of another column is an error."""
    if not out.exists():
        return {}
    with open(out, newline="", encoding="utf-8") as handle:
        text = handle.read()
    rows: list[list[str]] = []
    try:
        for row in csv.reader(io.StringIO(text, newline=""), strict=True):
            rows.append(row)
    except csv.Error:
        pass  # the last row was cut inside a quoted reply
    if rows[:1] != [header(column)]:
        raise ConfigError(f"{out} is not a recording of '{column}' (its header: {rows[:1]}): give another --out")
    complete = [row for row in rows[1:] if len(row) == 3 and row[1] in ("True", "False")]
    if len(complete) < len(rows) - 1 or not text.endswith("\n"):
        with open(out, "w", newline="", encoding="utf-8") as handle:
            csv.writer(handle).writerows([header(column), *complete])
    return {row[0]: row[1] == "True" for row in complete}
