"""Causal (lower-triangular) factorizations of the prefix-sum matrix, for continual release.

A continual release publishes, after each step t, an estimate of the running total of steps
1..t. The matrix mechanism does it with a factorization ``W = B C`` of the n x n prefix
matrix W where both factors are lower triangular: ``C x + z`` is measured one row per step and
``B (C x + z)`` is the release, so each published number uses only the noise drawn so far.
With unit noise per unit L2 sensitivity the expected total squared error is
``||B||_F**2 * max_j ||C e_j||**2``.

This module holds the shared algebra of the online families:

* :class:`LowerToeplitz`: a lower-triangular Toeplitz matrix from its first column (FFT
  products, closed-form column norms, the inverse by power-series inversion);
* :class:`BufferedToeplitz`: a buffered linear Toeplitz (BLT) matrix, one first-order
  recurrence per buffer (O(buffers) state per step), and :func:`blt_inverse`;
* :func:`sqrt_coefficients`: ``binom(2k, k) / 4**k``, the square root of the prefix matrix
  (Fichtenberger, Henzinger & Upadhyay, "Constant matters", ICML 2023);
* :func:`blt_sensitivity2`, :func:`blt_prefix_total_variance`, :func:`blt_last_step_variance`:
  a BLT's sensitivity, total and last-step error in closed form, O(buffers^3) whatever the
  horizon (BLT: Dvijotham, McMahan, Pillutla, Steinke & Thakurta, "Efficient and
  near-optimal noise generation for streaming differential privacy", FOCS 2024);
* :func:`causal_factor`: the lower-triangular C with ``C^T C = X`` (a reversed Cholesky), by
  which an optimal Gram X becomes a causal strategy (Denisov, McMahan, Rush, Smith & Thakurta,
  NeurIPS 2022, section 3);
* :func:`prefix_step_variances`: per-step unit variances of the release ``B y`` when C is
  Toeplitz, from C's inverse in O(n).
"""

from __future__ import annotations

import numpy as np
import scipy.linalg as sla
from scipy.signal import lfilter, oaconvolve

from engine.linalg.matrix import DENSE_GUARD, Matrix

#: Largest condition number of a BLT's mode basis for which its closed forms are trusted.
MAX_MODE_CONDITION = 1e6


def sqrt_coefficients(n: int) -> np.ndarray:
    """``c_k = binom(2k, k) / 4**k`` for k < n: the first column of the lower-triangular
    Toeplitz square root of the n x n prefix matrix (the series of ``(1 - x)**-1/2``)."""
    k = np.arange(1, n, dtype=float)
    return np.concatenate(([1.0], np.cumprod((2.0 * k - 1.0) / (2.0 * k))))[:n]


def series_inverse(c: np.ndarray) -> np.ndarray:
    """The first n coefficients of ``1 / c(x)`` (c[0] != 0), by Newton doubling with FFT
    products: O(n log n)."""
    c = np.asarray(c, dtype=float)
    n = c.size
    if n == 0 or c[0] == 0.0:
        raise ValueError("series_inverse: the leading coefficient must be non-zero")
    g = np.array([1.0 / c[0]])
    m = 1
    while m < n:
        m = min(2 * m, n)
        cg = oaconvolve(c[:m], g)[:m]
        correction = -cg
        correction[0] += 2.0
        g = oaconvolve(g, correction)[:m]
    return g


def _columns(x: np.ndarray) -> tuple[np.ndarray, bool]:
    x = np.asarray(x, dtype=float)
    return (x[:, None], True) if x.ndim == 1 else (x, False)


class LowerToeplitz(Matrix):
    """The n x n lower-triangular Toeplitz matrix with first column ``coefficients``.

    Products use FFT convolution (O(n log n)); column norms are cumulative sums of the
    coefficients (column j holds ``c_0 .. c_{n-1-j}``); the inverse is again lower-triangular
    Toeplitz (:func:`series_inverse`).
    """

    def __init__(self, coefficients: np.ndarray) -> None:
        c = np.array(coefficients, dtype=float).reshape(-1)
        if c.size == 0:
            raise ValueError("LowerToeplitz: needs at least one coefficient")
        c.setflags(write=False)
        self.coefficients = c

    @property
    def shape(self) -> tuple[int, int]:
        n = int(self.coefficients.size)
        return (n, n)

    def matvec(self, x: np.ndarray) -> np.ndarray:
        x2, flat = _columns(x)
        n = self.coefficients.size
        out = oaconvolve(self.coefficients[:, None], x2, axes=0)[:n]
        return out[:, 0] if flat else out

    def rmatvec(self, y: np.ndarray) -> np.ndarray:
        # J C^T J = C for a Toeplitz C (J reverses): C^T y = J C J y
        y2, flat = _columns(y)
        out = self.matvec(y2[::-1])[::-1]
        return out[:, 0] if flat else out

    def dense(self) -> np.ndarray:
        self.check_dense()
        n = self.coefficients.size
        return sla.toeplitz(self.coefficients, np.zeros(n))

    def column_norms(self, p: int) -> np.ndarray:
        c = np.abs(self.coefficients) if p == 1 else self.coefficients**2
        cumulative = np.cumsum(c)[::-1]
        return cumulative if p == 1 else np.sqrt(cumulative)

    def fro2(self) -> float:
        n = self.coefficients.size
        return float(((n - np.arange(n)) * self.coefficients**2).sum())

    def pinv(self) -> Matrix:
        return LowerToeplitz(series_inverse(self.coefficients))

    def __repr__(self) -> str:
        return f"LowerToeplitz(n={self.coefficients.size})"


class BufferedToeplitz(Matrix):
    """The n x n lower-triangular Toeplitz matrix with ``c_0 = 1`` and
    ``c_k = sum_j weights_j rates_j**(k-1)`` (k >= 1): a buffered linear Toeplitz (BLT)
    matrix (Dvijotham et al. 2024, section 3). Weights and rates may be complex in conjugate
    pairs (the inverse of a real BLT is one); the matrix is real.

    A product runs one first-order recurrence per buffer (``scipy.signal.lfilter``), keeping
    one number per buffer per step: the memory of a streaming release. First-order sections
    stay accurate for rates within 1e-6 of 1, where the expanded polynomial would not.
    """

    def __init__(self, weights: np.ndarray, rates: np.ndarray, n: int) -> None:
        w = np.array(weights).reshape(-1)
        r = np.array(rates).reshape(-1)
        if w.size != r.size or n < 1:
            raise ValueError("BufferedToeplitz: needs as many weights as rates and n >= 1")
        w.setflags(write=False)
        r.setflags(write=False)
        self.weights, self.rates, self.n = w, r, int(n)

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n, self.n)

    @property
    def buffers(self) -> int:
        """Numbers of state kept per step."""
        return int(self.rates.size)

    def matvec(self, x: np.ndarray) -> np.ndarray:
        x2, flat = _columns(x)
        out = x2.copy()
        for w, r in zip(self.weights, self.rates, strict=True):
            out += np.real(w * lfilter([0.0, 1.0], [1.0, -r], x2, axis=0))
        return out[:, 0] if flat else out

    def rmatvec(self, y: np.ndarray) -> np.ndarray:
        y2, flat = _columns(y)
        out = self.matvec(y2[::-1])[::-1]
        return out[:, 0] if flat else out

    def coefficients(self) -> np.ndarray:
        """The first column (n numbers)."""
        impulse = np.zeros(self.n)
        impulse[0] = 1.0
        return self.matvec(impulse)

    def dense(self) -> np.ndarray:
        self.check_dense()
        return sla.toeplitz(self.coefficients(), np.zeros(self.n))

    def column_norms(self, p: int) -> np.ndarray:
        return LowerToeplitz(self.coefficients()).column_norms(p)

    def fro2(self) -> float:
        return LowerToeplitz(self.coefficients()).fro2()

    def pinv(self) -> Matrix:
        alpha, beta = blt_inverse(self.weights, self.rates)
        return BufferedToeplitz(alpha, beta, self.n)

    def __repr__(self) -> str:
        return f"BufferedToeplitz(n={self.n}, buffers={self.buffers})"


def blt_inverse(weights: np.ndarray, rates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(weights, rates)`` of the inverse of a BLT matrix, itself a BLT.

    In state-space form ``c(x) = 1 + x w^T (I - x R)^-1 1`` (R = diag(rates)), so the
    inverse has ``r_k = -w^T (R - 1 w^T)**(k-1) 1``: its rates are the eigenvalues of
    ``R - 1 w^T`` and its weights ``-(w^T V)_i (V^-1 1)_i`` for the eigenvectors V (distinct
    eigenvalues assumed, as for any fitted BLT).
    """
    w = np.asarray(weights)
    r = np.asarray(rates)
    beta, V = np.linalg.eig(np.diag(r) - np.outer(np.ones(r.size), w))
    alpha = -(w @ V) * np.linalg.solve(V, np.ones(r.size))
    return alpha, beta


def blt_sensitivity2(omega: np.ndarray, theta: np.ndarray, n: int) -> float:
    """``sum_{k<n} c_k**2`` of a buffered linear Toeplitz matrix in closed form, O(buffers^2):
    the squared norm of its first (largest) column."""
    omega = np.asarray(omega, dtype=float)
    theta = np.asarray(theta, dtype=float)
    q = np.multiply.outer(theta, theta)
    steps = n - 1
    with np.errstate(divide="ignore", invalid="ignore"):
        geometric = np.where(np.isclose(q, 1.0), float(steps), -np.expm1(steps * np.log(q))
                             / (1.0 - q))
    return float(1.0 + omega @ geometric @ omega)


def prefix_step_variances(inverse_coefficients: np.ndarray) -> np.ndarray:
    """Unit variance of each published prefix sum for a Toeplitz strategy C.

    With ``r`` the first column of ``C^-1``, the release is ``B y`` with ``B = W C^-1``
    Toeplitz with first column ``b = cumsum(r)``; step t (1-based) has variance
    ``sum_{k<t} b_k**2`` per unit noise.
    """
    b = np.cumsum(np.asarray(inverse_coefficients, dtype=float))
    return np.cumsum(b * b)


def prefix_total_variance(inverse_coefficients: np.ndarray) -> float:
    """``||W C^-1||_F**2 = sum_k (n - k) b_k**2`` (the sum of :func:`prefix_step_variances`)."""
    b = np.cumsum(np.asarray(inverse_coefficients, dtype=float))
    n = b.size
    return float(((n - np.arange(n)) * b * b).sum())


def causal_factor(X: np.ndarray) -> np.ndarray:
    """The lower-triangular C with ``C^T C = X`` for a positive definite X.

    ``J X J = M M^T`` (Cholesky, J the reversal) gives ``C = J M^T J``: the strategy with the
    Gram X whose rows can be measured one step at a time.
    """
    X = np.asarray(X, dtype=float)
    if X.size > DENSE_GUARD:
        raise ValueError(f"causal_factor: a {X.shape[0]:,} x {X.shape[1]:,} Gram is above the "
                         "dense guard")
    M = np.linalg.cholesky(X[::-1, ::-1])
    return np.ascontiguousarray(M.T[::-1, ::-1])


def prefix_gram(n: int) -> np.ndarray:
    """``W^T W`` of the n x n prefix matrix: entry (i, j) is ``n - max(i, j)``."""
    i = np.arange(n)
    return (n - np.maximum.outer(i, i)).astype(float)




def _weighted_geometric(u: np.ndarray, n: int) -> np.ndarray:
    """``sum_{k<n} (n - k) z**k`` for ``z = 1 - u`` (complex, |z| <= 1) in closed form,
    ``(n u - z + z**(n+1)) / u**2`` (``n (n + 1) / 2`` at u = 0); u is passed rather than z
    so that rates close to 1 keep their precision."""
    u = np.asarray(u, dtype=complex)
    near = np.abs(u) < 1e-12
    safe = np.where(near, 0.5, u)
    power = np.exp((n + 1) * np.log1p(-safe))
    value = (n * safe - (1.0 - safe) + power) / safe**2
    return np.where(near, n * (n + 1) / 2.0, value)


def blt_prefix_total_variance(omega: np.ndarray, theta: np.ndarray, n: int) -> float:
    """``||W C^-1||_F**2`` for the BLT strategy C (weights omega, rates theta), O(buffers^3).

    In state-space form ``c(x) = 1 + x omega^T (I - x Theta)^-1 1``, so ``C^-1`` has
    ``r_k = -omega^T (Theta - 1 omega^T)**(k-1) 1`` (k >= 1): with the eigenvalues
    ``beta_i = 1 - mu_i`` of ``Theta - 1 omega^T`` (``mu`` from ``diag(1 - theta) +
    1 omega^T``, which keeps rates near 1 precise), ``b = cumsum(r)`` is ``gamma + sum_i
    delta_i beta_i**k`` and ``sum_k (n - k) b_k**2`` a sum of weighted geometric series
    (Dvijotham et al. 2024 evaluate BLT errors in closed form the same way). Returns inf when
    the inverse recurrence diverges (some ``|beta_i| >= 1``), nan when two modes nearly
    coincide (then use :func:`prefix_total_variance` on :func:`series_inverse`).
    """
    if np.asarray(omega).size == 0:
        return n * (n + 1) / 2.0
    modes = _blt_modes(omega, theta)
    if isinstance(modes, float):
        return modes
    mu, gamma, delta = modes
    cross = np.add.outer(mu, mu) - np.multiply.outer(mu, mu)  # 1 - beta_i beta_j
    total = (gamma**2 * n * (n + 1) / 2.0
             + 2.0 * gamma * (delta * _weighted_geometric(mu, n)).sum()
             + delta @ _weighted_geometric(cross, n) @ delta)
    return float(np.real(total))


def blt_last_step_variance(omega: np.ndarray, theta: np.ndarray, n: int) -> float:
    """``sum_{k<n} b_k**2``, the unit variance of the last (worst) published prefix sum of the
    BLT strategy, in closed form, O(buffers^3): with the modes of
    :func:`blt_prefix_total_variance` it is a sum of geometric series. inf when the inverse
    diverges, nan when two modes nearly coincide."""
    if np.asarray(omega).size == 0:
        return float(n)
    modes = _blt_modes(omega, theta)
    if isinstance(modes, float):
        return modes
    mu, gamma, delta = modes
    cross = np.add.outer(mu, mu) - np.multiply.outer(mu, mu)  # 1 - beta_i beta_j
    total = (gamma**2 * n + 2.0 * gamma * (delta * _geometric(mu, n)).sum()
             + delta @ _geometric(cross, n) @ delta)
    return float(np.real(total))


def _blt_modes(omega: np.ndarray, theta: np.ndarray
               ) -> tuple[np.ndarray, complex, np.ndarray] | float:
    """``(mu, gamma, delta)`` with ``b_k = gamma + sum_i delta_i (1 - mu_i)**k`` for the
    running sums b of the BLT inverse's coefficients (see :func:`blt_prefix_total_variance`);
    inf when the inverse recurrence diverges, nan when two modes nearly coincide."""
    omega = np.asarray(omega, dtype=float)
    theta = np.asarray(theta, dtype=float)
    mu, V = np.linalg.eig(np.diag(1.0 - theta) + np.outer(np.ones(theta.size), omega))
    if np.abs(1.0 - mu).max() >= 1.0 or np.abs(mu).min() == 0.0:
        return float("inf")
    if np.linalg.cond(V) > MAX_MODE_CONDITION:
        return float("nan")  # nearly repeated modes: partial fractions lose their precision
    alpha = -(omega @ V) * np.linalg.solve(V, np.ones(theta.size))
    return mu, 1.0 + (alpha / mu).sum(), -alpha / mu


def _geometric(u: np.ndarray, n: int) -> np.ndarray:
    """``sum_{k<n} (1 - u)**k = (1 - (1 - u)**n) / u`` (n at u = 0), complex u."""
    u = np.asarray(u, dtype=complex)
    near = np.abs(u) < 1e-12
    safe = np.where(near, 0.5, u)
    return np.where(near, float(n), -np.expm1(n * np.log1p(-safe)) / safe)
