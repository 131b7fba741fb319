"""Trajectories: question → turns → calls → observations → answer, stored as JSONL.

Each text is stored once: a turn's output is also the assistant message that follows it in ``messages``, so a
stored turn names that message (``"output_message": INDEX``) instead of repeating the text, and reading the record
puts the text back (a turn whose output no message holds keeps its ``output``). Call values, reasons and
arguments are stored within the limits of :mod:`podium.core.calls`, and an orchestrator's reply within what its
``max_tokens`` can decode to (:attr:`Turn.output_chars`).

Storage is lossless for every string and value except two documented, visible replacements
(:mod:`podium.core.jsonsafe`): surrogate code points (lone UTF-16 halves such as ``\ud800`` arriving through
JSON escapes; UTF-8 cannot encode them) are written as U+FFFD, and tool values or arguments nested deeper than
64 levels keep a marker in place of the too-deep part. NaN and infinite floats are written as ``null``, as
JSON has no such numbers. Control characters and NUL are JSON-escaped and read back as they were.
"""

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any
from uuid import uuid4

from pydantic import (
    BaseModel,
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)
from pydantic_core import PydanticSerializationError, to_jsonable_python

from podium.core.budget import Budget, StopReason
from podium.core.calls import CallUsage, ToolResult
from podium.core.jsonsafe import json_ready
from podium.core.messages import Message
from podium.core.preference import Preference
from podium.core.record import Record


class Turn(Record):
    """One orchestrator generation and the observations it caused."""

    index: int
    """Position in the episode, from 0."""
    output: str
    """The orchestrator's raw text for this turn."""
    output_chars: NonNegativeInt | None = None
    """Set when the orchestrator's reply was longer than the turn's ``max_tokens`` can decode to and ``output`` is
    that reply cut to the bound: its length as the backend returned it."""
    usage: CallUsage = Field(default_factory=CallUsage)
    """Tokens, USD and latency of the orchestrator's own generation."""
    results: list[ToolResult] = Field(default_factory=list)
    """Every call made this turn, with its result, in the order they were issued."""
    parse_error: str | None = None
    """Why the output could not be turned into actions, if it could not."""
    wall_s: NonNegativeFloat = 0.0
    """Wall-clock seconds of the whole turn (generation plus concurrent calls)."""
    choices: list[str] | None = None
    """When the policy's next action was one of a finite set of words: that set (training puts the loss on the
    tokens where they branch)."""
    choice_probs: dict[str, float] | None = None
    """Each of ``choices``' probability under the orchestrator, when its backend told (a local model does)."""


class Trajectory(Record):
    """A full episode."""

    question: str
    """The task as given (before the preference instruction is appended)."""
    id: str = Field(default_factory=lambda: uuid4().hex)
    """Unique id."""
    turns: list[Turn] = Field(default_factory=list)
    """The turns, in order."""
    answer: str | None = None
    """The final answer, if one was given."""
    stop_reason: StopReason | None = None
    """What ended the episode: an answer, the environment, or which limit."""
    preference: Preference | None = None
    """The user's preference, kept for rewards."""
    budget: Budget | None = None
    """The limits the episode ran under."""
    wall_s: NonNegativeFloat = 0.0
    """Wall-clock seconds of the whole episode."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    """Free-form provenance (policy, pool, task id, seed…)."""
    messages: list[Message] = Field(default_factory=list)
    """The orchestrator's conversation exactly as it was prompted: system prompt, task, then its own outputs
    (``assistant``) alternating with the observations the runtime wrote (``user``). Training masks it."""

    @model_validator(mode="before")
    @classmethod
    def _outputs_from_messages(cls, data: Any) -> Any:
        """A stored record's turns get back the outputs they name by message (see the module docstring)."""
        if not isinstance(data, dict) or not isinstance(data.get("turns"), list):
            return data
        messages = data.get("messages") or []
        turns = []
        for turn in data["turns"]:
            if isinstance(turn, dict) and "output_message" in turn and "output" not in turn:
                index = turn["output_message"]
                message = messages[index] if isinstance(index, int) and 0 <= index < len(messages) else None
                content = message.get("content") if isinstance(message, dict) else getattr(message, "content", None)
                if not isinstance(content, str):
                    raise ValueError(f"turn {turn.get('index')}: output_message {index!r} names no message")
                turn = {key: value for key, value in turn.items() if key != "output_message"} | {"output": content}
            turns.append(turn)
        return {**data, "turns": turns}

    @model_serializer(mode="wrap")
    def _outputs_once(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if not isinstance(data, dict) or "messages" not in data or not isinstance(data.get("turns"), list):
            return data
        for turn, index in zip(data["turns"], self.output_messages(), strict=True):
            if index is not None and isinstance(turn, dict) and "output" in turn:
                del turn["output"]
                turn["output_message"] = index
        return data

    def output_messages(self) -> list[int | None]:
        """For each turn, the index of the assistant message that holds its output (None where none does)."""
        found: list[int | None] = []
        start = 0
        for turn in self.turns:
            index = next(
                (
                    position
                    for position in range(start, len(self.messages))
                    if self.messages[position].role == "assistant" and self.messages[position].content == turn.output
                ),
                None,
            )
            found.append(index)
            start = start if index is None else index + 1
        return found

    @property
    def results(self) -> list[ToolResult]:
        """Every call of every turn."""
        return [result for turn in self.turns for result in turn.results]

    @property
    def usage(self) -> CallUsage:
        """Total accounting: the orchestrator's generations plus every call."""
        total = CallUsage()
        for turn in self.turns:
            total = total + turn.usage
            for result in turn.results:
                total = total + result.usage
        return total


# Characters that some line readers (str.splitlines, JavaScript) treat as line breaks. In JSON text they
# can only occur inside strings, where their escaped form means the same.
_LINE_BREAK_ESCAPES = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})


def to_json_line(record: BaseModel) -> str:
    """One record as a single JSON line that every line reader splits correctly and that UTF-8 can encode
    (surrogates become U+FFFD)."""
    try:
        text = record.model_dump_json()
    except PydanticSerializationError:
        # The fast serializer refuses surrogates; the standard one writes them, and they are replaced here.
        data = json_ready(record.model_dump())
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=to_jsonable_python)
    return text.translate(_LINE_BREAK_ESCAPES) + "\n"


def write_trajectories(path: str | Path, trajectories: Iterable[Trajectory], *, append: bool = True) -> None:
    """Write one JSON object per line; appends by default so interrupted runs keep what they finished."""
    with Path(path).open("a" if append else "w", encoding="utf-8") as handle:
        for trajectory in trajectories:
            handle.write(to_json_line(trajectory))
            handle.flush()


def read_trajectories(path: str | Path) -> Iterator[Trajectory]:
    """Read trajectories written by :func:`write_trajectories`."""
    with Path(path).open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield Trajectory.model_validate_json(line)
