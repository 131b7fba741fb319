"""The decisions a fitted router makes: which worker a question router asks, where a cascade stops.

A question router asks the worker with the highest ``quality − cost_weight · cost`` (predicted accuracy less the
worth of its mean price; ties go to the cheaper worker): ``cost_weight`` 0 asks the worker most likely right, a
large one the cheapest. Sweeping ``cost_weight`` over all reals traces the router's cost–quality curve. With a
reward instead (``cost_penalty``: 1 − w · USD / s when right, else 0), it asks the worker of the highest expected
reward, ``quality · (1 − w · cost / s)``. A cascade stops at the first reply whose probability of being wrong is at
most ``threshold`` (the last worker always answers).
"""

from collections.abc import Sequence

import numpy as np


def cheapest_first(costs: Sequence[float]) -> np.ndarray:
    """Worker indices from the cheapest to the dearest (stable: equal costs keep their order)."""
    return np.argsort(np.asarray(costs, dtype=float), kind="stable")


def choose(quality: np.ndarray, costs: Sequence[float], cost_weight: float) -> np.ndarray:
    """For each row of ``quality`` (questions × workers), the worker of the highest ``quality − cost_weight ·
    cost``, the cheaper one on a tie."""
    order = cheapest_first(costs)
    values = quality[:, order] - cost_weight * np.asarray(costs, dtype=float)[order]
    return order[np.argmax(values, axis=1)]


def ranked(quality: np.ndarray, costs: Sequence[float], cost_weight: float) -> list[int]:
    """The workers in the order :func:`choose` prefers them for one question (``quality``: one row)."""
    order = cheapest_first(costs)
    values = quality[order] - cost_weight * np.asarray(costs, dtype=float)[order]
    return [int(order[i]) for i in np.argsort(-values, kind="stable")]


def choose_by_reward(quality: np.ndarray, costs: Sequence[float], weight: float, usd_scale: float) -> np.ndarray:
    """For each row, the worker of the highest expected ``cost_penalty`` reward, the cheaper one on a tie."""
    order = cheapest_first(costs)
    values = quality[:, order] * (1.0 - weight * np.asarray(costs, dtype=float)[order] / usd_scale)
    return order[np.argmax(values, axis=1)]


def cascade_stop(wrong: Sequence[float], threshold: float | Sequence[float]) -> int:
    """The level that answers: the first whose probability of a wrong reply is at most its threshold (one for
    every level, or one per level), else the last level (which ``wrong`` does not score)."""
    limits = [threshold] * len(wrong) if isinstance(threshold, int | float) else list(threshold)
    for level, probability in enumerate(wrong):
        if probability <= limits[level]:
            return level
    return len(wrong)
