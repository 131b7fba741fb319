"""A fault-injecting HTTP server for tests, on 127.0.0.1."""

import asyncio
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

OK_BODY = {
    "id": "x",
    "object": "chat.completion",
    "created": 0,
    "model": "faulty",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "fine"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
}


@dataclass
class FaultServer:
    """Answers request N with ``faults[N]`` (the last one repeats): ``ok``, ``429``, ``500``, ``malformed``,
    ``truncated`` or ``slow``. Records how many requests arrived and the most at once."""

    faults: list[str]
    slow_s: float = 3.0
    requests: int = 0
    in_flight: int = 0
    most_in_flight: int = 0
    hold_s: float = 0.0
    port: int = 0
    _loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.new_event_loop)

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
        self.requests += 1
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.hold_s)
            await self._answer(fault, writer)
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
