"""User preferences (ToolOrchestra §3.2): an instruction text PI and a weight vector P."""

from typing import Annotated

from pydantic import Field

from podium.core.record import Record

Weight = Annotated[float, Field(ge=0.0, le=1.0)]

OUTCOME_KEYS = ("outcome", "compute", "latency")
"""The non-tool components of the preference vector, after the per-tool counts."""


class Preference(Record):
    """A preference: text appended to the task, and weights over tools and outcome/compute/latency."""

    instruction: str = ""
    """PI: what the user wants, in words (appended to the question)."""
    weights: dict[str, Weight] = Field(default_factory=dict)
    """P: weight in [0, 1] per tool name and per ``outcome``, ``compute``, ``latency``; absent keys weigh 0."""

    def vector(self, tools: list[str]) -> list[float]:
        """P as a vector over ``tools`` followed by outcome, compute, latency (the order of SPEC §5.1)."""
        return [self.weights.get(key, 0.0) for key in [*tools, *OUTCOME_KEYS]]
