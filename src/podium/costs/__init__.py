"""Costs: price sheets, cost bounds known before a call runs, and the budget ledger of an episode."""

from podium.costs.bounds import CostBound, estimate_tokens, generation_bound, prompt_token_bound
from podium.costs.ledger import Ledger
from podium.costs.prices import ModelPrice, PriceCatalog, ToolPrice

__all__ = [
    "CostBound",
    "Ledger",
    "ModelPrice",
    "PriceCatalog",
    "ToolPrice",
    "estimate_tokens",
    "generation_bound",
    "prompt_token_bound",
]
