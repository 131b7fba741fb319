"""How ``podium serve`` runs: its queue, keys, records and shadows (:class:`ServeConfig`), and the system it
serves when given none."""

from typing import Self

from pydantic import Field, NonNegativeInt, PositiveFloat, PositiveInt, model_validator

from podium.serve.accounts import ApiKey
from podium.serve.http import DEFAULT_MAX_BODY_BYTES, Listen
from podium.solve.config import SystemConfig

DEFAULT_SYSTEM = SystemConfig(max_turns=2, max_tokens=256, summarize_on_stop=True)
"""What ``podium serve`` runs without ``--system``: the embedded offline orchestrator under limits within which
it answers a plain question (two turns, then the summarizer writes the answer if none came; the serial grammar's
fixed parts take 227 of its 256 tokens), as ``examples/systems/embedded-orchestrator.yaml`` does."""


class ServeConfig(Listen):
    """What ``podium serve`` serves, where, and how it admits, accounts for and records requests."""

    system: list[str] = Field(default_factory=list)
    """System file (repeatable): an orchestrator (a ``podium eval`` orchestrator file works as it is) or a router
    (kind router); its name is the model id. Default: the embedded offline orchestrator, two turns then the
    summarizer."""
    shadow: list[str] = Field(default_factory=list)
    """A candidate system file (repeatable) run beside the served system of the same name (or the only one) on
    real requests: its answers are recorded in ``served``, never returned; promote it with ``podium promote``."""

    max_concurrent: PositiveInt = 4
    """Responses worked on at once; more requests wait in the queue."""
    max_queued: NonNegativeInt = 64
    """Requests that may wait for a slot; a request beyond them is answered 429 with Retry-After."""
    queue_timeout_s: PositiveFloat = 60.0
    """Longest wait in the queue; a request that waited this long is answered 503 with Retry-After."""
    request_timeout_s: PositiveFloat | None = 120.0
    """Longest the server works on one response (the queue wait not counted): past it the episode is cancelled
    and the response is 504 ``request_timeout`` naming this limit; null (in a ``--config`` file): no limit.
    (``podium.max_seconds``, the episode's own deadline, ends it with the answer its observations hold instead.)"""
    client_tool_timeout_s: PositiveFloat = 300.0
    """How long an episode waits for the results of the client calls it handed out before it is cancelled."""
    max_waiting_episodes: PositiveInt = 128
    """Most episodes waiting for client tool results at once; past it the one waiting longest is cancelled."""
    max_request_bytes: PositiveInt = DEFAULT_MAX_BODY_BYTES
    """Largest request body read; a larger one is answered 413."""
    api_key_env: str | None = None
    """Environment variable holding one key clients must send as ``Authorization: Bearer <key>`` (named
    ``default``, no limit); unset, and without ``keys``: no key is needed."""
    keys: list[ApiKey] = Field(default_factory=list)
    """API keys, each with a name and an optional USD limit per UTC day."""
    spend_file: str | None = None
    """JSONL file where each key's spend is appended and read back at start (limits survive a restart)."""
    trace: str | None = None
    """Append every ended trajectory to this JSONL file."""
    request_log: str | None = None
    """Append one JSON line per response (refusals included) and per ended episode to this file (``-``: stderr)."""
    heartbeat_s: PositiveFloat = 2.0
    """Seconds between heartbeat events of a stream while the episode works without news."""
    served: str | None = None
    """Traffic directory: every ended episode (live and shadow: the system's version, the key, the task, its gold,
    every call with its worker and price, the answer, its grade, the trajectory) and every feedback is appended to
    it, synced before the response that reports it; ``POST /v1/feedback`` needs it, and ``podium data collect
    --from-served`` reads it."""
    max_shadow: PositiveInt = 2
    """Shadow episodes run at once; a request arriving while they all run gets no shadow (counted)."""
    admin_keys: list[str] = Field(default_factory=list)
    """Names of the keys that may promote a shadow (``POST /v1/models/{model}/promote``); where the server needs
    no key, anyone may."""

    @model_validator(mode="after")
    def _admins_are_keys(self) -> Self:
        named = {key.name for key in self.keys} | ({"default"} if self.api_key_env else set())
        unknown = sorted(set(self.admin_keys) - named)
        if unknown:
            raise ValueError(f"admin_keys: {unknown} name no key of keys or api_key_env")
        return self
