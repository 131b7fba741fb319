"""Backpressure: at most ``max_running`` responses are worked on at once, and a bounded queue waits for a slot.

A request that finds every slot taken waits in the queue, first come first served, up to ``max_wait_s``; it is
refused with 429 only when the queue is full, and with 503 when its wait ran out. Both carry ``Retry-After``
(whole seconds, at least 1) and ``retry-after-ms`` (which the official OpenAI clients read first): the time the
work ahead (the responses running and queued) takes to drain at the rate responses have been finishing, measured
over the last :data:`DRAIN_WINDOW` responses and the time slots were busy (idle time does not dilute it). Before
two responses have finished there is nothing to measure, and the advice is the shortest: a second.
"""

import asyncio
import math
import time
from collections import deque
from collections.abc import Callable

from podium.serve.http import ApiError

RETRY_AFTER_MAX_S = 300
"""The longest ``Retry-After`` advised."""
DRAIN_WINDOW = 64
"""How many of the newest finished responses the drain rate is measured over."""


class Admission:
    """Slots for responses, the queue for them, and the rate at which they drain."""

    def __init__(
        self, max_running: int, max_queued: int, max_wait_s: float, clock: Callable[[], float] = time.perf_counter
    ) -> None:
        self.max_running = max_running
        self.max_queued = max_queued
        self.max_wait_s = max_wait_s
        self.clock = clock
        self.running = 0
        self.waiters: deque[asyncio.Future[None]] = deque()
        self.busy_s = 0.0
        """Seconds during which at least one slot was taken, up to :attr:`busy_since`."""
        self.busy_since: float | None = None
        self.finished: deque[float] = deque(maxlen=DRAIN_WINDOW)
        """Busy seconds (:meth:`busy_seconds`) at which each of the newest responses finished."""

    @property
    def queued(self) -> int:
        return len(self.waiters)

    def busy_seconds(self) -> float:
        """Seconds the server has had a response to work on."""
        return self.busy_s + (0.0 if self.busy_since is None else self.clock() - self.busy_since)

    def drain_rate(self) -> float | None:
        """Responses finished per busy second, over the newest ones (``None``: too few measured)."""
        if len(self.finished) < 2 or self.finished[-1] <= self.finished[0]:
            return None
        return (len(self.finished) - 1) / (self.finished[-1] - self.finished[0])

    def drain_seconds(self) -> float:
        """Seconds until the responses running and queued now are done, at the measured rate (1 unmeasured)."""
        rate = self.drain_rate()
        if rate is None:
            return 1.0
        return min(RETRY_AFTER_MAX_S, (self.running + self.queued) / rate)

    def refusal(self, status: int, message: str, kind: str, code: str) -> ApiError:
        """A refusal that advises when to retry."""
        error = ApiError(status, message, kind, code=code)
        seconds = self.drain_seconds()
        error.headers["Retry-After"] = str(max(1, math.ceil(seconds)))
        error.headers["retry-after-ms"] = str(max(1, round(1000 * seconds)))
        return error

    async def acquire(self) -> float:
        """Take a slot, after waiting in the queue if needed; the seconds waited. Every acquire needs one
        :meth:`release`."""
        started = self.clock()
        if self.running < self.max_running and not self.waiters:
            self._take()
        else:
            await self._wait()
        return self.clock() - started

    def release(self) -> None:
        """Give back a slot (it goes to the first request in the queue)."""
        self.finished.append(self.busy_seconds())
        self._hand_over()

    def _take(self) -> None:
        if self.running == 0:
            self.busy_since = self.clock()
        self.running += 1

    async def _wait(self) -> None:
        if self.queued >= self.max_queued:
            raise self.refusal(
                429, f"{self.running} responses are being worked on and {self.queued} wait, the most this server "
                "queues; retry later", "rate_limit_error", "queue_full",
            )  # fmt: skip
        ticket: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.waiters.append(ticket)
        try:
            await asyncio.wait_for(asyncio.shield(ticket), self.max_wait_s)
        except (TimeoutError, asyncio.CancelledError) as stopped:
            if ticket.done() and not ticket.cancelled():
                self._hand_over()  # the slot was handed over as the wait ended: pass it on
            else:
                ticket.cancel()
                self.waiters.remove(ticket)
            if isinstance(stopped, asyncio.CancelledError):
                raise
            raise self.refusal(
                503, f"no slot freed within {self.max_wait_s:g} s in the queue; retry later", "server_error",
                "queue_timeout",
            ) from stopped  # fmt: skip

    def _hand_over(self) -> None:
        """Hand a slot to the first request in the queue, or free it."""
        while self.waiters:
            ticket = self.waiters.popleft()
            if not ticket.done():
                ticket.set_result(None)
                return
        self.running -= 1
        if self.running == 0 and self.busy_since is not None:
            self.busy_s += self.clock() - self.busy_since
            self.busy_since = None
