"""What Podium's OpenAI-compatible servers share: chat messages as requests carry them, OpenAI-style error bodies,
request bodies checked before any handler sees them, and running an application on a socket (in the foreground,
or from a background thread for tests and benchmarks).

Errors have OpenAI's shape ``{"error": {"message", "type", "param", "code"}}``: 400 ``invalid_request_error``
for malformed requests, 401 ``authentication_error``, 404 ``not_found_error`` for unknown models, 404
``unknown_url`` for a path the server does not answer and 405 ``method_not_allowed`` for a method it does not
answer there (both naming the routes it has), 413 for a body over the size limit, 429 ``rate_limit_error``; the
official clients raise their matching exception classes on them. Every error response is told to the
application's ``refused`` hook once, wherever it arose (a body check, a route, a dependency), so that a server
can count and log every refusal. A JSON body holding NaN or an infinite number (``NaN``, ``Infinity``,
``1e309``…), which JSON does not have, is a 400 naming the field; responses are written without them.
"""

import json
import math
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Literal, TypeVar

import uvicorn
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.types import Message as AsgiMessage

from podium.config import Config
from podium.core.messages import Message

STARTUP_TIMEOUT_S = 30.0
"""How long :func:`serving_in_thread` waits for the server to listen."""


class Listen(Config):
    """Where a server listens."""

    host: str = "127.0.0.1"
    """Address to listen on."""
    port: int = Field(default=8000, ge=0, le=65535)
    """Port to listen on."""


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
        self.recorded = False
        """Whether the server counted and logged this refusal already (it is told of each one once)."""

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}}

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers)


Refused = Callable[[Scope, ApiError], None]
"""Told of every error response an application gives, with the request's ASGI scope (to count and log it)."""


def invalid_request(message: str, param: str | None = None) -> ApiError:
    """A 400 ``invalid_request_error``."""
    return ApiError(400, message, "invalid_request_error", param=param)


def describe_validation(error: RequestValidationError) -> tuple[str, str | None]:
    """A readable message for a request body that fails validation, and the first offending parameter."""
    return describe_errors(error.errors())


def describe_errors(errors: Sequence[Any]) -> tuple[str, str | None]:
    """A readable message for pydantic's validation errors, and the first offending parameter (dotted)."""
    problems, first = [], None
    for problem in errors:
        location = [str(part) for part in problem.get("loc", ()) if part != "body"]
        where = ".".join(location) or "body"
        first = first or where
        problems.append(f"{where}: {problem.get('msg', 'invalid')}")
    return "; ".join(problems) or "invalid request body", first


def non_finite_field(value: Any, path: str = "") -> str | None:
    """The dotted path of the first NaN or infinite number in a parsed JSON value, if any."""
    if isinstance(value, float) and not math.isfinite(value):
        return path or "body"
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        found = non_finite_field(item, f"{path}.{key}" if path else str(key))
        if found is not None:
            return found
    return None


class CheckedBodies:
    """ASGI middleware: a request body is read up to ``max_bytes`` (413 beyond, from its declared length or as
    it arrives), and a JSON body with a NaN or infinite number is a 400 naming the field, before the application
    sees it."""

    def __init__(self, app: ASGIApp, max_bytes: int, refused: Refused | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.refused = refused

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        declared = headers.get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(self._too_large(), scope, receive, send)
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if len(body) > self.max_bytes:
                await self._refuse(self._too_large(), scope, receive, send)
                return
            if not message.get("more_body", False):
                break
        problem = _non_finite_problem(bytes(body))
        if problem is not None:
            await self._refuse(problem, scope, receive, send)
            return
        delivered = False

        async def replay() -> AsgiMessage:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()  # after the body: the client's disconnect, as before

        await self.app(scope, replay, send)

    async def _refuse(self, error: ApiError, scope: Scope, receive: Receive, send: Send) -> None:
        if self.refused is not None:
            self.refused(scope, error)
        await error.response()(scope, receive, send)

    def _too_large(self) -> ApiError:
        return ApiError(
            413, f"the request body exceeds {self.max_bytes} bytes", "invalid_request_error", code="request_too_large"
        )


def _non_finite_problem(body: bytes) -> ApiError | None:
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError):
        return None  # not JSON: the application says what is wrong with it
    where = non_finite_field(parsed)
    if where is None:
        return None
    return invalid_request(f"{where}: NaN and infinite numbers are not numbers JSON has; send a finite number", where)


DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
"""Largest request body the servers read."""


def openai_app(title: str, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, refused: Refused | None = None) -> FastAPI:
    """A FastAPI application whose errors are OpenAI-style bodies, told to ``refused`` once each, and whose
    request bodies are checked (:class:`CheckedBodies`)."""
    app = FastAPI(title=title, version="1")
    app.add_middleware(CheckedBodies, max_bytes=max_body_bytes, refused=refused)

    def answer(request: Request, error: ApiError) -> JSONResponse:
        if refused is not None and not error.recorded:
            error.recorded = True
            refused(request.scope, error)
        return error.response()

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, error: RequestValidationError) -> JSONResponse:
        message, param = describe_validation(error)
        return answer(request, invalid_request(message, param))

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, error: ApiError) -> JSONResponse:
        return answer(request, error)

    @app.exception_handler(HTTPException)
    async def _routing(request: Request, error: HTTPException) -> JSONResponse:
        return answer(request, routing_error(request, error))

    @app.exception_handler(Exception)
    async def _bug(request: Request, error: Exception) -> JSONResponse:
        return answer(request, ApiError(500, f"{type(error).__name__}: {error}", "server_error"))

    return app


def routing_error(request: Request, error: HTTPException) -> ApiError:
    """Starlette's 404 (no such path) or 405 (not that method) as an OpenAI-style error naming the routes."""
    routes = [route for route in request.app.routes if isinstance(route, APIRoute)]
    served = ", ".join(f"{method} {route.path}" for route in routes for method in sorted(route.methods))
    asked = f"{request.method} {request.url.path}"
    if error.status_code == 405:
        return ApiError(
            405, f"{asked}: this method is not answered there; served here: {served}", "invalid_request_error",
            code="method_not_allowed",
        )  # fmt: skip
    if error.status_code == 404:
        return ApiError(
            404, f"{asked}: unknown URL; served here: {served}", "invalid_request_error", code="unknown_url"
        )
    return ApiError(error.status_code, str(error.detail), "invalid_request_error")


def listening_socket(host: str, port: int) -> socket.socket:
    """A bound socket whose connections send small writes at once (TCP_NODELAY): uvicorn writes response
    headers and body separately, and with Nagle's algorithm the body waited ~40 ms for the client's delayed
    ACK on every request (measured: 44 ms vs 1.2 ms per trivial request)."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((host, port))
    return sock


KEEP_ALIVE_S = 75
"""How long an idle connection is kept open: longer than the clients' own expiry of idle connections (httpx's,
under the OpenAI, LangChain and LiteLLM clients, is 5 s, as uvicorn's default was), so a client never sends on a
connection the server is closing at that moment (measured: 1 to 4 of 200 requests retried after a 429 failed with
a connection error at 5 s; none at 75 s)."""


def server_config(app: ASGIApp) -> uvicorn.Config:
    return uvicorn.Config(app, log_level="warning", timeout_keep_alive=KEEP_ALIVE_S)


def run_app(app: ASGIApp, *, host: str, port: int) -> None:
    """Serve ``app`` (an ASGI application) until interrupted."""
    server = uvicorn.Server(server_config(app))
    server.run(sockets=[listening_socket(host, port)])


@contextmanager
def app_in_thread(app: FastAPI, *, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
    """Serve ``app`` from a background thread (port 0: a free one); yields the base URL ``http://…/v1``."""
    sock = listening_socket(host, port)
    server = uvicorn.Server(server_config(app))
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


Body = TypeVar("Body", bound=BaseModel)


async def parsed_as(request: Request, model: type[Body]) -> Body:
    """The request body as a ``model`` (400 naming the first bad field)."""
    try:
        data = json.loads(await request.body())
    except (ValueError, RecursionError) as error:
        raise invalid_request(f"the body is not JSON: {error}") from error
    try:
        return model.model_validate(data)
    except ValidationError as error:
        message, param = describe_errors(error.errors())
        raise invalid_request(message, param) from error


async def disconnected(request: Request) -> None:
    """Returns once the client has gone away (the body was read already)."""
    while (await request.receive())["type"] != "http.disconnect":
        continue
