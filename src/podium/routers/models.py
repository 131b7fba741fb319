"""The fitted routers, each fitted on a recording's train split and saved as one ``.npz`` file (its parameters and a
JSON header; loaded without pickle).

Question routers predict each worker's probability of answering right from the question's MiniLM embedding (rows
L2-normalised, so an inner product is a cosine):

- ``knn``: the share of the ``k`` most similar train questions each worker got right (RouteLLM's similarity idea);
- ``logreg``: one L2-regularised logistic regression per worker;
- ``mf``: matrix factorisation as in RouteLLM's MF router, fitted to every worker at once: the logit of worker ``w``
  on question ``x`` is ``v_w · (W x + b) + c_w`` (a projection of the question, a vector and a bias per worker),
  trained by Adam on the cross-entropy of every (train question, worker) outcome, from a fixed seed.

A cascade asks its workers in order (by default from the cheapest) and predicts, from a reply's checks
(:mod:`podium.routers.checks`), the probability that the reply is wrong: one logistic regression per worker but the
last, on that worker's train replies. ``cascade`` reads the reply checks, ``cascade_checks`` also the verify tool's
report (for maths, ``check_arithmetic``'s: the evidence the trained orchestrator reads).
"""

import io
import json
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np

from podium.core.answers import VerifierKind
from podium.core.files import write_bytes_atomically
from podium.errors import ConfigError
from podium.routers.checks import reply_checks, verify_checks
from podium.routers.logistic import fit_logreg, logreg_probabilities

RouterKind = Literal["knn", "logreg", "mf", "cascade", "cascade_checks"]
"""The routers that can be fitted and deployed."""
QUESTION_ROUTERS: tuple[RouterKind, ...] = ("knn", "logreg", "mf")
CASCADES: tuple[RouterKind, ...] = ("cascade", "cascade_checks")
FORMAT = "podium-router/1"


class FittedRouter:
    """A fitted router: its workers (in the order of its arrays), their mean train cost, and its parameters."""

    kind: ClassVar[RouterKind]

    def __init__(self, workers: list[str], costs: np.ndarray, answer_kind: VerifierKind,
                 arrays: dict[str, np.ndarray], params: dict[str, Any]) -> None:  # fmt: skip
        self.workers = workers
        self.costs = np.asarray(costs, dtype=float)
        """Each worker's mean USD per train task, at the prices the router was fitted under."""
        self.answer_kind = answer_kind
        """The tasks' answer kind (which reply checks a cascade reads)."""
        self.arrays = arrays
        self.params = params

    def save(self, path: str | Path) -> Path:
        """Write the router to ``path`` (``.npz``), atomically."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        header = {"format": FORMAT, "kind": self.kind, "workers": self.workers, "costs": self.costs.tolist(),
                  "answer_kind": self.answer_kind, "params": self.params}  # fmt: skip
        buffer = io.BytesIO()
        np.savez(buffer, header=np.array(json.dumps(header)), **self.arrays)
        write_bytes_atomically(path, buffer.getvalue())
        return path


class QuestionRouter(FittedRouter):
    """A router that predicts each worker's accuracy from the question alone."""

    def quality(self, vectors: np.ndarray) -> np.ndarray:
        """P(worker right) for each question (rows) and worker (columns)."""
        raise NotImplementedError


class KnnRouter(QuestionRouter):
    kind = "knn"

    @classmethod
    def fit(cls, workers: list[str], costs: np.ndarray, answer_kind: VerifierKind, vectors: np.ndarray,
            correct: np.ndarray, k: int = 20) -> "KnnRouter":  # fmt: skip
        return cls(workers, costs, answer_kind, {"vectors": vectors, "correct": correct.astype(np.int8)}, {"k": k})

    def quality(self, vectors: np.ndarray) -> np.ndarray:
        similarity = vectors @ self.arrays["vectors"].T
        nearest = np.argsort(-similarity, axis=1)[:, : int(self.params["k"])]
        return self.arrays["correct"][nearest].mean(axis=1)


class LogregRouter(QuestionRouter):
    kind = "logreg"

    @classmethod
    def fit(cls, workers: list[str], costs: np.ndarray, answer_kind: VerifierKind, vectors: np.ndarray,
            correct: np.ndarray, l2: float = 1.0) -> "LogregRouter":  # fmt: skip
        weights = np.stack([fit_logreg(vectors, correct[:, column].astype(float), l2=l2)
                            for column in range(correct.shape[1])])  # fmt: skip
        return cls(workers, costs, answer_kind, {"weights": weights}, {"l2": l2})

    def quality(self, vectors: np.ndarray) -> np.ndarray:
        return np.stack([logreg_probabilities(weights, vectors) for weights in self.arrays["weights"]], axis=1)


class MfRouter(QuestionRouter):
    kind = "mf"

    @classmethod
    def fit(cls, workers: list[str], costs: np.ndarray, answer_kind: VerifierKind, vectors: np.ndarray,
            correct: np.ndarray, dimension: int = 16, steps: int = 400, learning_rate: float = 0.02,
            l2: float = 1e-3, seed: int = 0) -> "MfRouter":  # fmt: skip
        rng = np.random.default_rng(seed)
        parameters = {
            "projection": rng.normal(0.0, 0.1, (vectors.shape[1], dimension)),
            "offset": np.zeros(dimension),
            "worker_vectors": rng.normal(0.0, 0.1, (correct.shape[1], dimension)),
            "worker_bias": np.zeros(correct.shape[1]),
        }
        labels = correct.astype(float)
        moments = {name: (np.zeros_like(value), np.zeros_like(value)) for name, value in parameters.items()}
        for step in range(1, steps + 1):
            hidden = vectors @ parameters["projection"] + parameters["offset"]
            logits = hidden @ parameters["worker_vectors"].T + parameters["worker_bias"]
            error = (1.0 / (1.0 + np.exp(-logits)) - labels) / labels.size  # d(mean cross-entropy)/d(logit)
            back = error @ parameters["worker_vectors"]
            gradients = {
                "projection": vectors.T @ back + l2 * parameters["projection"],
                "offset": back.sum(axis=0),
                "worker_vectors": error.T @ hidden + l2 * parameters["worker_vectors"],
                "worker_bias": error.sum(axis=0),
            }
            for name, gradient in gradients.items():  # Adam
                first, second = moments[name]
                first[:] = 0.9 * first + 0.1 * gradient
                second[:] = 0.999 * second + 0.001 * gradient**2
                corrected = first / (1 - 0.9**step), second / (1 - 0.999**step)
                parameters[name] -= learning_rate * corrected[0] / (np.sqrt(corrected[1]) + 1e-8)
        params = {"dimension": dimension, "steps": steps, "learning_rate": learning_rate, "l2": l2, "seed": seed}
        return cls(workers, costs, answer_kind, parameters, params)

    def quality(self, vectors: np.ndarray) -> np.ndarray:
        hidden = vectors @ self.arrays["projection"] + self.arrays["offset"]
        return 1.0 / (1.0 + np.exp(-(hidden @ self.arrays["worker_vectors"].T + self.arrays["worker_bias"])))


class CascadeRouter(FittedRouter):
    """Workers asked in order (``workers``); a reply of each but the last is checked."""

    kind = "cascade"

    @classmethod
    def fit(cls, workers: list[str], costs: np.ndarray, answer_kind: VerifierKind, replies: list[list[str]],
            correct: np.ndarray, l2: float = 0.1) -> "CascadeRouter":  # fmt: skip
        """``replies[i][j]``: worker ``j``'s reply to train task ``i``; ``correct`` likewise; workers in order."""
        router = cls(workers, costs, answer_kind, {}, {"l2": l2})
        levels = []
        for level in range(len(workers) - 1):
            features = np.array([router.features(row[level]) for row in replies])
            levels.append(fit_logreg(features, (~correct[:, level].astype(bool)).astype(float), l2=l2))
        router.arrays = {"levels": np.stack(levels)}
        return router

    def features(self, reply: str) -> list[float]:
        """What this cascade reads of a reply."""
        return reply_checks(reply, self.answer_kind)

    def wrong(self, level: int, replies: list[str]) -> np.ndarray:
        """P(reply wrong) for each of ``replies`` of the worker at ``level`` (not the last)."""
        return logreg_probabilities(self.arrays["levels"][level], np.array([self.features(r) for r in replies]))


class CheckedCascadeRouter(CascadeRouter):
    """A cascade that also reads the verify tool's report on each reply."""

    kind = "cascade_checks"

    def features(self, reply: str) -> list[float]:
        report = verify_checks(reply, self.answer_kind)
        if report is None:
            raise ConfigError(f"cascade_checks: tasks of kind {self.answer_kind} have no verify tool; use cascade")
        return report


ROUTER_CLASSES: dict[str, type[FittedRouter]] = {
    router.kind: router for router in (KnnRouter, LogregRouter, MfRouter, CascadeRouter, CheckedCascadeRouter)
}


def load_router(path: str | Path) -> FittedRouter:
    """The router saved at ``path``; a :class:`ConfigError` naming the file where it is not one."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as data:
            header = json.loads(str(data["header"]))
            arrays = {name: data[name] for name in data.files if name != "header"}
    except (OSError, ValueError, KeyError) as error:
        raise ConfigError(f"{path}: not a fitted router ({error})") from error
    if header.get("format") != FORMAT or header.get("kind") not in ROUTER_CLASSES:
        raise ConfigError(f"{path}: not a fitted router of format {FORMAT}")
    router_class = ROUTER_CLASSES[header["kind"]]
    return router_class(header["workers"], np.array(header["costs"]), header["answer_kind"], arrays, header["params"])
