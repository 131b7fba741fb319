"""Cost bounds: the most a generation or a call can cost, known before it runs, so budgets can refuse it."""

from dataclasses import dataclass

from podium.costs.prices import ModelPrice


@dataclass(frozen=True)
class CostBound:
    """The most a call can cost, estimated before it runs (budgets refuse calls that could overspend)."""

    usd: float = 0.0
    tokens: int = 0

    def __add__(self, other: "CostBound") -> "CostBound":
        return CostBound(self.usd + other.usd, self.tokens + other.tokens)

    def __mul__(self, times: int) -> "CostBound":
        return CostBound(self.usd * times, self.tokens * times)


def estimate_tokens(text: str) -> int:
    """A prompt's tokens estimated from its characters, on the high side: English runs about four characters per
    token, so a third of the characters plus a per-request margin over-estimates ordinary prompts."""
    return len(text) // 3 + 16


def generation_bound(price: ModelPrice, prompt: str, max_tokens: int) -> CostBound:
    """The most one generation can cost: the estimated prompt plus a full completion budget."""
    prompt_tokens = estimate_tokens(prompt)
    return CostBound(usd=price.cost(prompt_tokens, max_tokens), tokens=prompt_tokens + max_tokens)
