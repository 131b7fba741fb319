"""Concurrency limits that work across event loops (each ``asyncio.run`` makes a new loop)."""

import asyncio
import weakref


class LoopSemaphore:
    """An ``asyncio.Semaphore`` per running event loop, each with the same limit.

    A plain semaphore binds to the first loop that waits on it and fails in any later one, which breaks
    objects that outlive one ``asyncio.run`` (a CLI command, a test, an evaluation resumed in a new loop).
    """

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("the limit must be at least 1")
        self.limit = limit
        self._by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )

    def current(self) -> asyncio.Semaphore:
        """The semaphore of the running loop."""
        loop = asyncio.get_running_loop()
        if loop not in self._by_loop:
            self._by_loop[loop] = asyncio.Semaphore(self.limit)
        return self._by_loop[loop]

    async def __aenter__(self) -> None:
        await self.current().acquire()

    async def __aexit__(self, *exc_info: object) -> None:
        self.current().release()
