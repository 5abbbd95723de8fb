"""The optimal Gram of a causal strategy for the prefix workload (single participation).

The programme (Denisov et al. 2022, eq. (4); Li & Miklau's matrix mechanism in L2):

    minimise tr(G X^-1)  subject to  diag(X) <= 1,  X positive definite,

with ``G = W^T W``. Its value is the unit total squared error ``||B||_F**2`` of the best
factorization ``W = B C`` with ``C^T C = X`` and unit sensitivity. The Lagrange dual is
``max_{lambda > 0} 2 tr((L^1/2 G L^1/2)^1/2) - sum(lambda)`` (``L = diag(lambda)``), whose
stationary point gives ``X = L^-1/2 M L^-1/2`` with ``M = (L^1/2 G L^1/2)^1/2``. Denisov et
al.'s fixed point ``lambda <- diag(M)`` is the multiplicative update ``lambda <- lambda
diag(X)``; we take it squared (``lambda <- lambda diag(X)**2``, an over-relaxed step that
needs about half the eigendecompositions on the prefix workload) and fall back to the plain
step whenever the dual value drops. Every iterate certifies the optimum two-sided: the dual
value is a lower bound and ``tr(M) max_i diag(X)_i`` (X rescaled to be feasible) an upper one.

The optimum can be taken lower triangular at no cost (the reversed Cholesky factor of X,
:func:`engine.linalg.causal.causal_factor`), so for single participation the best online
factorization is as good as the best offline matrix mechanism in L2 (Denisov et al. 2022,
Theorem 3.1): "the price of publishing every period" is paid only by the simpler strategies.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.progress import Progress, report


@dataclass(frozen=True)
class OptimalGram:
    """The solved programme.

    Attributes:
        gram: X with unit diagonal maximum (feasible).
        lower: the dual lower bound on the optimal unit total squared error.
        upper: the error of ``gram`` (an upper bound).
        iterations: eigendecompositions made.
    """

    gram: np.ndarray
    lower: float
    upper: float
    iterations: int

    @property
    def gap(self) -> float:
        """Relative duality gap ``upper / lower - 1``."""
        return self.upper / self.lower - 1.0


def _dual_step(G: np.ndarray, lam: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """``(M, diag(M), dual value)`` at ``lam``."""
    s = np.sqrt(lam)
    values, vectors = np.linalg.eigh(s[:, None] * G * s[None, :])
    M = (vectors * np.sqrt(np.maximum(values, 0.0))) @ vectors.T
    d = np.diag(M).copy()
    return M, d, float(2.0 * d.sum() - lam.sum())


def optimal_gram(G: np.ndarray, tolerance: float = 1e-6, max_iterations: int = 400,
                 progress: Progress | None = None) -> OptimalGram:
    """Solve ``min tr(G X^-1) s.t. diag(X) <= 1`` for a positive definite G.

    Stops when the relative duality gap is below ``tolerance`` or after ``max_iterations``
    eigendecompositions (the result then states its gap).
    """
    G = np.asarray(G, dtype=float)
    lam = np.ones(G.shape[0])
    best = OptimalGram(np.eye(G.shape[0]), -np.inf, np.inf, 0)
    lower = previous_dual = -np.inf
    power = 2.0
    for iteration in range(1, max_iterations + 1):
        M, d, dual = _dual_step(G, lam)
        if dual < previous_dual and power > 1.0:
            power = 1.0  # the over-relaxed step overshot: plain fixed point from here
        previous_dual = dual
        lower = max(lower, dual)
        ratio = d / lam
        upper = float(d.sum() * ratio.max())
        if upper < best.upper:
            X = M / np.sqrt(lam)[:, None] / np.sqrt(lam)[None, :] / ratio.max()
            best = OptimalGram(X, lower, upper, iteration)
        report(progress, iteration, upper, f"duality gap {upper / lower - 1:.2e}")
        if upper / lower - 1.0 <= tolerance:
            break
        lam = lam * ratio**power
    return OptimalGram(best.gram, lower, best.upper, iteration)
