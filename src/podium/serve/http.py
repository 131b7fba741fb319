"""What Podium's OpenAI-compatible servers share: chat messages as requests carry them, OpenAI-style error bodies,
and running an application on a socket (in the foreground, or from a background thread for tests and benchmarks).

Errors have OpenAI's shape ``{"error": {"message", "type", "param", "code"}}``: 400 ``invalid_request_error``
for malformed requests, 401 ``authentication_error``, 404 ``not_found_error`` for unknown models, 429
``rate_limit_error``; the official clients raise their matching exception classes on them.
"""

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

import uvicorn
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict
from starlette.types import ASGIApp

from podium.core.messages import Message

STARTUP_TIMEOUT_S = 30.0
"""How long :func:`serving_in_thread` waits for the server to listen."""


class TextPart(BaseModel):
    """A text part of a message's content (the only kind of part these servers take)."""

    model_config = ConfigDict(extra="ignore")
    type: Literal["text"]
    text: str


class ChatMessage(BaseModel):
    """One message of a chat completion request; content is a string or a list of text parts."""

    model_config = ConfigDict(extra="ignore")
    role: Literal["system", "user", "assistant", "tool", "developer"]
    content: str | list[TextPart] | None = ""

    @property
    def text(self) -> str:
        """The content as one string (text parts joined)."""
        if isinstance(self.content, list):
            return "".join(part.text for part in self.content)
        return self.content or ""

    def message(self) -> Message:
        """As Podium's message (``developer`` is a system message)."""
        return Message(role="system" if self.role == "developer" else self.role, content=self.text)


class ApiError(Exception):
    """An error answered with an OpenAI-style body."""

    def __init__(
        self, status: int, message: str, kind: str, *, param: str | None = None, code: str | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind
        self.param = param
        self.code = code
        self.headers: dict[str, str] = {}

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}}

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers)


def invalid_request(message: str, param: str | None = None) -> ApiError:
    """A 400 ``invalid_request_error``."""
    return ApiError(400, message, "invalid_request_error", param=param)


def describe_validation(error: RequestValidationError) -> tuple[str, str | None]:
    """A readable message for a request body that fails validation, and the first offending parameter."""
    problems, first = [], None
    for problem in error.errors():
        location = [str(part) for part in problem.get("loc", ()) if part != "body"]
        where = ".".join(location) or "body"
        first = first or where
        problems.append(f"{where}: {problem.get('msg', 'invalid')}")
    return "; ".join(problems) or "invalid request body", first


def openai_app(title: str) -> FastAPI:
    """A FastAPI application whose errors are OpenAI-style bodies."""
    app = FastAPI(title=title, version="1")

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, error: RequestValidationError) -> JSONResponse:
        message, param = describe_validation(error)
        return invalid_request(message, param).response()

    @app.exception_handler(ApiError)
    async def _api_error(_: Request, error: ApiError) -> JSONResponse:
        return error.response()

    @app.exception_handler(Exception)
    async def _bug(_: Request, error: Exception) -> JSONResponse:
        return ApiError(500, f"{type(error).__name__}: {error}", "server_error").response()

    return app


def listening_socket(host: str, port: int) -> socket.socket:
    """A bound socket whose connections send small writes at once (TCP_NODELAY): uvicorn writes response
    headers and body separately, and with Nagle's algorithm the body waited ~40 ms for the client's delayed
    ACK on every request (measured: 44 ms vs 1.2 ms per trivial request)."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((host, port))
    return sock


def run_app(app: ASGIApp, *, host: str, port: int) -> None:
    """Serve ``app`` (an ASGI application) until interrupted."""
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    server.run(sockets=[listening_socket(host, port)])


@contextmanager
def app_in_thread(app: FastAPI, *, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
    """Serve ``app`` from a background thread (port 0: a free one); yields the base URL ``http://…/v1``."""
    sock = listening_socket(host, port)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the server did not start")
        time.sleep(0.01)
    try:
        yield f"http://{host}:{sock.getsockname()[1]}/v1"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()
