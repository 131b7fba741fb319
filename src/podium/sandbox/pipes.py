"""Non-blocking pipes between the host and a sandbox, read and written from an event loop without threads."""

import asyncio
import os
from collections.abc import Callable

READ_CHUNK = 65_536


class CappedOutput:
    """Collects stdout and stderr up to a combined byte limit, then stops the program."""

    def __init__(self, limit: int, stop: Callable[[], None]) -> None:
        self.limit = limit
        self.stop = stop
        self.stdout = bytearray()
        self.stderr = bytearray()
        self.overflow = False

    def sink(self, into: bytearray) -> Callable[[bytes], None]:
        def add(chunk: bytes) -> None:
            room = self.limit - len(self.stdout) - len(self.stderr)
            into.extend(chunk[: max(room, 0)])
            if len(chunk) > room and not self.overflow:
                self.overflow = True
                self.stop()

        return add


async def readable(fd: int, *, writable: bool = False) -> None:
    """Wait until ``fd`` is readable (or writable), without a thread."""
    loop = asyncio.get_running_loop()
    ready = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    add, remove = (loop.add_writer, loop.remove_writer) if writable else (loop.add_reader, loop.remove_reader)
    add(fd, wake)
    try:
        await ready
    finally:
        remove(fd)


def drain(fd: int, sink: Callable[[bytes], None]) -> bool:
    """Read what a non-blocking pipe holds now; whether it reached the pipe's end."""
    while True:
        try:
            chunk = os.read(fd, READ_CHUNK)
        except BlockingIOError:
            return False
        if not chunk:
            return True
        sink(chunk)


async def pump(fd: int, sink: Callable[[bytes], None]) -> None:
    """Read a non-blocking pipe to its end."""
    while not drain(fd, sink):
        await readable(fd)


async def read_line(fd: int, into: bytearray) -> None:
    """Read a non-blocking pipe until it holds a whole line, or to its end."""
    while not drain(fd, into.extend) and not into.endswith(b"\n"):
        await readable(fd)


async def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to a non-blocking pipe; a reader that went away just ends the writing."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            await readable(fd, writable=True)
        except BrokenPipeError:
            return
