"""One base class for every model: ``await backend.generate(messages) -> Generation``.

:meth:`ChatBackend.generate` is written once, here: it checks the request against the backend's declared
capabilities, times the call, checks the reply and prices it. A backend only implements :meth:`_complete`,
which turns one request into a :class:`Completion` (the text and the token counts it measured or was told).

Every reply is data, never a crash: a completion of the wrong types or ranges, or any exception of a backend,
becomes a :class:`BackendError` (EXEC_ERR, or TIMEOUT) with a reason. Usage is charged at most at what was
asked for: completion tokens at the request's ``max_tokens``, prompt tokens at :meth:`prompt_token_bound`
(the tokenizer's count where the backend has one, else the proven UTF-8 bound of :mod:`podium.costs.bounds`);
a generation whose reported usage was cut says so in :attr:`Generation.clipped`. The text is bounded by the same
request: a reply longer than ``max_tokens`` tokens can decode to (:func:`~podium.costs.bounds.completion_chars_bound`)
is cut there, its finish reason set to ``length`` and its length as returned kept in :attr:`Generation.text_chars`,
so that a server sending megabytes while claiming a few tokens costs no more memory or storage than an honest one.
"""

import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import NonNegativeFloat, NonNegativeInt

from podium.core.calls import CallUsage, Status, TokenUsage
from podium.core.messages import Message
from podium.costs.bounds import CostBound, completion_chars_bound, generation_bound, prompt_token_bound
from podium.costs.prices import ModelPrice
from podium.errors import PodiumError

log = logging.getLogger(__name__)

FREE = ModelPrice(input_per_mtok=0.0, output_per_mtok=0.0)
"""The price of a backend that was given none."""


class Generation(TokenUsage):
    """A model's reply and its accounting (its tokens, what they cost and the price they were charged at)."""

    text: str
    """The completion."""
    model: str
    """The model that produced it (as the backend names it)."""
    latency_s: NonNegativeFloat = 0.0
    """Wall-clock seconds of the request, retries included."""
    finish_reason: str | None = None
    """Why generation stopped (``stop``, ``length``…), when the backend says."""
    clipped: str | None = None
    """Set when the backend reported more tokens than the request allowed: what it said and what was charged."""
    choice_probs: dict[str, float] | None = None
    """For a reply constrained to a finite set of choices, by a backend that can tell: each choice's probability
    under the model (temperature 1)."""
    text_chars: NonNegativeInt | None = None
    """Set when the reply was longer than the request's ``max_tokens`` can decode to and ``text`` was cut to that
    bound: its length as the backend returned it."""

    @property
    def usage(self) -> CallUsage:
        """The generation's accounting as a call's."""
        return CallUsage(**self.token_usage().model_dump(), latency_s=self.latency_s, clipped=self.clipped is not None)


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
    top_p: float = 1.0
    """Nucleus sampling: sample from the smallest set of tokens whose probability reaches ``top_p``."""
    seed: int | None = None
    """Seed of a sampled generation (``None``: the backend's own)."""
    json_schema: dict[str, Any] | None = None
    """Constrain the reply to JSON matching this schema (where the backend can; otherwise it is a hint)."""
    regex: str | None = None
    """Constrain the reply to this regular expression (only for a backend whose ``supports_regex`` is true)."""
    choices: tuple[str, ...] = ()
    """Constrain the reply to exactly one of these strings (only for a backend whose ``supports_choices`` is
    true): a policy whose next action is one of a few words."""


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
    choice_probs: dict[str, float] | None = None
    """With ``choices`` in the request: each choice's probability under the model, where the backend knows it."""


class ChatBackend(ABC):
    """A chat model. Subclasses: HTTP (OpenAI-compatible), local transformers, scripted replies."""

    supports_regex: bool = False
    """Whether the backend can constrain a reply to a regular expression (grammar-constrained actions); a
    declared capability, set by the class or, where it depends on the server, by the instance."""
    supports_choices: bool = False
    """Whether the backend can pick a reply among given strings (and tell their probabilities)."""
    writes_text: bool = True
    """Whether the backend writes free text; one that only picks among given strings (a fitted router) is given
    the choices of every turn whose action is one of a few words, constrained decoding or not."""

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
        top_p: float = 1.0,
        seed: int | None = None,
        choices: Sequence[str] = (),
    ) -> Generation:
        """Complete the conversation; with ``json_schema`` the reply is JSON matching it (constrained decoding
        where the backend supports it), with ``regex`` it matches the expression, with ``choices`` it is one of
        them; ``top_p`` and ``seed`` shape sampling (``temperature`` above 0). Raises :class:`BackendError` on
        failure."""
        if regex is not None and not self.supports_regex:
            raise BackendError(f"backend '{self.model}' cannot constrain replies to a regular expression")
        if choices and not self.supports_choices:
            raise BackendError(f"backend '{self.model}' cannot constrain replies to a set of choices")
        if sum(constraint is not None for constraint in (json_schema, regex, choices or None)) > 1:
            raise BackendError("give one of json_schema, regex or choices")
        request = GenerationRequest(
            list(messages), max_tokens, temperature, tuple(stop or ()), top_p, seed, json_schema, regex, tuple(choices)
        )
        started = time.perf_counter()
        try:
            completion = await self._complete(request)
        except BackendError:
            raise
        except TimeoutError as error:
            raise BackendError(f"{self.model}: no reply in time ({error})", Status.TIMEOUT) from error
        except Exception as error:  # a backend's own failure is the caller's EXEC_ERR, not a crash
            raise BackendError(f"{self.model}: backend failed: {type(error).__name__}: {error}") from error
        return self._generation(request, self._checked(completion, request), time.perf_counter() - started)

    def prompt_token_bound(self, messages: Sequence[Message]) -> int:
        """The most prompt tokens ``messages`` can take on this model: the proven UTF-8 bound, unless a backend
        with the model's tokenizer counts them."""
        return prompt_token_bound(messages)

    def generation_bound(self, messages: Sequence[Message], max_tokens: int) -> CostBound:
        """The most one generation on ``messages`` can cost at this backend's price: what budgets reserve."""
        return generation_bound(self.price, messages, max_tokens, self.prompt_token_bound(messages))

    def _checked(self, completion: Any, request: GenerationRequest) -> Completion:
        """``completion`` if its fields have the right types and ranges (and it is one of the request's choices);
        else the reason, as EXEC_ERR."""
        problem = _completion_problem(completion)
        if problem is None and request.choices and completion.text not in request.choices:
            problem = f"the reply {completion.text[:80]!r} is none of the choices {list(request.choices)}"
        if problem is not None:
            raise BackendError(f"{self.model}: malformed reply: {problem}")
        return completion  # type: ignore[no-any-return]

    def _generation(self, request: GenerationRequest, completion: Completion, latency_s: float) -> Generation:
        prompt_limit = self.prompt_token_bound(request.messages)
        input_tokens = min(completion.input_tokens, prompt_limit)
        output_tokens = min(completion.output_tokens, request.max_tokens)
        clipped = None
        if (input_tokens, output_tokens) != (completion.input_tokens, completion.output_tokens):
            clipped = (
                f"reported {completion.input_tokens} prompt and {completion.output_tokens} completion tokens; "
                f"charged {input_tokens} (the prompt's bound) and {output_tokens} (max_tokens)"
            )
            log.warning("%s: %s", self.model, clipped)
        text, finish_reason, text_chars = completion.text, completion.finish_reason, None
        longest = completion_chars_bound(request.max_tokens)
        if len(text) > longest:
            text, finish_reason, text_chars = text[:longest], "length", len(text)
            log.warning(
                "%s: a reply of %d characters was cut to %d, the most max_tokens=%d can decode to",
                self.model, text_chars, longest, request.max_tokens,
            )  # fmt: skip
        return Generation(
            text=text,
            model=completion.model or self.model,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            usd=self.price.cost(input_tokens, output_tokens),
            latency_s=completion.latency_s if completion.latency_s is not None else latency_s,
            finish_reason=finish_reason,
            clipped=clipped,
            price=self.price.describe(),
            choice_probs=completion.choice_probs,
            text_chars=text_chars,
        )

    @abstractmethod
    async def _complete(self, request: GenerationRequest) -> Completion:
        """Answer one request; raise :class:`BackendError` when it fails."""

    def repriced(self, price: ModelPrice) -> "ChatBackend":
        """The same model charged at ``price`` (a per-instance price sheet); it shares this backend's state."""
        return RepricedBackend(self, price)

    def weights_changed(self) -> None:
        """The model's weights were updated in place (an RL step on live weights): forget whatever was computed
        with the old ones. Backends that cache nothing of their weights have nothing to forget."""
        return


class RepricedBackend(ChatBackend):
    """Another backend's model at another price."""

    def __init__(self, inner: ChatBackend, price: ModelPrice) -> None:
        base = inner.inner if isinstance(inner, RepricedBackend) else inner
        super().__init__(base.model, price)
        self.inner = base
        self.supports_regex = base.supports_regex
        self.supports_choices = base.supports_choices

    async def _complete(self, request: GenerationRequest) -> Completion:
        return await self.inner._complete(request)

    def prompt_token_bound(self, messages: Sequence[Message]) -> int:
        return self.inner.prompt_token_bound(messages)

    def weights_changed(self) -> None:
        self.inner.weights_changed()


def _completion_problem(completion: Any) -> str | None:
    """What is wrong with a backend's completion, or ``None``."""
    if not isinstance(completion, Completion):
        return f"expected a Completion, got {type(completion).__name__}"
    if not isinstance(completion.text, str):
        return f"the text is {type(completion.text).__name__}, not a string"
    for name in ("input_tokens", "output_tokens"):
        count = getattr(completion, name)
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            return f"{name} is {count!r}, not a non-negative integer"
    for name in ("finish_reason", "model"):
        value = getattr(completion, name)
        if value is not None and not isinstance(value, str):
            return f"{name} is {type(value).__name__}, not a string"
    latency = completion.latency_s
    if latency is not None and (isinstance(latency, bool) or not isinstance(latency, int | float) or latency < 0):
        return f"latency_s is {latency!r}, not a non-negative number"
    probs = completion.choice_probs
    if probs is not None and not all(isinstance(p, float) and 0.0 <= p <= 1.0 for p in probs.values()):
        return "choice_probs holds a value that is not a probability"
    return None
