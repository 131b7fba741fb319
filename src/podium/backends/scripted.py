"""A backend that replays given replies: for tests, demos of a fixed plan, and replaying recorded runs."""

from collections.abc import Callable, Iterable

from podium.backends.base import BackendError, ChatBackend, Completion, GenerationRequest
from podium.core.messages import Message
from podium.costs.prices import ModelPrice

Reply = str | Callable[[list[Message]], str]


class ScriptedBackend(ChatBackend):
    """Answers each request with the next scripted reply (a string, or a function of the messages).

    Token counts are whitespace-separated words, so accounting paths are exercised with plausible numbers.
    With ``supports_regex`` it accepts (and records in ``regexes``) the grammar a constrained run sends; the
    replies are not checked against it. With ``supports_choices`` it accepts a set of choices (recorded in
    ``choices``); a reply outside the set is a malformed reply, as from any backend.
    """

    def __init__(
        self,
        replies: Iterable[Reply],
        *,
        model: str = "scripted",
        repeat_last: bool = False,
        price: ModelPrice | None = None,
        supports_regex: bool = False,
        supports_choices: bool = False,
    ) -> None:
        super().__init__(model, price)
        self.supports_regex = supports_regex
        self.supports_choices = supports_choices
        self.regexes: list[str | None] = []
        self.choices: list[tuple[str, ...]] = []
        self.replies = list(replies)
        self.repeat_last = repeat_last
        self.requests: list[list[Message]] = []

    async def _complete(self, request: GenerationRequest) -> Completion:
        index = len(self.requests)
        self.requests.append(list(request.messages))
        self.regexes.append(request.regex)
        self.choices.append(request.choices)
        if index >= len(self.replies):
            if not (self.repeat_last and self.replies):
                raise BackendError(f"scripted backend '{self.model}' has no reply left for request {index + 1}")
            index = len(self.replies) - 1
        reply = self.replies[index]
        text = reply(request.messages) if callable(reply) else reply
        input_tokens = sum(len(m.content.split()) for m in request.messages)
        return Completion(text, input_tokens, len(text.split()), "stop")
