"""What a policy is. A policy renders the episode into the orchestrator's prompt and parses the orchestrator's
output into actions; the executor does everything else (dispatch, statuses, accounting, budgets, recording).

Parsing never raises anything but :class:`ActionParseError`, whose message is shown to the orchestrator.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from podium.core.calls import ToolCall, ToolResult, ToolSpec
from podium.errors import PodiumError


class ActionParseError(PodiumError, ValueError):
    """The orchestrator's output cannot be turned into actions; the message says what was wrong."""


@dataclass(frozen=True)
class InvalidCall:
    """A call block that could not be read (bad JSON, no name): it becomes a PARSE_ERR result."""

    text: str
    """The block as written."""
    reason: str
    """What was wrong with it."""


@dataclass(frozen=True)
class Answer:
    """The episode's final answer."""

    text: str


@dataclass(frozen=True)
class Calls:
    """Tool calls to run this turn (concurrently when there are several)."""

    calls: list[ToolCall]
    invalid: list[InvalidCall] = field(default_factory=list)


@dataclass(frozen=True)
class Summarize:
    """ParaManager's ``final_answer`` call: a frozen summarizer model writes the answer from the history."""

    call: ToolCall


@dataclass(frozen=True)
class Subtask:
    """One node of an Uno-Orchestra plan."""

    id: int
    depends_on: tuple[int, ...]
    description: str


@dataclass(frozen=True)
class Route:
    """Where a subtask goes: an admissible (worker, primitive) pair and the instruction forwarded to it."""

    subtask: int
    model: str
    skill: str
    instruction: str


@dataclass(frozen=True)
class Plan:
    """A validated DAG round: subtasks in topological order, one route each."""

    round: int
    subtasks: list[Subtask]
    routes: dict[int, Route]


Action = Answer | Calls | Summarize | Plan


@dataclass(frozen=True)
class PoolView:
    """What the orchestrator is allowed to know about the pool in this episode."""

    tools: list[ToolSpec]
    """The tools it may call (after allow/deny lists)."""
    table: str
    """The pool table (names or blind labels, descriptions, prices, primitives) for the system prompt."""
    workers: list[str] = field(default_factory=list)
    """Worker labels as shown."""
    admissible: frozenset[tuple[str, str]] = frozenset()
    """Admissible (worker label, primitive) pairs."""


@runtime_checkable
class Policy(Protocol):
    """An action space: prompt rendering, output parsing and (optionally) a grammar for constrained decoding."""

    name: str
    """``serial``, ``parallel`` or ``dag``."""
    max_turns: int
    """Default turn limit when the budget sets none."""
    max_calls_per_round: int
    """Most calls one turn may dispatch (more are refused with PARSE_ERR)."""

    def system_prompt(self, view: PoolView) -> str:
        """The orchestrator's instructions with the pool table."""
        ...

    def parse(self, text: str, view: PoolView, previous: Sequence[Action]) -> Action:
        """The actions in ``text``, given the actions of earlier turns; raises only :class:`ActionParseError`."""
        ...

    def observation(self, results: Sequence[ToolResult], remaining: str) -> str:
        """The message the orchestrator reads after its calls ran (``remaining`` describes the budget left)."""
        ...

    def rejection(self, reason: str, remaining: str) -> str:
        """The message the orchestrator reads after output that could not be parsed."""
        ...

    def grammar(self, view: PoolView, previous: Sequence[Action] = ()) -> str | None:
        """A regular expression for grammar-constrained decoding of the next output, given the actions of
        earlier turns: every output it matches parses."""
        ...
