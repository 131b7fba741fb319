"""What an agent role, a primitive or an episode tool may know about the episode it serves: the question, the
history so far, the files attached to the episode, and the call being served with the round it belongs to.

The runtime sets :data:`current_episode` for each episode; asyncio tasks copy it, so concurrent episodes
never see each other's state.
"""

from contextvars import ContextVar
from dataclasses import dataclass

from podium.core.calls import ToolCall
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
    call: ToolCall | None = None
    """The call being served."""
    round: tuple[ToolCall, ...] = ()
    """Every call of the round it belongs to, in order (tools answered from outside the episode, such as a
    served client's, hand a round's calls out together)."""


current_episode: ContextVar[EpisodeContext | None] = ContextVar("podium_episode", default=None)
