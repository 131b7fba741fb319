"""Pools with scripted workers for the primitive tests, a way to perform one primitive as a routed DAG node would,
and a small HTTP server on 127.0.0.1 that records what reaches it."""

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from podium.core.calls import ToolCall, ToolResult
from podium.costs.prices import ModelPrice
from podium.pool.config import PoolConfig, WorkerConfig
from podium.pool.context import EpisodeContext, current_episode
from podium.pool.pool import Pool, build_pool
from podium.pool.resources import Attachment
from podium.sandbox import SandboxConfig

PRICE = ModelPrice(input_per_mtok=1.0, output_per_mtok=2.0)
SANDBOX = SandboxConfig(cpu_time_s=2, wall_time_s=10, memory_mb=512, max_processes=32)


def worker(replies: list[str], primitives: list[str], name: str = "w", **fields: Any) -> WorkerConfig:
    """A scripted worker admitting ``primitives`` that answers with ``replies`` in order."""
    return WorkerConfig(
        name=name,
        backend="scripted",
        model=f"{name}-model",
        replies=replies,
        price=PRICE,
        primitives=primitives,
        **fields,
    )


def pool_with(replies: list[str], primitives: list[str], **config: Any) -> Pool:
    """A pool of one scripted worker ``w`` with the test sandbox and no basic tools unless given."""
    fields = {"tools": [], "sandbox": SANDBOX, **config}
    return build_pool(PoolConfig(workers=[worker(replies, primitives)], **fields))


def perform(
    pool: Pool,
    primitive: str,
    instruction: str,
    *,
    inputs: str = "",
    attachments: tuple[Attachment, ...] = (),
    model: str = "w",
) -> ToolResult:
    """Run one primitive call as the DAG would route it, in an episode with ``attachments``."""
    arguments = {"model": model, "instruction": instruction, **({"inputs": inputs} if inputs else {})}

    async def run() -> ToolResult:
        current_episode.set(EpisodeContext(question=instruction, attachments=attachments))
        return await pool.primitives.call(ToolCall(name=primitive, arguments=arguments, id="subtask-1"))

    return asyncio.run(run())


def requests_of(pool: Pool, name: str = "w") -> list[list[Any]]:
    """The messages of every request the scripted worker received."""
    return pool.backends[name].requests  # type: ignore[attr-defined]


@dataclass
class Recorder:
    """A threaded HTTP server on 127.0.0.1: ``handler(method, path, body)`` → (status, JSON-able body, headers);
    it records every request it received."""

    handler: Callable[[str, str, bytes], tuple[int, Any, dict[str, str]]]
    seen: list[tuple[str, str, bytes]] = field(default_factory=list)
    port: int = 0

    @contextmanager
    def running(self) -> Iterator[str]:
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                recorder.seen.append((self.command, self.path, body))
                status, payload, headers = recorder.handler(self.command, self.path, body)
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                for key, value in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = _answer

            def log_message(self, *args: Any) -> None:
                pass

        class Server(ThreadingHTTPServer):
            def handle_error(self, request: Any, client_address: Any) -> None:
                pass  # a client that gave up (a timeout test) is expected

        server = Server(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        self.port = server.server_address[1]
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{self.port}"
        finally:
            server.shutdown()
            server.server_close()


def slow(seconds: float) -> Callable[[str, str, bytes], tuple[int, Any, dict[str, str]]]:
    """A handler that answers after ``seconds``."""

    def handle(method: str, path: str, body: bytes) -> tuple[int, Any, dict[str, str]]:
        time.sleep(seconds)
        return 200, {"late": True}, {}

    return handle
