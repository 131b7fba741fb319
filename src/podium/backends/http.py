"""Any OpenAI-compatible chat endpoint (vLLM, SGLang, llama.cpp server, OpenAI, Together…), through the
official ``openai`` client: its bounded retries with exponential backoff on connection errors, 408, 409,
429 and 5xx honour Retry-After; Podium adds a per-backend concurrency limit, time limits no server can stretch,
a size limit on replies, a check of every reply's shape, pricing and the mapping of every failure to EXEC_ERR
or TIMEOUT.

Time limits: each HTTP attempt ends within ``timeout_s`` in all (headers and the whole body, so a server that
trickles one byte at a time is cut off like a silent one), and the whole generation, retries and backoff
included, within ``deadline_s``. A reply is read only up to ``max_reply_bytes``, or the most a completion of the
request's ``max_tokens`` can take as JSON (:func:`reply_bytes_bound`) if that is less, then parsed as JSON and
checked field by field (:func:`completion_from_body`): anything else than a chat completion with a string
``content`` and non-negative integer ``usage`` counts is EXEC_ERR with the reason. (A body under the bound whose
text is still longer than ``max_tokens`` can decode to is cut by the base class, see
:mod:`podium.backends.base`.)
"""

import asyncio
import json
import os
from collections.abc import AsyncIterator
from contextvars import ContextVar
from typing import Any, Literal

import httpx
from pydantic import Field, NonNegativeInt, PositiveFloat, PositiveInt

from podium.backends.base import BackendError, ChatBackend, Completion, GenerationRequest
from podium.concurrency import LoopSemaphore
from podium.config import Config
from podium.core.calls import Status
from podium.core.jsonsafe import replace_surrogates
from podium.costs.bounds import completion_chars_bound
from podium.costs.prices import ModelPrice

NO_KEY = "EMPTY"
"""Sent when no key is configured: local servers ignore it, and the client refuses an empty key."""
JSON_BYTES_PER_CHAR = 12
"""The most bytes JSON writes one character in: one outside the Basic Multilingual Plane as two ``\\u`` escapes."""
REPLY_OVERHEAD_BYTES = 64 * 1024
"""What a chat completion holds besides its text, generously: ids, model name, finish reason, usage."""


def reply_bytes_bound(max_tokens: int) -> int:
    """The most bytes a chat completion of at most ``max_tokens`` tokens can take (its text, and a reasoning text
    within the same tokens, escaped as JSON at worst)."""
    return completion_chars_bound(max_tokens) * JSON_BYTES_PER_CHAR + REPLY_OVERHEAD_BYTES


_REPLY_LIMIT: ContextVar[tuple[int, str] | None] = ContextVar("podium_reply_limit", default=None)
"""The request's own limit on its reply (bytes, and how to name it), when tighter than ``max_reply_bytes``."""


class HttpBackendConfig(Config):
    """An OpenAI-compatible endpoint."""

    model: str
    """Model name sent in requests (and used for pricing unless ``price_model`` is set)."""
    base_url: str = Field(min_length=1)
    """Endpoint root, e.g. ``http://127.0.0.1:8000/v1`` or ``https://api.together.xyz/v1``."""
    api_key_env: str | None = None
    """Environment variable holding the API key; ``None`` for servers that need none."""
    timeout_s: PositiveFloat = 60.0
    """Time limit of one HTTP attempt."""
    deadline_s: PositiveFloat = 300.0
    """Time limit of one generation including every retry and backoff."""
    max_retries: NonNegativeInt = 3
    """Retries after the first attempt on connection errors, 408, 409, 429 and 5xx."""
    max_reply_bytes: PositiveInt = 16 * 1024 * 1024
    """Largest reply body read; a larger one is EXEC_ERR (a chat completion is kilobytes)."""
    max_concurrent: PositiveInt = 8
    """Most requests in flight to this endpoint."""
    structured_outputs: Literal["none", "vllm"] = "none"
    """Whether the server constrains replies to a regular expression: ``vllm`` sends vLLM's
    ``structured_outputs.regex`` (vLLM ≥ 0.12), so orchestrator actions follow the policy's grammar; ``none``
    means replies are parsed unconstrained."""


class HttpBackend(ChatBackend):
    """Chat completions over HTTP."""

    def __init__(self, config: HttpBackendConfig, price: ModelPrice | None = None) -> None:
        super().__init__(config.model, price)
        self.config = config
        api_key = NO_KEY
        if config.api_key_env is not None:
            api_key = os.environ.get(config.api_key_env, "")
            if not api_key:
                raise BackendError(f"the API key for {config.base_url} is missing: set {config.api_key_env}")
        import openai  # here, not at module import: it takes seconds, and `podium --help` must not pay it

        self._client = openai.AsyncOpenAI(
            base_url=config.base_url,
            api_key=api_key,
            timeout=config.timeout_s,
            max_retries=config.max_retries,
            http_client=_BoundedClient(config.timeout_s, config.max_reply_bytes),
        )
        self._in_flight = LoopSemaphore(config.max_concurrent)
        self.supports_regex = config.structured_outputs == "vllm"

    async def unreachable(self) -> str | None:
        """Why the server cannot serve this backend's model (no connection, an error, the model not listed), or
        ``None``: one model listing, no retries (``podium check --online``)."""
        try:
            listed = await asyncio.wait_for(
                self._client.with_options(max_retries=0).models.list(), timeout=self.config.timeout_s
            )
        except Exception as error:  # any failure to list is the answer: the server cannot be used as configured
            return f"{self.config.base_url}: not reachable ({type(error).__name__}: {error})"
        served = [model.id for model in listed.data]
        if served and self.model not in served:
            return f"{self.config.base_url} does not serve '{self.model}' (it serves {', '.join(served[:8])})"
        return None

    async def _complete(self, request: GenerationRequest) -> Completion:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [
                {"role": m.role if m.role != "tool" else "user", "content": m.content} for m in request.messages
            ],
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
        }
        if request.stop:
            body["stop"] = list(request.stop)
        if request.top_p != 1.0:
            body["top_p"] = request.top_p
        if request.seed is not None:
            body["seed"] = request.seed
        if request.json_schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "reply", "schema": request.json_schema, "strict": True},
            }
        if request.regex is not None:
            body["extra_body"] = {"structured_outputs": {"regex": request.regex}}
        bound = reply_bytes_bound(request.max_tokens)
        limit = (bound, f"{bound} bytes, the most a reply of max_tokens={request.max_tokens} takes")
        limited = _REPLY_LIMIT.set(limit if bound < self.config.max_reply_bytes else None)
        try:
            return await self._send(body)
        finally:
            _REPLY_LIMIT.reset(limited)

    async def _send(self, body: dict[str, Any]) -> Completion:
        import openai  # loaded by __init__ already

        async with self._in_flight:
            try:
                raw = await asyncio.wait_for(
                    self._client.chat.completions.with_raw_response.create(**body), timeout=self.config.deadline_s
                )
            except (TimeoutError, openai.APITimeoutError) as error:
                raise BackendError(f"{self.config.base_url}: no reply in time ({error})", Status.TIMEOUT) from error
            except openai.APIStatusError as error:
                refused = error.response.headers.get(REFUSED_HEADER)
                if refused:  # our own refusal of the reply (too large), not the server's status
                    raise BackendError(f"{self.config.base_url}: {refused}") from error
                raise BackendError(f"{self.config.base_url}: HTTP {error.status_code}: {error.message}") from error
            except openai.APIConnectionError as error:
                raise BackendError(f"{self.config.base_url}: connection failed: {error}") from error
            except (openai.APIResponseValidationError, ValueError) as error:
                raise BackendError(f"{self.config.base_url}: malformed response: {error}") from error
            reply = raw.http_response
            try:
                return completion_from_body(reply.headers.get("content-type", ""), reply.content)
            except ValueError as error:
                raise BackendError(f"{self.config.base_url}: malformed response: {error}") from error


class ReplyTooLarge(Exception):
    """A reply body longer than the backend's ``max_reply_bytes`` or the request's bound; not retried."""


REFUSED_HEADER = "x-podium-refused"
"""Header of the stand-in response for a reply Podium refused to read. The openai client retries any exception its
transport raises, so a refusal is handed back as a 413 response, which it does not retry."""


class _BoundedClient(httpx.AsyncClient):
    """An HTTP client whose every attempt gets its headers and whole body within ``seconds`` (else a read
    timeout, which the openai client retries like any timeout) and reads at most ``max_bytes`` of body."""

    def __init__(self, seconds: float, max_bytes: int) -> None:
        super().__init__(timeout=seconds, follow_redirects=True)
        self.seconds = seconds
        self.max_bytes = max_bytes

    async def send(self, request: httpx.Request, *, stream: bool = False, **options: Any) -> httpx.Response:
        deadline = asyncio.get_running_loop().time() + self.seconds
        try:
            async with asyncio.timeout_at(deadline):
                response = await super().send(request, stream=True, **options)
        except TimeoutError as error:
            raise httpx.ReadTimeout(f"no reply within {self.seconds:g} s", request=request) from error
        limit = _REPLY_LIMIT.get() or (self.max_bytes, f"max_reply_bytes={self.max_bytes}")
        declared = response.headers.get("content-length")
        response.stream = _LimitedBody(response.stream, deadline, limit, request)  # type: ignore[arg-type]
        if not stream:
            try:
                await response.aread()
            except ReplyTooLarge as error:
                await response.aclose()
                said = f"{error} (it declared {declared} bytes)" if declared else str(error)
                return httpx.Response(413, headers={REFUSED_HEADER: said}, request=request)
            except BaseException:
                await response.aclose()
                raise
        return response


class _LimitedBody(httpx.AsyncByteStream):
    """A reply body read against the attempt's deadline and size limit."""

    def __init__(
        self, inner: httpx.AsyncByteStream, deadline: float, limit: tuple[int, str], request: httpx.Request
    ) -> None:
        self.inner = inner
        self.deadline = deadline
        self.max_bytes, self.limit_name = limit
        """The most bytes read, and how to name that limit."""
        self.request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        chunks = self.inner.__aiter__()
        size = 0
        while True:
            try:
                async with asyncio.timeout_at(self.deadline):
                    chunk = await chunks.__anext__()
            except StopAsyncIteration:
                return
            except TimeoutError as error:
                raise httpx.ReadTimeout("the reply did not arrive in time", request=self.request) from error
            size += len(chunk)
            if size > self.max_bytes:
                raise ReplyTooLarge(f"the reply is larger than {self.limit_name}")
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


def completion_from_body(content_type: str, body: bytes) -> Completion:
    """The completion in a chat-completions reply, every field used checked; raises ValueError saying what is
    wrong. Surrogate escapes in the text become U+FFFD (:mod:`podium.core.jsonsafe`)."""
    if "json" not in content_type.lower():
        raise ValueError(f"content type {content_type or '(none)'!r} is not JSON")
    try:
        data = json.loads(body)
    except RecursionError as error:
        raise ValueError("the body is nested too deeply") from error
    if not isinstance(data, dict):
        raise ValueError(f"the body is a JSON {type(data).__name__}, not an object")
    if "error" in data and "choices" not in data:
        raise ValueError(f"the server reported an error: {str(data['error'])[:500]}")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ValueError("no choices")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise ValueError("the first choice has no message object")
    text = message.get("content")
    if not isinstance(text, str):
        refusal = message.get("refusal")
        if isinstance(refusal, str) and refusal:
            raise ValueError(f"the model refused: {refusal[:500]}")
        raise ValueError(f"the message content is {type(text).__name__}, not a string")
    finish_reason = choices[0].get("finish_reason")
    if finish_reason is not None and not isinstance(finish_reason, str):
        raise ValueError(f"finish_reason is {type(finish_reason).__name__}, not a string")
    model = data.get("model")
    return Completion(
        text=replace_surrogates(text),
        input_tokens=_count(data, "prompt_tokens"),
        output_tokens=_count(data, "completion_tokens"),
        finish_reason=finish_reason,
        model=model if isinstance(model, str) and model else None,
    )


def _count(data: dict[str, Any], name: str) -> int:
    usage = data.get("usage")
    if not isinstance(usage, dict):
        raise ValueError(f"usage is {type(usage).__name__}, not an object with token counts")
    count = usage.get(name)
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise ValueError(f"usage.{name} is {count!r}, not a non-negative integer")
    return count
