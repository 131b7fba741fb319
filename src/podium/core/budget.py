"""Budgets: limits on turns, calls per round, tokens, USD and wall-clock time, and what has been spent."""

from enum import StrEnum

from pydantic import ConfigDict, NonNegativeFloat, NonNegativeInt, PositiveFloat, PositiveInt

from podium.core.record import Record


class StopReason(StrEnum):
    """Why a trajectory ended."""

    ANSWER = "answer"
    """The orchestrator gave a final answer."""
    ENV_DONE = "env_done"
    """The environment (or simulated user) ended the episode."""
    MAX_TURNS = "max_turns"
    MAX_TOKENS = "max_tokens"
    MAX_USD = "max_usd"
    DEADLINE = "deadline"
    MAX_PARSE_ERRORS = "max_parse_errors"
    """The orchestrator kept producing output that could not be parsed."""
    ERROR = "error"
    """An infrastructure failure (the orchestrator's own backend failed)."""
    CANCELLED = "cancelled"
    """The caller cancelled the episode while it ran (a served client went away); what ran until then is kept."""


class Spend(Record):
    """What an episode has consumed so far."""

    turns: NonNegativeInt = 0
    """Orchestrator turns (rounds) taken."""
    tokens: NonNegativeInt = 0
    """Tokens of the orchestrator and every worker, prompt plus completion."""
    usd: NonNegativeFloat = 0.0
    """US dollars spent by the orchestrator and every call."""
    seconds: NonNegativeFloat = 0.0
    """Wall-clock seconds since the episode started."""


class Budget(Record):
    """Limits for one episode; ``None`` means unlimited (an infinite or NaN limit is refused)."""

    model_config = ConfigDict(allow_inf_nan=False)

    max_turns: PositiveInt | None = None
    """Most orchestrator turns (rounds)."""
    max_calls_per_round: PositiveInt | None = None
    """Most tool calls in one round (ParaManager's n_max)."""
    max_tokens: PositiveInt | None = None
    """Most tokens, orchestrator and workers, prompt and completion."""
    max_usd: PositiveFloat | None = None
    """Most US dollars; a call that could exceed what is left is refused before it runs."""
    max_seconds: PositiveFloat | None = None
    """Wall-clock deadline for the episode, in seconds."""

    def exhausted(self, spend: Spend) -> StopReason | None:
        """The first limit ``spend`` has reached, if any."""
        if self.max_usd is not None and spend.usd >= self.max_usd:
            return StopReason.MAX_USD
        if self.max_tokens is not None and spend.tokens >= self.max_tokens:
            return StopReason.MAX_TOKENS
        if self.max_seconds is not None and spend.seconds >= self.max_seconds:
            return StopReason.DEADLINE
        if self.max_turns is not None and spend.turns >= self.max_turns:
            return StopReason.MAX_TURNS
        return None

    def affords(self, spend: Spend, usd: float = 0.0, tokens: int = 0) -> bool:
        """Whether a further cost of at most ``usd`` and ``tokens`` stays within the limits."""
        if self.max_usd is not None and spend.usd + usd > self.max_usd:
            return False
        return self.max_tokens is None or spend.tokens + tokens <= self.max_tokens
