"""Backpressure: at most ``max_running`` responses are worked on at once, and a bounded queue waits for a slot.

A request that finds every slot taken waits in the queue, first come first served, up to ``max_wait_s``; it is
refused with 429 and ``Retry-After`` only when the queue is full, and with 503 and ``Retry-After`` when its wait
ran out. ``Retry-After`` estimates when a slot frees: the queue ahead, times the mean time a slot is held
(measured), over the slots.
"""

import asyncio
import math
import time
from collections import deque

from podium.serve.http import ApiError

RETRY_AFTER_MAX_S = 300
"""The longest ``Retry-After`` advised."""
HOLD_SMOOTHING = 0.1
"""Weight of the newest hold time in the running mean."""


class Admission:
    """Slots for responses and the queue for them."""

    def __init__(self, max_running: int, max_queued: int, max_wait_s: float) -> None:
        self.max_running = max_running
        self.max_queued = max_queued
        self.max_wait_s = max_wait_s
        self.running = 0
        self.waiters: deque[asyncio.Future[None]] = deque()
        self.mean_hold_s = 1.0

    @property
    def queued(self) -> int:
        return len(self.waiters)

    def retry_after(self) -> int:
        """Seconds until a slot is likely free for a request queued now."""
        rounds = (self.queued + 1) / self.max_running
        return max(1, min(RETRY_AFTER_MAX_S, math.ceil(rounds * self.mean_hold_s)))

    async def acquire(self) -> float:
        """Take a slot, after waiting in the queue if needed; the seconds waited. Every acquire needs one
        :meth:`release`."""
        started = time.perf_counter()
        if self.running < self.max_running and not self.waiters:
            self.running += 1
        else:
            await self._wait()
        return time.perf_counter() - started

    def release(self, held_s: float) -> None:
        """Give back a slot held for ``held_s`` seconds (it goes to the first request in the queue)."""
        self.mean_hold_s += HOLD_SMOOTHING * (held_s - self.mean_hold_s)
        self._release()

    async def _wait(self) -> None:
        if self.queued >= self.max_queued:
            error = ApiError(
                429, f"{self.running} responses are being worked on and {self.queued} wait, the most this server "
                "queues; retry later", "rate_limit_error", code="queue_full",
            )  # fmt: skip
            error.headers["Retry-After"] = str(self.retry_after())
            raise error
        ticket: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.waiters.append(ticket)
        try:
            await asyncio.wait_for(asyncio.shield(ticket), self.max_wait_s)
        except (TimeoutError, asyncio.CancelledError) as stopped:
            if ticket.done() and not ticket.cancelled():
                self._release()  # the slot was handed over as the wait ended: pass it on
            else:
                ticket.cancel()
                self.waiters.remove(ticket)
            if isinstance(stopped, asyncio.CancelledError):
                raise
            error = ApiError(
                503, f"no slot freed within {self.max_wait_s:g} s in the queue; retry later", "server_error",
                code="queue_timeout",
            )  # fmt: skip
            error.headers["Retry-After"] = str(self.retry_after())
            raise error from stopped

    def _release(self) -> None:
        """Hand the slot to the first waiter, or free it."""
        while self.waiters:
            ticket = self.waiters.popleft()
            if not ticket.done():
                ticket.set_result(None)
                return
        self.running -= 1
