"""What an agent role or a primitive may know about the episode it serves: the question, the history so far and
the files attached to the episode.

The runtime sets :data:`current_episode` for each episode; asyncio tasks copy it, so concurrent episodes
never see each other's state.
"""

from contextvars import ContextVar
from dataclasses import dataclass

from podium.pool.resources import Attachment


@dataclass(frozen=True)
class EpisodeContext:
    """The orchestrator's task and the transcript of what has happened."""

    question: str
    """The original problem (what roles answer when no subtask is given)."""
    history: str = ""
    """The conversation so far, as text, for roles that review it."""
    attachments: tuple[Attachment, ...] = ()
    """Files attached to this episode (on top of the pool's), for the primitives that read them."""


current_episode: ContextVar[EpisodeContext | None] = ContextVar("podium_episode", default=None)
