"""Decoding a reply that must be one of a finite set of strings (a policy whose every action is one word), exactly.

Token by token, grammar-constrained decoding of such a set renormalises the model's next-token distribution over
the tokens some choice still allows; wherever only one token is allowed the step is forced. So the probability
of a choice is the product, over the positions where the choices *branch*, of the renormalised probability of
its token there; every other token of it is forced and decides nothing. This module finds those branching
positions (which :mod:`podium.train` also uses to put the loss on decision tokens only) and walks them with any
source of next-token log-probabilities: the greedy choice, a sample at a temperature, and each choice's
probability under the model (at temperature 1).
"""

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

NextLogits = Callable[[Sequence[int]], Sequence[float]]
"""Next-token logits after the prompt followed by the given choice prefix (token ids)."""


def decision_positions(sequences: Sequence[Sequence[int]]) -> list[list[int]]:
    """For each token sequence, the positions where the set branches: another sequence shares the prefix before
    the position and has a different token there (or ends there). A set of one has no decision."""
    positions: list[list[int]] = []
    for sequence in sequences:
        mine = []
        for index in range(len(sequence)):
            prefix = tuple(sequence[:index])
            nexts = {tuple(other[: index + 1]) for other in sequences if tuple(other[:index]) == prefix}
            if len(nexts) > 1:
                mine.append(index)
        positions.append(mine)
    return positions


@dataclass(frozen=True)
class ChoiceDecoding:
    """What decoding one finite set produced."""

    index: int
    """The chosen sequence."""
    probabilities: list[float]
    """Each sequence's probability under the model at temperature 1 (sums to 1)."""


def _softmax(values: Sequence[float], temperature: float = 1.0) -> list[float]:
    top = max(values)
    weights = [math.exp((value - top) / temperature) for value in values]
    total = sum(weights)
    return [weight / total for weight in weights]


def decode_choice(
    sequences: Sequence[Sequence[int]], next_logits: NextLogits, *, temperature: float, rng: random.Random
) -> ChoiceDecoding:
    """Choose among ``sequences`` as constrained decoding would (greedy at temperature 0, else sampling at
    ``temperature``), and give every sequence's probability at temperature 1. ``next_logits`` is called once per
    branching prefix."""
    if not sequences:
        raise ValueError("no choice to decode")
    if len({tuple(sequence) for sequence in sequences}) != len(sequences):
        raise ValueError("two choices encode to the same tokens")
    logits_at: dict[tuple[int, ...], Sequence[float]] = {}

    def branch(prefix: tuple[int, ...]) -> tuple[list[int], list[float]]:
        """The distinct next tokens after ``prefix`` and their logits (one call per prefix)."""
        size = len(prefix)
        tokens = sorted({s[size] for s in sequences if tuple(s[:size]) == prefix and len(s) > size})
        if prefix not in logits_at:
            logits_at[prefix] = next_logits(prefix)
        return tokens, [float(logits_at[prefix][token]) for token in tokens]

    probabilities = []
    for sequence, positions in zip(sequences, decision_positions(sequences), strict=True):
        probability = 1.0
        for position in positions:
            tokens, logits = branch(tuple(sequence[:position]))
            probability *= _softmax(logits)[tokens.index(sequence[position])]
        probabilities.append(probability)
    prefix: tuple[int, ...] = ()
    while True:
        alive = [index for index, s in enumerate(sequences) if tuple(s[: len(prefix)]) == prefix]
        if len(alive) == 1:
            return ChoiceDecoding(alive[0], probabilities)
        tokens, logits = branch(prefix)
        if temperature > 0:
            token = rng.choices(tokens, weights=_softmax(logits, temperature))[0]
        else:
            token = tokens[max(range(len(tokens)), key=logits.__getitem__)]
        prefix = (*prefix, token)
