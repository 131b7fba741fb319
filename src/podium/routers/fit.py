"""Fitting a router on a recording's train tasks (:class:`~podium.routers.data.RoutingItem`), with its parameters."""

from collections.abc import Sequence
from typing import Any

import numpy as np

from podium.core.answers import VerifierKind
from podium.errors import ConfigError
from podium.routers.data import RoutingItem, mean_costs
from podium.routers.decide import cheapest_first
from podium.routers.models import (
    CASCADES,
    ROUTER_CLASSES,
    CascadeRouter,
    FittedRouter,
    KnnRouter,
    LogregRouter,
    MfRouter,
    RouterKind,
)


def embed(questions: Sequence[str]) -> np.ndarray:
    """MiniLM embeddings of ``questions`` (L2-normalised rows), kept in Podium's cache."""
    from podium.retrieval.embedding import CachedEmbeddings  # the search extra; question routers need it

    return CachedEmbeddings().encode(list(questions))


def fit_router(
    kind: RouterKind,
    train: Sequence[RoutingItem],
    workers: Sequence[str],
    answer_kind: VerifierKind,
    *,
    vectors: np.ndarray | None = None,
    order: Sequence[str] | None = None,
    params: dict[str, Any] | None = None,
) -> FittedRouter:
    """``kind`` fitted on ``train`` over ``workers`` (a question router on the questions' ``vectors``, embedded
    when not given; a cascade over ``order``, default from the cheapest); ``params`` are the kind's own (``k``,
    ``l2``, ``dimension``…)."""
    if kind not in ROUTER_CLASSES:
        raise ConfigError(f"router: '{kind}' is not one of {', '.join(ROUTER_CLASSES)}")
    if not train:
        raise ConfigError("a router is fitted on the recording's train split, which has no scorable task")
    params = params or {}
    costs = np.array(mean_costs(train, workers))
    if kind in CASCADES:
        chain = list(order) if order else [workers[i] for i in cheapest_first(costs)]
        unknown = sorted(set(chain) - set(workers))
        if unknown or len(chain) < 2 or len(set(chain)) != len(chain):
            raise ConfigError(f"order: {chain} must name two or more distinct workers of {list(workers)}")
        if any(item.outcomes[name].response is None for item in train for name in chain):
            raise ConfigError(f"router {kind}: the recording keeps no replies (outcomes only): a cascade reads them")
        chain_costs = np.array(mean_costs(train, chain))
        replies = [[item.outcomes[name].response or "" for name in chain] for item in train]
        correct = np.array([[item.outcomes[name].correct for name in chain] for item in train])
        cascade: type[CascadeRouter] = ROUTER_CLASSES[kind]  # type: ignore[assignment]
        return cascade.fit(chain, chain_costs, answer_kind, replies, correct, **params)
    if vectors is None:
        vectors = embed([item.question for item in train])
    correct = np.array([[item.outcomes[name].correct for name in workers] for item in train])
    question_router: type[KnnRouter | LogregRouter | MfRouter] = ROUTER_CLASSES[kind]  # type: ignore[assignment]
    return question_router.fit(list(workers), costs, answer_kind, vectors, correct, **params)
