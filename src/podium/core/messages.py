"""Chat messages."""

from typing import Literal

from podium.core.record import Record

Role = Literal["system", "user", "assistant", "tool"]


class Message(Record):
    """One chat message, in the OpenAI chat shape."""

    role: Role
    """Who wrote it."""
    content: str
    """The text."""
    name: str | None = None
    """For ``tool`` messages: the tool that produced the observation."""
    tool_call_id: str | None = None
    """For ``tool`` messages: the id of the call this observation answers."""
