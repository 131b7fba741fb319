"""What an episode has spent and reserved, so that concurrent calls never jointly cross the budget."""

import time

from podium.core.budget import Budget, Spend, StopReason
from podium.core.calls import CallUsage
from podium.pool.tool import CostBound


class Ledger:
    """Spend of one episode, plus the cost bounds of calls in flight."""

    def __init__(self, budget: Budget) -> None:
        self.budget = budget
        self.started = time.perf_counter()
        self.turns = 0
        self.usd = 0.0
        self.tokens = 0
        self.reserved = CostBound()

    def spend(self) -> Spend:
        return Spend(turns=self.turns, tokens=self.tokens, usd=self.usd, seconds=self.elapsed())

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def remaining_seconds(self) -> float | None:
        """Seconds left before the deadline (``None`` without one)."""
        if self.budget.max_seconds is None:
            return None
        return max(0.0, self.budget.max_seconds - self.elapsed())

    def refusal(self, bound: CostBound) -> StopReason | None:
        """Which limit a further cost of at most ``bound`` could cross, counting calls in flight."""
        spend = self.spend()
        if not self.budget.affords(spend, usd=self.reserved.usd + bound.usd):
            return StopReason.MAX_USD
        if not self.budget.affords(spend, tokens=self.reserved.tokens + bound.tokens):
            return StopReason.MAX_TOKENS
        return None

    def reserve(self, bound: CostBound) -> None:
        self.reserved = self.reserved + bound

    def settle(self, bound: CostBound, usage: CallUsage) -> None:
        """Release a reservation and charge what the call actually cost."""
        self.reserved = CostBound(self.reserved.usd - bound.usd, self.reserved.tokens - bound.tokens)
        self.charge(usage)

    def charge(self, usage: CallUsage) -> None:
        self.usd += usage.usd
        self.tokens += usage.tokens

    def describe(self, bound: CostBound) -> str:
        """Why a call with this bound was refused, in numbers."""
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
