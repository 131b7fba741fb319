"""Progress of an episode while it runs, for live displays and streams: what the episode is doing, how many tokens
the model has generated so far, each turn's output and each call's result as they come in, and the trajectory once
it stops.

The episode calls its ``on_event`` callback at each step. Token counts come from the backend that is
generating: it reads :data:`token_progress` (a context variable, so worker generations inside tool calls report
too) and calls it with the running count.
"""

from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Literal

from podium.core.calls import CallUsage, ToolResult
from podium.core.trajectory import Trajectory

EventKind = Literal["generating", "tokens", "calling", "turn", "result", "stopped"]


@dataclass(frozen=True)
class EpisodeEvent:
    """One step of an episode."""

    kind: EventKind
    """``generating`` (the orchestrator's turn starts), ``tokens`` (a model generated more), ``calling`` (the
    turn's action runs: calls, a plan, the summarizer), ``turn`` (the orchestrator's output of a turn is in),
    ``result`` (one call finished), ``stopped`` (the episode ended, however it ended)."""
    turn: int
    """The turn, from 0."""
    tokens: int = 0
    """For ``tokens``: tokens generated so far by the model now generating."""
    detail: str = ""
    """For ``calling``: the tools called. For ``turn``: the orchestrator's output."""
    usage: CallUsage | None = None
    """For ``turn``: what the orchestrator's generation cost."""
    result: ToolResult | None = None
    """For ``result``: the call's result, with its status and cost."""
    trajectory: Trajectory | None = None
    """For ``stopped``: the trajectory as it ended (also when the episode was cancelled)."""


OnEvent = Callable[[EpisodeEvent], None]
"""A watcher's callback; it must return quickly (it runs on the episode's loop or a generation thread)."""

token_progress: ContextVar[Callable[[int], None] | None] = ContextVar("podium_token_progress", default=None)
"""Set while a generation runs on behalf of a watched episode: called with the tokens generated so far."""
