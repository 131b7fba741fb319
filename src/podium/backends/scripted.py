"""A backend that replays given replies: for tests, demos of a fixed plan, and replaying recorded runs."""

from collections.abc import Callable, Iterable
from typing import Any

from podium.backends.base import BackendError, Generation
from podium.core.messages import Message
from podium.pool.pricing import ModelPrice

Reply = str | Callable[[list[Message]], str]


class ScriptedBackend:
    """Answers each request with the next scripted reply (a string, or a function of the messages).

    Token counts are whitespace-separated words, so accounting paths are exercised with plausible numbers.
    With ``supports_regex`` it accepts (and records in ``regexes``) the grammar a constrained run sends; the
    replies are not checked against it.
    """

    def __init__(
        self,
        replies: Iterable[Reply],
        *,
        model: str = "scripted",
        repeat_last: bool = False,
        price: ModelPrice | None = None,
        supports_regex: bool = False,
    ) -> None:
        self.model = model
        self.supports_regex = supports_regex
        self.regexes: list[str | None] = []
        self.price = price or ModelPrice(input_per_mtok=0.0, output_per_mtok=0.0)
        self.replies = list(replies)
        self.repeat_last = repeat_last
        self.requests: list[list[Message]] = []

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
        if regex is not None and not self.supports_regex:
            raise BackendError(f"scripted backend '{self.model}' was not set up to accept regex constraints")
        index = len(self.requests)
        self.requests.append(list(messages))
        self.regexes.append(regex)
        if index >= len(self.replies):
            if not (self.repeat_last and self.replies):
                raise BackendError(f"scripted backend '{self.model}' has no reply left for request {index + 1}")
            index = len(self.replies) - 1
        reply = self.replies[index]
        text = reply(messages) if callable(reply) else reply
        input_tokens = sum(len(m.content.split()) for m in messages)
        output_tokens = len(text.split())
        return Generation(
            text=text,
            model=self.model,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            usd=self.price.cost(input_tokens, output_tokens),
            finish_reason="stop",
        )
