"""The p-Identity strategy ``[I; Theta] D`` (HDMM Def. 13) and its pseudo-inverse, both
applied in O(p n) per vector through Woodbury's p x p Cholesky factor. D scales every column
to norm 1 in the sensitivity norm of the noise: L1 (Laplace, the paper's family) or L2
(Gaussian).
"""

from __future__ import annotations

from functools import cached_property

import numpy as np
import scipy.linalg as sla

from engine.linalg.matrix import (
    Matrix,
    PsdDense,
)


def column_scale(theta: np.ndarray, norm: int) -> np.ndarray:
    """The norms of the columns of ``[I; Theta]``: ``1 + colsum Theta`` (L1, Theta >= 0) or
    ``sqrt(1 + colsum Theta**2)`` (L2); D is their inverse."""
    if norm == 1:
        return 1.0 + theta.sum(axis=0)
    return np.sqrt(1.0 + (theta * theta).sum(axis=0))


class PIdentity(Matrix):
    """``A(Theta) = [I; Theta] D`` with ``D = diag(1 / (1 + colsum Theta))`` (HDMM Def. 13),
    or ``D = diag(1 / sqrt(1 + colsum Theta**2))`` for the L2 norm.

    Every column has norm 1 in the sensitivity norm ``norm``. The Gram ``D (I + Theta^T
    Theta) D`` is always invertible, and least squares uses Woodbury with a p x p Cholesky
    factor: O(p n) per vector.

    Args:
        theta: non-negative p x n array of extra-query weights.
        norm: 1 (columns of L1 norm 1: Laplace) or 2 (L2 norm 1: Gaussian).
    """

    def __init__(self, theta: np.ndarray, norm: int = 1) -> None:
        t = np.asarray(theta, dtype=float)
        if t.ndim == 1:
            t = t[None, :]
        if t.ndim != 2 or t.shape[1] < 1:
            raise ValueError(f"PIdentity: theta must be a p x n array, got shape {t.shape}")
        if np.any(t < 0) or not np.all(np.isfinite(t)):
            raise ValueError("PIdentity: theta must be finite and non-negative")
        if norm not in (1, 2):
            raise ValueError(f"PIdentity: norm must be 1 or 2, got {norm!r}")
        self.theta = t
        self.norm = int(norm)
        self.p, self.n = (int(v) for v in t.shape)
        self.scale = 1.0 / column_scale(t, norm)

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n + self.p, self.n)

    def _col(self, x: np.ndarray) -> np.ndarray:
        return self.scale[:, None] if x.ndim == 2 else self.scale

    def matvec(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        z = x * self._col(x)
        return np.concatenate([z, self.theta @ z])

    def rmatvec(self, y: np.ndarray) -> np.ndarray:
        y = np.asarray(y, dtype=float)
        out = y[:self.n] + self.theta.T @ y[self.n:]
        return out * self._col(out)

    def dense(self) -> np.ndarray:
        return np.vstack([np.eye(self.n), self.theta]) * self.scale

    def gram_array(self) -> np.ndarray:
        """``D (I + Theta^T Theta) D``."""
        G = self.theta.T @ self.theta
        G[np.diag_indices(self.n)] += 1.0
        return G * np.outer(self.scale, self.scale)

    def gram(self) -> Matrix:
        return PsdDense(self.gram_array(), self.gram_pinv)

    def pinv(self) -> Matrix:
        return PIdentityPinv(self)

    def column_norms(self, p: int) -> np.ndarray:
        if p == 1:
            return self.scale * (1.0 + self.theta.sum(axis=0))
        return self.scale * np.sqrt(1.0 + (self.theta**2).sum(axis=0))

    def fro2(self) -> float:
        return float((self.scale**2 * (1.0 + (self.theta**2).sum(axis=0))).sum())

    @cached_property
    def _small(self) -> tuple[np.ndarray, bool]:
        # Cholesky factor of I + Theta Theta^T (p x p): Woodbury's only inverse
        return sla.cho_factor(np.eye(self.p) + self.theta @ self.theta.T, lower=True,
                              check_finite=False)

    def _k_apply(self, z: np.ndarray) -> np.ndarray:
        """``(I + Theta^T Theta)^-1 z = z - Theta^T (I + Theta Theta^T)^-1 Theta z``."""
        return z - self.theta.T @ sla.cho_solve(self._small, self.theta @ z, check_finite=False)

    def gram_pinv(self) -> np.ndarray:
        """``(A^T A)^-1 = S K S`` with ``S = D^-1``."""
        s = 1.0 / self.scale
        return self._k_apply(np.eye(self.n)) * np.outer(s, s)

    def pinv_apply(self, y: np.ndarray) -> np.ndarray:
        """Least squares ``A^+ y = S K (y_top + Theta^T y_bottom)``."""
        y = np.asarray(y, dtype=float)
        z = self._k_apply(y[:self.n] + self.theta.T @ y[self.n:])
        return z / self._col(z)

    def pinv_matrix(self) -> np.ndarray:
        """The explicit n x (n + p) pseudo-inverse ``S K [I, Theta^T]``."""
        K = self._k_apply(np.eye(self.n))
        return np.hstack([K, K @ self.theta.T]) / self.scale[:, None]

    def __repr__(self) -> str:
        return f"PIdentity(p={self.p}, n={self.n}, norm={self.norm})"


class PIdentityPinv(Matrix):
    """``A(Theta)^+ = S K [I, Theta^T]`` applied in O(p n) per vector (Woodbury)."""

    def __init__(self, strategy: PIdentity) -> None:
        self.strategy = strategy

    @property
    def shape(self) -> tuple[int, int]:
        m, n = self.strategy.shape
        return (n, m)

    def matvec(self, x: np.ndarray) -> np.ndarray:
        return self.strategy.pinv_apply(x)

    def rmatvec(self, y: np.ndarray) -> np.ndarray:
        # (A^+)^T y = [I; Theta] K S y
        A = self.strategy
        y = np.asarray(y, dtype=float)
        z = A._k_apply(y / A._col(y))
        return np.concatenate([z, A.theta @ z])

    def dense(self) -> np.ndarray:
        return self.strategy.pinv_matrix()

    def pinv(self) -> Matrix:
        return self.strategy

