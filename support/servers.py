"""A fault-injecting HTTP server for tests, on 127.0.0.1: transport faults, malformed and lying replies."""

import asyncio
import copy
import json
import random
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

OK_BODY = {
    "id": "x",
    "object": "chat.completion",
    "created": 0,
    "model": "faulty",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "fine"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
}
JSON = "application/json"


def _changed(path: str, value: Any) -> bytes:
    """OK_BODY with the field at ``path`` (dotted; ``-`` deletes it) set to ``value``, as JSON bytes."""
    body = copy.deepcopy(OK_BODY)
    *parents, last = path.split(".")
    target: Any = body
    for part in parents:
        target = target[int(part)] if isinstance(target, list) else target[part]
    if value == "-":
        del target[last]
    elif isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value
    return json.dumps(body).encode()


MALFORMED: dict[str, tuple[str, bytes]] = {
    "empty_usage": (JSON, _changed("usage", {})),
    "no_usage": (JSON, _changed("usage", "-")),
    "negative_tokens": (JSON, _changed("usage.completion_tokens", -5)),
    "string_tokens": (JSON, _changed("usage.prompt_tokens", "3")),
    "float_tokens": (JSON, _changed("usage.prompt_tokens", 2.5)),
    "bool_tokens": (JSON, _changed("usage.completion_tokens", True)),
    "numeric_content": (JSON, _changed("choices.0.message.content", 42)),
    "null_content": (JSON, _changed("choices.0.message.content", None)),
    "list_content": (JSON, _changed("choices.0.message.content", ["fine"])),
    "object_content": (JSON, _changed("choices.0.message.content", {"text": "fine"})),
    "no_choices": (JSON, _changed("choices", [])),
    "choices_object": (JSON, _changed("choices", {"0": OK_BODY["choices"][0]})),  # type: ignore[index]
    "no_message": (JSON, _changed("choices.0.message", "-")),
    "message_string": (JSON, _changed("choices.0.message", "fine")),
    "numeric_finish_reason": (JSON, _changed("choices.0.finish_reason", 7)),
    "refusal": (JSON, _changed("choices.0.message", {"role": "assistant", "content": None, "refusal": "no"})),
    "error_with_200": (JSON, b'{"error": {"message": "overloaded", "type": "server_error"}}'),
    "array_body": (JSON, b"[1, 2, 3]"),
    "null_body": (JSON, b"null"),
    "not_json": (JSON, b"hello, this is not JSON"),
    "empty_body": (JSON, b""),
    "deep_json": (JSON, b"[" * 100_000 + b"]" * 100_000),
    "invalid_utf8": (JSON, b'{"choices": "\xff\xfe"}'.replace(b"\\xff\\xfe", bytes([255, 254]))),
    "wrong_content_type": ("text/html", b"<html><body>Bad gateway</body></html>"),
    "huge": (JSON, b'{"choices": [], "padding": "' + b"x" * (4 * 1024 * 1024) + b'"}'),
}
"""200 replies that are not chat completions a caller can use: each must become EXEC_ERR."""
TRANSPORT_FAULTS = ["429", "500", "malformed", "truncated", "slow", "trickle", "trickle_headers", "close", "hang"]
"""Faults of the exchange itself: each ends in EXEC_ERR or TIMEOUT once retries are spent."""
LYING = {
    "lying_usage": _changed("usage", {"prompt_tokens": 10_000_000, "completion_tokens": 10_000_000}),
    "surrogate_content": _changed("choices.0.message.content", "\ud800 lone \udfff"),
}
"""Replies that are usable but lie about usage or carry unencodable text: OK, charged within bounds."""


@dataclass
class FaultServer:
    """Answers request N with ``faults[N]`` (the last one repeats): ``ok``, a name of :data:`MALFORMED`,
    :data:`TRANSPORT_FAULTS` or :data:`LYING`, or ``random`` (any of them, drawn from ``seed``). Records how many
    requests arrived, the most at once, and the faults served."""

    faults: list[str]
    slow_s: float = 3.0
    trickle_s: float = 0.05
    seed: int = 0
    reported_usage: dict[str, Any] = field(default_factory=dict)
    """The ``usage`` object of ``reported`` replies (an otherwise good reply)."""
    reported_content: str = "fine"
    """The message content of ``reported`` replies."""
    served: list[str] = field(default_factory=list)
    requests: int = 0
    in_flight: int = 0
    most_in_flight: int = 0
    hold_s: float = 0.0
    port: int = 0
    _loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.new_event_loop)
    _rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            headers = [line.lower() for line in head.split(b"\r\n")]
            length = next((int(line.split(b":")[1]) for line in headers if line.startswith(b"content-length")), 0)
            await reader.readexactly(length)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            writer.close()
            return
        fault = self.faults[min(self.requests, len(self.faults) - 1)]
        if fault == "random":
            fault = self._rng.choice(["ok", *MALFORMED, *TRANSPORT_FAULTS, *LYING])
        self.served.append(fault)
        self.requests += 1
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.hold_s)
            await self._answer(fault, writer)
        except (ConnectionError, asyncio.CancelledError):
            # The client gave up (its time limit) or the server is shutting down: the handler just ends, so
            # asyncio's connection callback has no exception to report.
            pass
        finally:
            self.in_flight -= 1
            writer.close()

    async def _answer(self, fault: str, writer: asyncio.StreamWriter) -> None:
        def send(status: str, body: bytes, extra: str = "", length: int | None = None) -> None:
            header = (
                f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: "
                f"{len(body) if length is None else length}\r\nConnection: close\r\n{extra}\r\n"
            )
            writer.write(header.encode() + body)

        if fault == "ok":
            send("200 OK", json.dumps(OK_BODY).encode())
        elif fault in MALFORMED:
            content_type, body = MALFORMED[fault]
            writer.write(
                f"HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
                "Connection: close\r\n\r\n".encode()
                + body
            )
        elif fault in LYING:
            send("200 OK", LYING[fault])
        elif fault == "reported":
            body = copy.deepcopy(OK_BODY)
            body["choices"][0]["message"]["content"] = self.reported_content  # type: ignore[index]
            send("200 OK", json.dumps({**body, "usage": self.reported_usage}).encode())
        elif fault in ("trickle", "trickle_headers", "close", "hang"):
            await self._stall(fault, writer)
        elif fault == "429":
            send("429 Too Many Requests", b'{"error": {"message": "slow down"}}', "Retry-After: 0.05\r\n")
        elif fault == "500":
            send("500 Internal Server Error", b'{"error": {"message": "boom"}}')
        elif fault == "malformed":
            send("200 OK", b'{"choices": [ this is not json')
        elif fault == "truncated":
            body = json.dumps(OK_BODY).encode()
            send("200 OK", body[:20], length=len(body))
        elif fault == "slow":
            await asyncio.sleep(self.slow_s)
            send("200 OK", json.dumps(OK_BODY).encode())
        await writer.drain()

    async def _stall(self, fault: str, writer: asyncio.StreamWriter) -> None:
        """Faults that hold or drop the connection: a body or headers sent one byte at a time, a connection
        closed without a reply, one never answered."""
        body = json.dumps(OK_BODY).encode()
        head = f"HTTP/1.1 200 OK\r\nContent-Type: {JSON}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        if fault == "close":
            return
        if fault == "hang":
            await asyncio.sleep(3600)
        trickled = head + body if fault == "trickle_headers" else body
        if fault == "trickle":
            writer.write(head)
        for index in range(len(trickled)):
            writer.write(trickled[index : index + 1])
            await writer.drain()
            await asyncio.sleep(self.trickle_s)

    @contextmanager
    def running(self) -> Iterator[str]:
        started = threading.Event()

        async def start() -> asyncio.AbstractServer:
            server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
            self.port = server.sockets[0].getsockname()[1]
            started.set()
            return server

        thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        thread.start()
        server = asyncio.run_coroutine_threadsafe(start(), self._loop).result(timeout=5)
        started.wait(5)

        async def shut_down() -> None:
            # Cancel handlers still sleeping (slow replies): a coroutine left to the garbage collector
            # would raise inside whatever code the main thread runs at that moment.
            server.close()
            handlers = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
            for task in handlers:
                task.cancel()
            await asyncio.gather(*handlers, return_exceptions=True)

        try:
            yield f"http://127.0.0.1:{self.port}/v1"
        finally:
            asyncio.run_coroutine_threadsafe(shut_down(), self._loop).result(timeout=5)
            self._loop.call_soon_threadsafe(self._loop.stop)
            thread.join(timeout=5)
            self._loop.close()
