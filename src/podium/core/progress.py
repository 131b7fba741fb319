"""Progress of an episode while it runs, for live displays: what the episode is doing and how many tokens the
model has generated so far.

The episode calls its ``on_event`` callback at each step. Token counts come from the backend that is
generating: it reads :data:`token_progress` (a context variable, so worker generations inside tool calls report
too) and calls it with the running count.
"""

from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Literal

EventKind = Literal["generating", "tokens", "calling"]


@dataclass(frozen=True)
class EpisodeEvent:
    """One step of an episode."""

    kind: EventKind
    """``generating`` (the orchestrator's turn starts), ``tokens`` (a model generated more), ``calling`` (the
    turn's action runs: calls, a plan, the summarizer)."""
    turn: int
    """The turn, from 0."""
    tokens: int = 0
    """For ``tokens``: tokens generated so far by the model now generating."""
    detail: str = ""
    """For ``calling``: the tools called."""


OnEvent = Callable[[EpisodeEvent], None]
"""A live display's callback; it must return quickly (it runs on the episode's loop or a generation thread)."""

token_progress: ContextVar[Callable[[int], None] | None] = ContextVar("podium_token_progress", default=None)
"""Set while a generation runs on behalf of a watched episode: called with the tokens generated so far."""
