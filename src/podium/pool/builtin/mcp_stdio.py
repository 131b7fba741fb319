"""The stdio transport to an MCP server: its process, and its newline-delimited JSON-RPC read in linear time, each
line bounded.

The SDK's own stdio client joins the pieces of a line by concatenating strings, in time quadratic in the line's
length: one 40 MB line that was no reply kept it reading for about 19 s, and the calls behind it timed out. Here
each chunk is scanned once for the end of a line, and a line longer than the limit is not kept: it is skipped to
its end and passed on once, at once, as a :class:`LineTooLong` error (which, naming no call, fails the calls then
in flight on the server, see :mod:`podium.pool.builtin.mcp`); the lines after it are read as usual. Everything
else follows the SDK's stdio client: the default environment, the server in a session of its own, and at the end
stdin closed, a grace period, then the server's whole process group terminated.
"""

import contextlib
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from anyio.abc import ByteReceiveStream, ObjectSendStream, Process
from mcp.client.stdio import get_default_environment
from mcp.os.posix.utilities import terminate_posix_process_tree
from mcp.shared.message import SessionMessage
from mcp_types import jsonrpc_message_adapter

READ_BYTES = 1 << 20
EXIT_WAIT_S = 2.0
"""How long a server has to exit once its stdin is closed, and again once its group is sent SIGTERM."""
STREAM_ERRORS = (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError)


class LineTooLong(ValueError):
    """The server wrote a line longer than the limit (it was skipped)."""


class LineSplitter:
    """Splits a byte stream into lines in time linear in its length; a line longer than ``limit`` bytes becomes one
    :class:`LineTooLong` as soon as it passes the limit, and the rest of it is skipped."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.pending = bytearray()
        self.skipping = False

    def feed(self, chunk: bytes) -> list[bytes | LineTooLong]:
        """The lines (without their newline) that ``chunk`` completes, and errors for lines over the limit."""
        lines: list[bytes | LineTooLong] = []
        start = 0
        while start < len(chunk):
            end = chunk.find(b"\n", start)
            piece = memoryview(chunk)[start : len(chunk) if end < 0 else end]
            if not self.skipping:
                if len(self.pending) + len(piece) > self.limit:
                    lines.append(LineTooLong(f"the server wrote a line longer than {self.limit} bytes"))
                    self.pending.clear()
                    self.skipping = True
                else:
                    self.pending += piece
            if end < 0:
                break
            if not self.skipping:
                lines.append(bytes(self.pending))
            self.pending.clear()
            self.skipping = False
            start = end + 1
        return lines


def parsed(line: bytes | LineTooLong) -> SessionMessage | Exception | None:
    """A line as the SDK's session takes it: a message, the error that made it unreadable, or None when blank."""
    if isinstance(line, LineTooLong):
        return line
    if not line.strip():
        return None
    try:
        return SessionMessage(jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as error:
        return error


@asynccontextmanager
async def stdio_transport(
    command: list[str], env: dict[str, str], cwd: str | None, max_line_bytes: int
) -> AsyncIterator[Any]:
    """The SDK's transport streams to a server started as ``command`` (``env`` on top of the SDK's default
    environment), read as the module docstring says."""
    process = await anyio.open_process(
        command, env=get_default_environment() | env, stderr=sys.stderr, cwd=cwd, start_new_session=True
    )
    incoming, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, outgoing = anyio.create_memory_object_stream[SessionMessage](0)
    assert process.stdout is not None and process.stdin is not None
    stdin = process.stdin

    async def write() -> None:
        with contextlib.suppress(*STREAM_ERRORS):
            async with outgoing:
                async for message in outgoing:
                    await stdin.send(f"{message.message.model_dump_json(by_alias=True, exclude_unset=True)}\n".encode())
        await incoming.aclose()  # the server stopped reading: the session sees the connection end

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(_read, process.stdout, incoming, LineSplitter(max_line_bytes))
        tasks.start_soon(write)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):
                read_stream.close()
                write_stream.close()
                await _stop(process)
            tasks.cancel_scope.cancel()


async def _read(stdout: ByteReceiveStream, incoming: ObjectSendStream[Any], splitter: LineSplitter) -> None:
    """Pass the server's messages on until its stdout ends; once the session is gone, read on (and drop what comes)
    so that a server writing its last output is not blocked from exiting."""
    delivering = True
    with contextlib.suppress(*STREAM_ERRORS):
        async with incoming:
            while True:
                chunk = await stdout.receive(READ_BYTES)
                for line in splitter.feed(chunk):
                    message = parsed(line) if delivering else None
                    if message is not None:
                        try:
                            await incoming.send(message)
                        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                            delivering = False


async def _stop(process: Process) -> None:
    """Close the server's stdin, give it a moment to exit, then terminate its process group."""
    with contextlib.suppress(*STREAM_ERRORS):
        await process.stdin.aclose()  # type: ignore[union-attr]
    if not await _exited(process):
        await terminate_posix_process_tree(process, EXIT_WAIT_S)
        await _exited(process)
    with contextlib.suppress(*STREAM_ERRORS):
        await process.stdout.aclose()  # type: ignore[union-attr]


async def _exited(process: Process) -> bool:
    """Whether the process exits within the grace period (its return code, not its pipes: a child of the server
    may hold those)."""
    with anyio.move_on_after(EXIT_WAIT_S):
        while process.returncode is None:
            await anyio.sleep(0.01)
    return process.returncode is not None
