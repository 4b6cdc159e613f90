"""A small Gaussian-process Bayesian optimiser over binary vectors (which layers to skip).

What Draft & Verify and SWIFT get from the `bayes_opt` package, reduced to what they use: a GP
with a Matérn-5/2 kernel, noise `alpha` = 1e-2 (both papers' code), normalised targets, and the
upper confidence bound mean + κ·std as acquisition, maximised over a pool of candidate vectors
that the caller supplies (the search space is discrete, so no gradient ascent). The length scale
is refitted by marginal likelihood over a grid at each suggestion.
"""

from __future__ import annotations

import numpy as np

ALPHA = 1e-2
LENGTH_SCALES = (0.5, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0)


def matern52(a: np.ndarray, b: np.ndarray, scale: float) -> np.ndarray:
    d = np.sqrt(np.maximum(((a[:, None, :] - b[None, :, :]) ** 2).sum(-1), 0.0)) * np.sqrt(5.0) / scale
    return (1.0 + d + d * d / 3.0) * np.exp(-d)


class GaussianProcess:
    def __init__(self, alpha: float = ALPHA):
        self.alpha = alpha
        self.x: list[np.ndarray] = []
        self.y: list[float] = []

    def register(self, x, y: float) -> None:
        self.x.append(np.asarray(x, dtype=float))
        self.y.append(float(y))

    def _fit(self):
        x, y = np.stack(self.x), np.asarray(self.y)
        mean, std = y.mean(), y.std() or 1.0
        z = (y - mean) / std
        best = None
        for scale in LENGTH_SCALES:
            k = matern52(x, x, scale) + self.alpha * np.eye(len(x))
            chol = np.linalg.cholesky(k)
            weights = np.linalg.solve(chol.T, np.linalg.solve(chol, z))
            evidence = -0.5 * z @ weights - np.log(np.diag(chol)).sum()
            if best is None or evidence > best[0]:
                best = (evidence, scale, chol, weights)
        _, scale, chol, weights = best
        return x, mean, std, scale, chol, weights

    def ucb(self, candidates: np.ndarray, kappa: float) -> np.ndarray:
        """mean + κ·std of the posterior at each candidate row, in the targets' units."""
        x, mean, std, scale, chol, weights = self._fit()
        cross = matern52(candidates, x, scale)
        mu = cross @ weights
        v = np.linalg.solve(chol, cross.T)
        sigma = np.sqrt(np.maximum(1.0 - (v * v).sum(0), 0.0))
        return mean + std * (mu + kappa * sigma)

    def suggest(self, candidates: np.ndarray, kappa: float) -> np.ndarray:
        """The candidate with the highest upper confidence bound (a row of `candidates`)."""
        return candidates[int(np.argmax(self.ucb(candidates, kappa)))]

    def best(self) -> tuple[np.ndarray, float]:
        index = int(np.argmax(self.y))
        return self.x[index], self.y[index]
