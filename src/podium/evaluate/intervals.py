"""Confidence intervals for comparing two systems on the same items: the paired bootstrap.

Two systems answered the same items; each item has a value under each (correct or not, USD spent, a reward, or a
row of several such values). Resampling *items* with replacement, and taking both systems' values of each drawn
item together, keeps the pairing: the items both find easy or hard move together, so the interval of the difference
is much narrower than two separate intervals would suggest (Koehn 2004; Efron & Tibshirani 1993, ch. 13). The
interval is the percentile interval of the statistic's difference over the resamples.
"""

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike, NDArray

from podium.core.record import Record

DEFAULT_RESAMPLES = 2000
"""Resamples of a paired bootstrap (the percentile interval's ends are stable to about ±0.005 of a share there)."""


class PairedInterval(Record):
    """The difference ``statistic(b) − statistic(a)`` on paired items, and its bootstrap interval."""

    difference: float
    """The difference on the items as they are."""
    low: float
    """The interval's lower end."""
    high: float
    """The interval's upper end."""
    confidence: float
    """The interval's coverage (0.95: the 2.5th to the 97.5th percentile of the resampled differences)."""
    items: int
    """Paired items."""
    resamples: int
    """Bootstrap resamples drawn."""


def _mean(values: NDArray[np.float64]) -> float:
    return float(np.mean(values))


def paired_bootstrap(
    a: ArrayLike,
    b: ArrayLike,
    n: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    *,
    statistic: Callable[[NDArray[np.float64]], float] = _mean,
    confidence: float = 0.95,
) -> PairedInterval:
    """The paired bootstrap interval of ``statistic(b) − statistic(a)``.

    ``a`` and ``b`` hold one value (or one row of values) per item, item i of ``a`` paired with item i of ``b``;
    each of the ``n`` resamples draws as many items as there are, with replacement, from a generator seeded with
    ``seed`` (the same seed gives the same interval), and ``statistic`` (default: the mean) reduces each system's
    drawn values to a number.
    """
    first, second = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if first.shape != second.shape:
        raise ValueError(f"paired values need one per item on both sides: shapes {first.shape} and {second.shape}")
    if first.ndim == 0 or len(first) == 0:
        raise ValueError("no paired item to compare")
    if n < 1 or not 0.0 < confidence < 1.0:
        raise ValueError(f"need n ≥ 1 resamples and a confidence in (0, 1), got n={n}, confidence={confidence}")
    count = len(first)
    draws = np.random.default_rng(seed).integers(0, count, size=(n, count))
    differences = np.array([statistic(second[index]) - statistic(first[index]) for index in draws])
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(differences, [tail, 1.0 - tail])
    return PairedInterval(
        difference=statistic(second) - statistic(first),
        low=float(low),
        high=float(high),
        confidence=confidence,
        items=count,
        resamples=n,
    )
