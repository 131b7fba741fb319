"""One base class for every model: ``await backend.generate(messages) -> Generation``.

:meth:`ChatBackend.generate` is written once, here: it checks the request against the backend's declared
capabilities, times the call, checks the reply and prices it. A backend only implements :meth:`_complete`,
which turns one request into a :class:`Completion` (the text and the token counts it measured or was told).
"""

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from pydantic import NonNegativeFloat, NonNegativeInt

from podium.core.calls import Status
from podium.core.messages import Message
from podium.core.record import Record
from podium.costs.prices import ModelPrice
from podium.errors import PodiumError

FREE = ModelPrice(input_per_mtok=0.0, output_per_mtok=0.0)
"""The price of a backend that was given none."""


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


@dataclass(frozen=True)
class GenerationRequest:
    """What :meth:`ChatBackend.generate` asks of a backend, checked against its capabilities."""

    messages: list[Message]
    max_tokens: int = 512
    temperature: float = 0.0
    stop: tuple[str, ...] = ()
    json_schema: dict[str, Any] | None = None
    """Constrain the reply to JSON matching this schema (where the backend can; otherwise it is a hint)."""
    regex: str | None = None
    """Constrain the reply to this regular expression (only for a backend whose ``supports_regex`` is true)."""


@dataclass(frozen=True)
class Completion:
    """A backend's raw reply to one request, before pricing."""

    text: str
    input_tokens: int
    output_tokens: int
    finish_reason: str | None = None
    model: str | None = None
    """The model the server says answered, when it says."""
    latency_s: float | None = None
    """Latency the backend reports instead of the measured wall time (a replayed model's modelled latency)."""


class ChatBackend(ABC):
    """A chat model. Subclasses: HTTP (OpenAI-compatible), local transformers, scripted replies."""

    supports_regex: bool = False
    """Whether the backend can constrain a reply to a regular expression (grammar-constrained actions); a
    declared capability, set by the class or, where it depends on the server, by the instance."""

    def __init__(self, model: str, price: ModelPrice | None = None) -> None:
        self.model = model
        """The model's name, used for pricing and records."""
        self.price = price or FREE
        """Token prices charged for each generation."""

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
        """Complete the conversation; with ``json_schema`` the reply is JSON matching it (constrained decoding
        where the backend supports it), with ``regex`` it matches the expression. Raises :class:`BackendError`
        on failure."""
        if regex is not None and not self.supports_regex:
            raise BackendError(f"backend '{self.model}' cannot constrain replies to a regular expression")
        if regex is not None and json_schema is not None:
            raise BackendError("give json_schema or regex, not both")
        request = GenerationRequest(list(messages), max_tokens, temperature, tuple(stop or ()), json_schema, regex)
        started = time.perf_counter()
        completion = await self._complete(request)
        return Generation(
            text=completion.text,
            model=completion.model or self.model,
            input_tokens=completion.input_tokens,
            output_tokens=completion.output_tokens,
            usd=self.price.cost(completion.input_tokens, completion.output_tokens),
            latency_s=completion.latency_s if completion.latency_s is not None else time.perf_counter() - started,
            finish_reason=completion.finish_reason,
        )

    @abstractmethod
    async def _complete(self, request: GenerationRequest) -> Completion:
        """Answer one request; raise :class:`BackendError` when it fails."""

    def repriced(self, price: ModelPrice) -> "ChatBackend":
        """The same model charged at ``price`` (a per-instance price sheet); it shares this backend's state."""
        return RepricedBackend(self, price)


class RepricedBackend(ChatBackend):
    """Another backend's model at another price."""

    def __init__(self, inner: ChatBackend, price: ModelPrice) -> None:
        base = inner.inner if isinstance(inner, RepricedBackend) else inner
        super().__init__(base.model, price)
        self.inner = base
        self.supports_regex = base.supports_regex

    async def _complete(self, request: GenerationRequest) -> Completion:
        return await self.inner._complete(request)
