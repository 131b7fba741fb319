"""Any OpenAI-compatible chat endpoint (vLLM, SGLang, llama.cpp server, OpenAI, Together…), through the
official ``openai`` client: its bounded retries with exponential backoff on connection errors, 408, 409,
429 and 5xx honour Retry-After; Podium adds a per-backend concurrency limit, an overall deadline, pricing
and the mapping of every failure to EXEC_ERR or TIMEOUT."""

import asyncio
import os
from typing import Any, Literal

from pydantic import NonNegativeInt, PositiveFloat, PositiveInt

from podium.backends.base import BackendError, ChatBackend, Completion, GenerationRequest
from podium.concurrency import LoopSemaphore
from podium.config import Config
from podium.core.calls import Status
from podium.costs.prices import ModelPrice

NO_KEY = "EMPTY"
"""Sent when no key is configured: local servers ignore it, and the client refuses an empty key."""


class HttpBackendConfig(Config):
    """An OpenAI-compatible endpoint."""

    model: str
    """Model name sent in requests (and used for pricing unless ``price_model`` is set)."""
    base_url: str
    """Endpoint root, e.g. ``http://127.0.0.1:8000/v1`` or ``https://api.together.xyz/v1``."""
    api_key_env: str | None = None
    """Environment variable holding the API key; ``None`` for servers that need none."""
    timeout_s: PositiveFloat = 60.0
    """Time limit of one HTTP attempt."""
    deadline_s: PositiveFloat = 300.0
    """Time limit of one generation including every retry and backoff."""
    max_retries: NonNegativeInt = 3
    """Retries after the first attempt on connection errors, 408, 409, 429 and 5xx."""
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
            base_url=config.base_url, api_key=api_key, timeout=config.timeout_s, max_retries=config.max_retries
        )
        self._in_flight = LoopSemaphore(config.max_concurrent)
        self.supports_regex = config.structured_outputs == "vllm"

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
        if request.json_schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "reply", "schema": request.json_schema, "strict": True},
            }
        if request.regex is not None:
            body["extra_body"] = {"structured_outputs": {"regex": request.regex}}
        import openai  # loaded by __init__ already

        async with self._in_flight:
            try:
                response = await asyncio.wait_for(
                    self._client.chat.completions.create(**body), timeout=self.config.deadline_s
                )
            except (TimeoutError, openai.APITimeoutError) as error:
                raise BackendError(f"{self.config.base_url}: no reply in time ({error})", Status.TIMEOUT) from error
            except openai.APIStatusError as error:
                raise BackendError(f"{self.config.base_url}: HTTP {error.status_code}: {error.message}") from error
            except openai.APIConnectionError as error:
                raise BackendError(f"{self.config.base_url}: connection failed: {error}") from error
            except (openai.APIResponseValidationError, ValueError) as error:
                raise BackendError(f"{self.config.base_url}: malformed response: {error}") from error
        return self._completion(response)

    def _completion(self, response: Any) -> Completion:
        choices = getattr(response, "choices", None)
        if not choices or choices[0].message is None:
            raise BackendError(f"{self.config.base_url}: malformed response: no choices")
        usage = response.usage
        return Completion(
            text=choices[0].message.content or "",
            input_tokens=usage.prompt_tokens if usage else 0,
            output_tokens=usage.completion_tokens if usage else 0,
            finish_reason=choices[0].finish_reason,
            model=response.model or None,
        )
