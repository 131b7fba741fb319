"""One small interface for every model: ``await backend.generate(messages) -> Generation``."""

from typing import Any, Protocol, runtime_checkable

from pydantic import NonNegativeFloat, NonNegativeInt

from podium.core.calls import Status
from podium.core.messages import Message
from podium.core.record import Record
from podium.errors import PodiumError


class Generation(Record):
    """A model's reply and its accounting."""

    text: str
    """The completion."""
    model: str
    """The model that produced it (as the backend names it)."""
    input_tokens: NonNegativeInt = 0
    """Prompt tokens."""
    output_tokens: NonNegativeInt = 0
    """Completion tokens."""
    usd: NonNegativeFloat = 0.0
    """Price of this generation."""
    latency_s: NonNegativeFloat = 0.0
    """Wall-clock seconds of the request, retries included."""
    finish_reason: str | None = None
    """Why generation stopped (``stop``, ``length``…), when the backend says."""


class BackendError(PodiumError):
    """A generation failed for good (retries exhausted, bad request, time limit): EXEC_ERR or TIMEOUT."""

    def __init__(self, message: str, status: Status = Status.EXEC_ERR) -> None:
        super().__init__(message)
        self.status = status


@runtime_checkable
class ChatBackend(Protocol):
    """A chat model. Implementations: HTTP (OpenAI-compatible), local transformers, scripted replay."""

    model: str
    """The model's name, used for pricing and records."""

    async def generate(
        self,
        messages: list[Message],
        *,
        max_tokens: int = 512,
        temperature: float = 0.0,
        stop: list[str] | None = None,
        json_schema: dict[str, Any] | None = None,
        regex: str | None = None,
    ) -> Generation:
        """Complete the conversation; with ``json_schema`` the reply is JSON matching it (constrained
        decoding where the backend supports it). ``regex`` constrains the reply to a regular expression and
        may only be given to a backend whose ``supports_regex`` is true. Raises :class:`BackendError` on
        failure."""
        ...
