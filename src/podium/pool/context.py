"""What an agent role may know about the episode it serves: the question and the history so far.

The runtime sets :data:`current_episode` for each episode; asyncio tasks copy it, so concurrent episodes
never see each other's state.
"""

from contextvars import ContextVar
from dataclasses import dataclass


@dataclass(frozen=True)
class EpisodeContext:
    """The orchestrator's task and the transcript of what has happened."""

    question: str
    """The original problem (what roles answer when no subtask is given)."""
    history: str = ""
    """The conversation so far, as text, for roles that review it."""


current_episode: ContextVar[EpisodeContext | None] = ContextVar("podium_episode", default=None)
