"""The exact policy gradient over a finite action tree: advantages for every path of an episode, weighted by the
path's probability, instead of a sampled group's (R − mean) / std.

When every action is a choice among a few words and every path's reward is known (a replay pool records each
alternative's outcome), J = Σ_paths P(path) R(path) can be differentiated exactly. With V(n) the expected reward
under the policy from node n and Q(n, w) = V(n + w),

    ∇J = Σ_nodes P(n) Σ_w π(w | n) (Q(n, w) − V(n)) ∇ log π(w | n),

and splitting each node's term over the paths through it gives path p, turn t the advantage
P(p) · (Q(n_t, w_t) − V(n_t)). The baseline V(n) makes the gradient of the normaliser of a constrained choice
vanish, so the unconstrained log-probability of the chosen word's decision tokens gives the same gradient. A forced
turn (one choice) has advantage 0. No variance: one pass over the tree replaces any number of samples.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

Step = tuple[Mapping[str, float], str]
"""One turn of a path: the policy's probability of each choice offered, and the word taken."""


@dataclass(frozen=True)
class ExpectedAdvantages:
    """Advantages of every path of one episode's tree."""

    per_turn: list[list[float]]
    """Path → its advantage at each turn."""
    path_probabilities: list[float]
    """Each path's probability under the policy."""
    value: float
    """The expected reward of the episode under the policy."""


def expected_advantages(paths: Sequence[Sequence[Step]], rewards: Sequence[float]) -> ExpectedAdvantages:
    """Per-turn advantages of ``paths`` (all leaves of one tree, each with its ``reward``)."""
    if len(paths) != len(rewards) or not paths:
        raise ValueError("give one reward per path, and at least one path")
    leaves = {tuple(word for _, word in path): reward for path, reward in zip(paths, rewards, strict=True)}
    if len(leaves) != len(paths):
        raise ValueError("two paths take the same words")
    offered: dict[tuple[str, ...], Mapping[str, float]] = {}
    for path in paths:
        words = tuple(word for _, word in path)
        for depth, (probabilities, _) in enumerate(path):
            offered.setdefault(words[:depth], probabilities)
    values: dict[tuple[str, ...], float] = {}

    def value(node: tuple[str, ...]) -> float:
        if node not in values:
            if node in leaves:
                values[node] = leaves[node]
            else:
                probabilities = offered[node]
                total = sum(probabilities.values())
                missing = [
                    word for word in probabilities if (*node, word) not in offered and (*node, word) not in leaves
                ]
                if missing:
                    raise ValueError(f"the tree is incomplete: no path takes {missing} after {list(node)}")
                values[node] = sum(p / total * value((*node, word)) for word, p in probabilities.items())
        return values[node]

    per_turn, weights = [], []
    for path in paths:
        words = tuple(word for _, word in path)
        probability = 1.0
        for probabilities, word in path:
            probability *= probabilities[word] / sum(probabilities.values())
        weights.append(probability)
        per_turn.append(
            [probability * (value(words[: depth + 1]) - value(words[:depth])) for depth in range(len(path))]
        )
    return ExpectedAdvantages(per_turn, weights, value(()))
