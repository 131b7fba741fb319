"""``podium serve-model``: any backend behind an OpenAI-compatible HTTP API on 127.0.0.1.

Endpoints: ``GET /v1/models``, ``GET /v1/models/{model}`` and ``POST /v1/chat/completions`` (non-streaming;
``response_format`` of type ``json_schema`` is honoured with constrained decoding where the backend has it,
``json_object`` accepts any JSON object). Errors use OpenAI's shape (:mod:`podium.serve.http`).
"""

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

from fastapi import FastAPI
from pydantic import BaseModel, ConfigDict, Field

from podium.backends.base import BackendError, ChatBackend, Generation
from podium.core.calls import Status
from podium.pool.choice import WorkerChoice
from podium.serve.http import ApiError, ChatMessage, Listen, app_in_thread, invalid_request, openai_app, run_app

ANY_JSON_OBJECT: dict[str, Any] = {"type": "object"}


class ModelServeConfig(WorkerChoice, Listen):
    """One worker of a pool served as an OpenAI-compatible API."""


class ResponseFormat(BaseModel):
    model_config = ConfigDict(extra="ignore")
    type: Literal["text", "json_object", "json_schema"] = "text"
    json_schema: dict[str, Any] | None = None


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")
    model: str | None = None
    messages: list[ChatMessage] = Field(min_length=1)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    stop: str | list[str] | None = None
    response_format: ResponseFormat | None = None
    stream: bool = False


def create_app(backend: ChatBackend, *, default_max_tokens: int = 512) -> FastAPI:
    """The HTTP application serving ``backend``."""
    app = openai_app("Podium model server")

    served = {"id": backend.model, "object": "model", "owned_by": "podium"}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [served]}

    @app.get("/v1/models/{model:path}")
    async def model(model: str) -> dict[str, Any]:
        if model != backend.model:
            raise not_served(model)
        return served

    @app.post("/v1/chat/completions")
    async def chat_completions(request: ChatRequest) -> dict[str, Any]:
        if request.stream:
            raise invalid_request("streaming is not supported", "stream")
        if request.model not in (None, backend.model):
            raise not_served(request.model)
        stop = [request.stop] if isinstance(request.stop, str) else request.stop
        try:
            generation = await backend.generate(
                [message.message() for message in request.messages],
                max_tokens=request.max_completion_tokens or request.max_tokens or default_max_tokens,
                temperature=request.temperature,
                stop=stop,
                json_schema=requested_schema(request.response_format),
            )
        except BackendError as error:
            status = 504 if error.status is Status.TIMEOUT else 500
            raise ApiError(status, str(error), "backend_error") from error
        return completion_body(generation)

    def not_served(model: str) -> ApiError:
        return ApiError(
            404, f"model '{model}' is not served here; try '{backend.model}'", "not_found_error",
            param="model", code="model_not_found",
        )  # fmt: skip

    return app


def requested_schema(response_format: ResponseFormat | None) -> dict[str, Any] | None:
    """The JSON schema a request's ``response_format`` asks for (``json_object``: any object)."""
    if response_format is not None and response_format.type == "json_schema":
        return (response_format.json_schema or {}).get("schema", ANY_JSON_OBJECT)
    if response_format is not None and response_format.type == "json_object":
        return ANY_JSON_OBJECT
    return None


def completion_body(generation: Generation) -> dict[str, Any]:
    """A generation as an OpenAI ``chat.completion`` object."""
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": generation.model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": generation.text},
                "finish_reason": generation.finish_reason or "stop",
            }
        ],
        "usage": {
            "prompt_tokens": generation.input_tokens,
            "completion_tokens": generation.output_tokens,
            "total_tokens": generation.input_tokens + generation.output_tokens,
        },
    }


def serve(backend: ChatBackend, *, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Serve ``backend`` until interrupted."""
    run_app(create_app(backend), host=host, port=port)


@contextmanager
def serving_in_thread(backend: ChatBackend, *, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
    """Serve ``backend`` from a background thread (port 0: a free one); yields the base URL ``http://…/v1``."""
    with app_in_thread(create_app(backend), host=host, port=port) as url:
        yield url
