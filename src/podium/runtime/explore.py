"""Every path of an episode whose actions are all choices among a few words (the ``escalate`` policy), played once.

On a pool whose workers answer deterministically (replayed recordings), the tree of an episode's action paths is
small and each path's outcome is fixed, so it can be walked whole instead of sampled: an oracle teacher picks the
best path (``podium data collect`` with ``samples: all``), and RL can take the exact expectation of the reward
over the policy's distribution (``podium train grpo`` with ``advantage: expected``).

The walk is depth-first. Each episode runs through the executor with a :class:`PathBackend` as orchestrator: it
answers a path prefix word by word and, past the prefix, the first of the choices the policy offers, noting every
choice set it met; the unexplored siblings along the way become new prefixes. Every leaf is reached exactly once.
With a scoring backend (the policy being trained), each turn also records that backend's probability of every
choice (the same prompt is scored once per node thanks to the local backend's prompt cache).
"""

from collections.abc import Awaitable, Callable, Sequence

from podium.backends.base import BackendError, ChatBackend, Completion, GenerationRequest
from podium.core.trajectory import Trajectory
from podium.errors import ConfigError

MAX_PATHS = 256
"""Most paths one episode may have: a larger tree is refused rather than walked."""

Play = Callable[[ChatBackend], Awaitable[Trajectory]]
"""Runs one episode with the given orchestrator backend."""


class PathBackend(ChatBackend):
    """An orchestrator that follows a path of words, then takes the first choice offered at each new node."""

    supports_regex = True
    supports_choices = True

    def __init__(self, prefix: Sequence[str], scorer: ChatBackend | None = None) -> None:
        super().__init__(scorer.model if scorer is not None else "explorer", scorer.price if scorer else None)
        self.prefix = list(prefix)
        self.scorer = scorer
        self.offered: list[tuple[str, ...]] = []
        """The choice set of every turn, in order."""

    async def _complete(self, request: GenerationRequest) -> Completion:
        if not request.choices:
            raise BackendError("exploring needs a policy whose every action is one of a few words (e.g. route)")
        turn = len(self.offered)
        self.offered.append(request.choices)
        word = self.prefix[turn] if turn < len(self.prefix) else request.choices[0]
        if word not in request.choices:
            raise BackendError(f"path word {word!r} is not offered at turn {turn} ({list(request.choices)})")
        if self.scorer is None:
            return Completion(word, 0, 0, "stop")
        scored = await self.scorer.generate(request.messages, max_tokens=request.max_tokens, choices=request.choices)
        return Completion(word, scored.input_tokens, 0, "stop", choice_probs=scored.choice_probs)


async def explore(play: Play, scorer: ChatBackend | None = None, *, max_paths: int = MAX_PATHS) -> list[Trajectory]:
    """Every leaf of the episode's action tree, depth-first; ``play`` runs one episode with the given
    orchestrator. Each trajectory's turns hold the words taken (and, with ``scorer``, the choice probabilities)."""
    pending: list[list[str]] = [[]]
    leaves: list[Trajectory] = []
    while pending:
        prefix = pending.pop()
        backend = PathBackend(prefix, scorer)
        trajectory = await play(backend)
        error = trajectory.metadata.get("error")
        if error is not None:
            raise BackendError(f"exploring path {prefix}: {error}")
        leaves.append(trajectory)
        taken = [turn.output for turn in trajectory.turns]
        for depth in range(len(prefix), len(backend.offered)):
            pending.extend([*taken[:depth], word] for word in reversed(backend.offered[depth][1:]))
        if len(leaves) + len(pending) > max_paths:
            raise ConfigError(f"the episode has more than {max_paths} action paths: too many to explore")
    return leaves
