"""The budget ledger of an episode: the one place where a generation or call reserves its cost bound, runs,
and settles what it actually cost, so that concurrent work never jointly crosses the budget; and the cap that
many units share (:class:`RunCap`: the samples of an evaluation, the units of a data stage, the steps of every
episode served under one API key), which reserves each unit's bound the same way.

Settling charges at most what was reserved: a tool that ran past its time limit, or a server that reported
more tokens than a request allowed, is charged its bound in each limited dimension (USD, tokens) and the
record says ``clipped``. Work is started only if its bound fits, so spend never crosses a limit. An episode whose
ledger draws on a shared cap reserves each step's bound there too, for the step's duration only: many episodes
then share the cap step by step, and a step waits while others in flight may free some of it, so that it is
refused only when what the cap leaves cannot pay for it."""

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from podium.core.budget import Budget, Spend, StopReason
from podium.core.calls import CallUsage
from podium.costs.bounds import CostBound

T = TypeVar("T")


@dataclass(frozen=True)
class Refused:
    """Work the ledger would not start: the limit it could cross, and why, in numbers."""

    limit: StopReason
    reason: str


class Ledger:
    """Spend of one episode, plus the cost bounds of work in flight; with ``shared``, a cap its steps also draw on."""

    def __init__(self, budget: Budget, shared: "RunCap | None" = None) -> None:
        self.budget = budget
        self.shared = shared
        self.shared_refusal: str | None = None
        """Why the shared cap last refused a step of this episode, if it did."""
        self.started = time.perf_counter()
        self.turns = 0
        self.usd = 0.0
        self.tokens = 0
        self.reserved = CostBound()
        self.abandoned = CostBound()
        """Bounds of work cancelled while it ran: what it may have cost without reporting it (a server may bill
        a request its client gave up on)."""

    def spend(self) -> Spend:
        """What has been spent so far (work in flight not included)."""
        return Spend(turns=self.turns, tokens=self.tokens, usd=self.usd, seconds=self.elapsed())

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def remaining_seconds(self) -> float | None:
        """Seconds left before the deadline (``None`` without one)."""
        if self.budget.max_seconds is None:
            return None
        return max(0.0, self.budget.max_seconds - self.elapsed())

    async def metered(
        self,
        bound: CostBound,
        work: Callable[[], Awaitable[T]],
        usage: Callable[[T], CallUsage],
        settle: Callable[[T, CallUsage], T],
    ) -> T | Refused:
        """Run ``work`` if a cost of at most ``bound`` fits what is left (counting work in flight), holding the
        bound while it runs, then charging the ``usage`` of its result cut to ``bound``; a result whose usage
        was cut is returned as ``settle(result, charged)``."""
        limit = self._limit_crossed(bound)
        if limit is not None:
            return Refused(limit, self._describe(bound))
        self.reserved = self.reserved + bound
        try:
            if self.shared is not None and not await self.shared.acquire(bound.usd):
                self.shared_refusal = self.shared.describe(bound.usd)
                return Refused(StopReason.MAX_USD, self.shared_refusal)
            try:
                result = await work()
            except asyncio.CancelledError:
                self.abandoned = self.abandoned + bound
                await self._release_shared(bound.usd, bound.usd)  # a server may bill what its client gave up on
                raise
            except BaseException:
                await self._release_shared(bound.usd, 0.0)
                raise
        finally:
            self.reserved = CostBound(self.reserved.usd - bound.usd, self.reserved.tokens - bound.tokens)
        reported = usage(result)
        clip_usd = self.budget.max_usd is not None or self.shared is not None
        charged = bound.clip(reported, usd=clip_usd, tokens=self.budget.max_tokens is not None)
        self.charge(charged)
        await self._release_shared(bound.usd, charged.usd)
        return result if charged is reported else settle(result, charged)

    async def _release_shared(self, reserved: float, spent: float) -> None:
        if self.shared is not None:
            await self.shared.release(reserved, spent)

    def charge(self, usage: CallUsage) -> None:
        """Add what a generation or call cost."""
        self.usd += usage.usd
        self.tokens += usage.tokens

    def _limit_crossed(self, bound: CostBound) -> StopReason | None:
        spend = self.spend()
        if not self.budget.affords(spend, usd=self.reserved.usd + bound.usd):
            return StopReason.MAX_USD
        if not self.budget.affords(spend, tokens=self.reserved.tokens + bound.tokens):
            return StopReason.MAX_TOKENS
        return None

    def _describe(self, bound: CostBound) -> str:
        spend = self.spend()
        parts = []
        if self.budget.max_usd is not None:
            left = self.budget.max_usd - spend.usd - self.reserved.usd
            parts.append(f"it could cost up to ${bound.usd:.6f} and ${max(left, 0.0):.6f} of the USD budget is left")
        if self.budget.max_tokens is not None:
            left = self.budget.max_tokens - spend.tokens - self.reserved.tokens
            parts.append(f"it could use up to {bound.tokens} tokens and {max(left, 0)} are left")
        return "; ".join(parts)

    def remaining_text(self) -> str:
        """The budget left, as the parallel policy shows it to the orchestrator."""
        budget, spend = self.budget, self.spend()
        parts = []
        if budget.max_turns is not None:
            parts.append(f"{budget.max_turns - spend.turns} of {budget.max_turns} rounds")
        if budget.max_usd is not None:
            parts.append(f"${max(budget.max_usd - spend.usd, 0.0):.4f} of ${budget.max_usd:g}")
        if budget.max_tokens is not None:
            parts.append(f"{max(budget.max_tokens - spend.tokens, 0)} of {budget.max_tokens} tokens")
        if budget.max_seconds is not None:
            parts.append(f"{self.remaining_seconds():.0f} of {budget.max_seconds:g} seconds")
        return f"<budget>remaining: {', '.join(parts) or 'unlimited'}</budget>"


class RunCap:
    """A USD cap that many units share (the samples of a run, every invocation included; the steps of the episodes
    served under one API key in one day): a unit starts only once its cost bound fits what is left after the spend
    so far and the bounds of the units in flight, so concurrent units never jointly cross the cap. A unit that
    does not fit waits while others that hold a bound are in flight (they may cost less than it) and is refused
    once none is (units of no or unknown bound in flight could only add to the spend)."""

    def __init__(self, max_usd: float | None, spent: float = 0.0) -> None:
        self.max_usd = max_usd
        self.spent = spent
        """USD spent so far, earlier invocations included."""
        self.reserved = 0.0
        """The bounds of the units in flight."""
        self.holding = 0
        """The units in flight that hold a positive bound: what may free some of the cap."""
        self.refused = False
        """Whether some unit was refused because its bound did not fit."""
        self._changed = asyncio.Condition()

    def charge(self, usd: float) -> None:
        """Count spend that happened outside a unit (work resumed from an earlier invocation)."""
        self.spent += usd

    def fits(self, bound: float | None) -> bool:
        """Whether a unit costing at most ``bound`` fits now; a unit of unknown cost (``None``) fits while the
        spend and the bounds in flight are below the cap, so the cap then holds only as closely as it costs."""
        if self.max_usd is None:
            return True
        if bound is None:
            return self.spent + self.reserved < self.max_usd
        return self.spent + self.reserved + bound <= self.max_usd

    async def acquire(self, bound: float | None) -> bool:
        """Reserve ``bound`` for a unit about to start, waiting while units in flight may free some of the cap;
        False (nothing reserved) when it cannot fit."""
        async with self._changed:
            while not self.fits(bound):
                if not self.holding:
                    self.refused = True
                    self._changed.notify_all()  # other waiters see it too: nothing in flight will free the cap
                    return False
                await self._changed.wait()
            self.reserved += bound or 0.0
            self.holding += bool(bound and bound > 0)
            return True

    def describe(self, bound: float) -> str:
        """Why a unit costing at most ``bound`` does not fit, in numbers."""
        left = (self.max_usd or 0.0) - self.spent - self.reserved
        return (
            f"the shared cap of ${self.max_usd:g} has ${max(left, 0.0):.6f} left after what is spent and held, and "
            f"the step could cost up to ${bound:.6f}"
        )

    async def release(self, bound: float | None, usd: float) -> None:
        """A unit that reserved ``bound`` finished (or failed) having cost ``usd``."""
        async with self._changed:
            self.reserved -= bound or 0.0
            self.holding -= bool(bound and bound > 0)
            self.spent += usd
            self._changed.notify_all()
