"""Progress of an episode while it runs, for live displays and streams: what the episode is doing, how many tokens
the model has generated so far, each turn's output and each call's result as they come in, and the trajectory once
it stops; and the progress bar of every longer wait (:class:`ProgressBar`), which also reports to a log file.

The episode calls its ``on_event`` callback at each step. Token counts come from the backend that is
generating: it reads :data:`token_progress` (a context variable, so worker generations inside tool calls report
too) and calls it with the running count.
"""

import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal

import rich.console
import rich.progress

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


class PipedReports:
    """When a live display prints its line where Rich cannot draw it live (a console that is not a terminal: a log
    file, a pipe, a CI job): at most once every ``every_s`` seconds."""

    def __init__(self, console: rich.console.Console, every_s: float) -> None:
        self.console = console
        self.every_s = every_s
        self._printed_at = time.monotonic()

    def due(self) -> bool:
        """Whether to print the line now (and, if so, the interval restarts)."""
        if self.console.is_terminal or time.monotonic() - self._printed_at < self.every_s:
            return False
        self._printed_at = time.monotonic()
        return True


class ProgressBar(rich.progress.Progress):
    """Rich's progress display for a wait on stderr; on a console that is not a terminal, where Rich shows nothing
    until the end, it prints its current line every ``every_s`` seconds."""

    def __init__(self, *columns: str | rich.progress.ProgressColumn, every_s: float = 30.0, **options: Any) -> None:
        super().__init__(*columns, **options)
        self.reports = PipedReports(self.console, every_s)

    def update(self, task_id: rich.progress.TaskID, **changes: Any) -> None:
        super().update(task_id, **changes)
        self._report()

    def advance(self, task_id: rich.progress.TaskID, advance: float = 1) -> None:
        super().advance(task_id, advance)
        self._report()

    def _report(self) -> None:
        if not self.disable and self.reports.due():
            self.console.print(self.get_renderable())
