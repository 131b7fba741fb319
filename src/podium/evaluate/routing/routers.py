"""Router baselines in RouteLLM's setting: each gives every question a score (higher: more in need of the strong
model) and calls the strong model when the score passes a threshold; sweeping the threshold traces the router's
cost-accuracy curve. The learned ones see the train split only.

- ``random``: a seeded uniform score (its curve is the diagonal, APGR ≈ 0.5);
- ``knn``: the k most similar train questions (cosine of MiniLM embeddings); the score is their mean of
  strong-correct minus weak-correct (RouteLLM's similarity-weighted idea without the Elo);
- ``logreg``: a small classifier, L2-regularised logistic regression on the MiniLM embedding, predicting that
  the weak model fails; the score is that probability.
- ``cascade``: a cascade (FrugalGPT's idea): the weak model always answers, then logistic regression on features
  of its *reply* (a final ``####`` line present, its length, ``<<a=b>>`` calculator annotations whose
  arithmetic is wrong) predicts that it failed, and the strong model is called above the threshold. It pays for
  the weak call on every question; it shows how much the weak reply tells an orchestrator that reads it.
- ``cascade_checks``: the same cascade, its logistic regression on what the ``check_arithmetic`` tool reports
  about the weak reply (wrong calculations, a missing, unmarked, fractional or uncomputed final answer, hedging):
  the observation the trained orchestrator reads, so the two compare a learned 135M model with a linear model on
  the same evidence.

``always_weak``, ``always_strong`` and ``oracle`` (strong exactly when it is right and the weak model is not)
are single operating points.
"""

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from podium.evaluate.routing.data import STRONG, WEAK, RoutingItem
from podium.evaluate.routing.metrics import Point
from podium.pool.builtin.arithmetic import check_text, evaluate

LEARNED_ROUTERS = ("knn", "logreg", "cascade", "cascade_checks")
"""The routers trained on the train split."""


def operating_point(items: Sequence[RoutingItem], strong: Sequence[bool], cascade: bool = False) -> Point:
    """The point reached by calling the strong model on the questions flagged in ``strong`` (with ``cascade``,
    after the weak model, whose cost is then paid on every question)."""
    chosen = [item.outcomes[STRONG if flag else WEAK] for item, flag in zip(items, strong, strict=True)]
    count = len(items)
    weak_first = sum(item.outcomes[WEAK].usd for item, flag in zip(items, strong, strict=True) if flag and cascade)
    return Point(
        strong_share=sum(strong) / count,
        accuracy=sum(outcome.correct for outcome in chosen) / count,
        usd_per_question=(sum(outcome.usd for outcome in chosen) + weak_first) / count,
    )


def sweep(items: Sequence[RoutingItem], scores: Sequence[float], cascade: bool = False) -> list[Point]:
    """Every operating point of a thresholded score: strong for the top 0, 1, … n scores (ties together)."""
    order = np.argsort(-np.asarray(scores, dtype=float), kind="stable")
    ranked = np.asarray(scores, dtype=float)[order]
    points = [operating_point(items, [False] * len(items), cascade)]
    flags = [False] * len(items)
    for position, index in enumerate(order):
        flags[int(index)] = True
        last_of_tie = position + 1 == len(order) or ranked[position + 1] != ranked[position]
        if last_of_tie:
            points.append(operating_point(items, flags, cascade))
    return points


def oracle_flags(items: Sequence[RoutingItem]) -> list[bool]:
    """Strong exactly where it is right and the weak model is wrong."""
    return [item.outcomes[STRONG].correct and not item.outcomes[WEAK].correct for item in items]


def random_scores(count: int, seed: int = 0) -> list[float]:
    """Uniform scores from a seeded generator."""
    return np.random.default_rng(seed).random(count).tolist()


def gain(items: Sequence[RoutingItem]) -> np.ndarray:
    """Per item: strong-correct minus weak-correct (1, 0 or −1)."""
    return np.array([int(i.outcomes[STRONG].correct) - int(i.outcomes[WEAK].correct) for i in items], dtype=float)


def knn_scores(train: np.ndarray, train_gain: np.ndarray, queries: np.ndarray, k: int = 20) -> list[float]:
    """Mean ``train_gain`` of the ``k`` most similar train rows (rows L2-normalised: inner product = cosine)."""
    similarity = queries @ train.T
    nearest = np.argsort(-similarity, axis=1)[:, :k]
    return train_gain[nearest].mean(axis=1).tolist()


def fit_logreg(features: np.ndarray, labels: np.ndarray, *, l2: float = 1.0, steps: int = 50) -> np.ndarray:
    """Weights (bias last) of L2-regularised logistic regression, fitted to convergence by Newton's method (the
    bias is not regularised); ``steps`` bounds the iterations."""
    x = np.hstack([features, np.ones((len(features), 1))])
    penalty = l2 * np.diag(np.r_[np.ones(x.shape[1] - 1), 0.0])
    weights = np.zeros(x.shape[1])
    for _ in range(steps):
        probability = 1.0 / (1.0 + np.exp(-(x @ weights)))
        gradient = x.T @ (probability - labels) + penalty @ weights
        hessian = (x * (probability * (1.0 - probability))[:, None]).T @ x + penalty + 1e-9 * np.eye(x.shape[1])
        update = np.linalg.solve(hessian, gradient)
        weights -= update
        if np.abs(update).max() < 1e-8:
            break
    return weights


def logreg_scores(weights: np.ndarray, features: np.ndarray) -> list[float]:
    """Predicted probabilities under ``weights``."""
    x = np.hstack([features, np.ones((len(features), 1))])
    return (1.0 / (1.0 + np.exp(-(x @ weights)))).tolist()


_CALC = re.compile(r"<<([^=<>]+)=([^<>]+)>>")


def reply_features(reply: str) -> list[float]:
    """What the weak reply shows: a ``####`` final line, its length (log chars), wrong calculator annotations."""
    wrong = 0
    for expression, result in _CALC.findall(reply):
        try:
            wrong += abs(evaluate(expression) - float(result.replace(",", ""))) > 1e-6
        except ValueError:
            continue
    return [float("####" in reply), float(np.log1p(len(reply))) / 8.0, float(min(wrong, 3))]


def cascade_scores(
    train: Sequence[RoutingItem], test: Sequence[RoutingItem], features: Callable[[str], list[float]] = reply_features
) -> list[float]:
    """Probability that the weak reply is wrong, by logistic regression on ``features`` of it (train split)."""
    x = np.array([features(item.outcomes[WEAK].response or "") for item in train])
    labels = np.array([not item.outcomes[WEAK].correct for item in train], dtype=float)
    weights = fit_logreg(x, labels, l2=0.1)
    return logreg_scores(weights, np.array([features(item.outcomes[WEAK].response or "") for item in test]))


def check_features(reply: str) -> list[float]:
    """What ``check_arithmetic`` reports about a reply, as numbers."""
    return check_text(reply).features()


@dataclass(frozen=True)
class Scores:
    """A router's score of each test question."""

    values: list[float]
    cascade: bool = False
    """Whether the weak model answers first (a cascade pays for its call on every question)."""
    probability: bool = False
    """Whether the score is the probability that the weak model fails, so that a price sheet's break-even
    probability places it (:mod:`podium.evaluate.routing.priced`)."""


def router_scores(
    train: Sequence[RoutingItem],
    test: Sequence[RoutingItem],
    train_vectors: np.ndarray,
    test_vectors: np.ndarray,
    *,
    seed: int = 0,
) -> dict[str, Scores]:
    """Every thresholded router's scores on ``test``, the learned ones fitted on ``train``; the cascades only where
    the weak model's replies are recorded (not in an outcome-only recording)."""
    weak_fails = np.array([not item.outcomes[WEAK].correct for item in train], dtype=float)
    scores = {
        "random": Scores(random_scores(len(test), seed)),
        "knn": Scores(knn_scores(train_vectors, gain(train), test_vectors)),
        "logreg": Scores(logreg_scores(fit_logreg(train_vectors, weak_fails), test_vectors), probability=True),
    }
    if all(item.outcomes[WEAK].response is not None for item in (*train, *test)):
        scores["cascade"] = Scores(cascade_scores(train, test), cascade=True, probability=True)
        scores["cascade_checks"] = Scores(cascade_scores(train, test, check_features), cascade=True, probability=True)
    return scores


def router_curves(test: Sequence[RoutingItem], scores: dict[str, Scores]) -> dict[str, list[Point]]:
    """The single operating points of always-weak, always-strong and the oracle, then every router's sweep."""
    return {
        "always_weak": [operating_point(test, [False] * len(test))],
        "always_strong": [operating_point(test, [True] * len(test))],
        "oracle": [operating_point(test, oracle_flags(test))],
        **{name: sweep(test, score.values, score.cascade) for name, score in scores.items()},
    }


def priced_points(test: Sequence[RoutingItem], scores: dict[str, Scores], breakeven: float) -> dict[str, Point]:
    """Each probability router's operating point when it calls the strong model where its score exceeds
    ``breakeven``."""
    return {
        name: operating_point(test, [value > breakeven for value in score.values], score.cascade)
        for name, score in scores.items()
        if score.probability
    }
