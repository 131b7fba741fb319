"""L2-regularised logistic regression, fitted by Newton's method: the linear model of the ``logreg`` router, the
cascades and the Platt calibration of an orchestrator's escalation probability."""

import numpy as np


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


def logreg_probabilities(weights: np.ndarray, features: np.ndarray) -> np.ndarray:
    """Predicted probabilities under ``weights`` (bias last), one per row of ``features``."""
    x = np.hstack([features, np.ones((len(features), 1))])
    return 1.0 / (1.0 + np.exp(-(x @ weights)))
