"""The algebra of marginal query matrices (HDMM section 7; spec hdmm.md section 4.4).

A marginal is keyed by an integer ``a`` in ``[0, 2**d)``: attribute i (0-based axis) is bit
``d-1-i``, so attribute 1 is the most significant bit (``I x T x I`` on d=3 is ``0b101``).

* ``Q(a)``: kron over attributes of I (bit set) or Total (bit clear).
* ``H(a)``: kron of I (bit set) or the all-ones matrix (bit clear); ``G(v) = sum_a v(a) H(a)``.
* ``M(theta)``: the stack of ``theta(a) Q(a)``; ``M(theta).T M(theta) = G(theta**2)``.

All marginal Grams share eigenspaces: the space of key a (constant along attributes outside
a, centred along those in a) has dimension ``mult(a) = prod_{i in a}(n_i - 1)`` and eigenvalue
``kappa(a) = sum_{b superset of a} v(b) c(b)`` where ``c(b) = prod_{i not in b} n_i``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np
import scipy.sparse as sp

from engine.linalg.matrix import Matrix, Product


def key_of(axes: Iterable[int], d: int) -> int:
    """Marginal key of a set of axes (attribute 1 = most significant bit)."""
    key = 0
    for i in axes:
        key |= 1 << (d - 1 - i)
    return key


def axes_of(key: int, d: int) -> tuple[int, ...]:
    """Axes (domain order) of the attributes in marginal ``key``."""
    return tuple(i for i in range(d) if key >> (d - 1 - i) & 1)


def bit_matrix(d: int) -> np.ndarray:
    """``B[a, i] = 1`` when attribute i is in marginal a (shape 2**d x d)."""
    keys = np.arange(2**d)
    return ((keys[:, None] >> (d - 1 - np.arange(d))[None, :]) & 1).astype(bool)


def characteristic(ns: Sequence[int]) -> np.ndarray:
    """``c(a) = prod_{i not in a} n_i``: cells of the complementary marginal."""
    B = bit_matrix(len(ns))
    return np.prod(np.where(B, 1.0, np.asarray(ns, float)[None, :]), axis=1)


def multiplicities(ns: Sequence[int]) -> np.ndarray:
    """``mult(a) = prod_{i in a} (n_i - 1)``: dimension of eigenspace a (they sum to n)."""
    B = bit_matrix(len(ns))
    return np.prod(np.where(B, np.asarray(ns, float)[None, :] - 1.0, 1.0), axis=1)


def cells(ns: Sequence[int]) -> np.ndarray:
    """Cells of each marginal: ``prod_{i in a} n_i``."""
    B = bit_matrix(len(ns))
    return np.prod(np.where(B, np.asarray(ns, float)[None, :], 1.0), axis=1)


def superset_sums(f: np.ndarray, d: int) -> np.ndarray:
    """``g(a) = sum_{b superset of a} f(b)`` in O(d 2**d)."""
    g = np.array(f, dtype=float, copy=True)
    for bit in range(d):
        m = 1 << bit
        keys = np.arange(g.size)
        low = keys[(keys & m) == 0]
        g[low] += g[low | m]
    return g


def superset_differences(g: np.ndarray, d: int) -> np.ndarray:
    """Inverse of :func:`superset_sums` (Moebius inversion over supersets)."""
    f = np.array(g, dtype=float, copy=True)
    for bit in range(d):
        m = 1 << bit
        keys = np.arange(f.size)
        low = keys[(keys & m) == 0]
        f[low] -= f[low | m]
    return f


def eigenvalues(v: np.ndarray, ns: Sequence[int]) -> np.ndarray:
    """``kappa = Y v``: eigenvalue of ``G(v)`` on eigenspace a, for every key a."""
    return superset_sums(np.asarray(v, float) * characteristic(ns), len(ns))


def from_eigenvalues(kappa: np.ndarray, ns: Sequence[int]) -> np.ndarray:
    """``v = Y^-1 kappa``: the marginal weights whose Gram has the given eigenvalues."""
    return superset_differences(kappa, len(ns)) / characteristic(ns)


def xmatrix(u: np.ndarray, ns: Sequence[int]) -> sp.csc_matrix:
    """``X(u)`` with ``G(u) G(v) = G(X(u) v)`` (Thm. 7); sparse, built from u's support."""
    d = len(ns)
    N = 2**d
    c = characteristic(ns)
    keys = np.arange(N)
    rows, cols, vals = [], [], []
    for a in np.flatnonzero(u):
        rows.append(a & keys)
        cols.append(keys)
        vals.append(u[a] * c[a | keys])
    X = sp.coo_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                      shape=(N, N))
    return X.tocsc()


def pinv_weights(v: np.ndarray, ns: Sequence[int], rtol: float = 1e-12) -> np.ndarray:
    """Weights ``eta`` with ``G(eta) = G(v)^+`` (the Moore-Penrose pseudo-inverse).

    Works in the shared eigenbasis: invert the non-zero eigenvalues and map back.
    """
    kappa = eigenvalues(v, ns)
    tol = rtol * max(float(np.abs(kappa).max()), 1e-300)
    inv = np.where(np.abs(kappa) > tol, 1.0 / np.where(kappa == 0, 1.0, kappa), 0.0)
    return from_eigenvalues(inv, ns)


def gram_apply(v: np.ndarray, x: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    """``G(v) x`` for a data vector x in C order (or a batch of column vectors)."""
    d = len(shape)
    x = np.asarray(x, dtype=float)
    batch = x.shape[1:] if x.ndim == 2 else ()
    t = x.reshape(tuple(shape) + batch)
    out = np.zeros_like(t)
    for a in np.flatnonzero(v):
        summed = tuple(i for i in range(d) if not (a >> (d - 1 - i)) & 1)
        out += v[a] * np.broadcast_to(t.sum(axis=summed, keepdims=True), t.shape)
    return out.reshape(x.shape)


class MarginalsGram(Matrix):
    """``G(v) = sum_a v(a) H(a)`` over a domain of the given shape."""

    def __init__(self, v: np.ndarray, shape: Sequence[int]) -> None:
        self.v = np.asarray(v, dtype=float)
        self.domain_shape = tuple(int(n) for n in shape)
        if self.v.shape != (2 ** len(self.domain_shape),):
            raise ValueError("MarginalsGram: need one weight per marginal (2**d)")

    @property
    def shape(self) -> tuple[int, int]:
        n = math.prod(self.domain_shape)
        return (n, n)

    def matvec(self, x: np.ndarray) -> np.ndarray:
        return gram_apply(self.v, x, self.domain_shape)

    rmatvec = matvec

    @property
    def T(self) -> Matrix:
        return self

    def pinv(self) -> Matrix:
        """``G(v)^+ = G(eta)`` with the weights of :func:`pinv_weights`."""
        return MarginalsGram(pinv_weights(self.v, self.domain_shape), self.domain_shape)

    def trace(self) -> float:
        return math.prod(self.domain_shape) * float(self.v.sum())

    def eigenvalues(self) -> np.ndarray:
        """Eigenvalue per marginal key (multiplicity ``multiplicities(shape)``)."""
        return eigenvalues(self.v, self.domain_shape)


class MarginalStrategy(Matrix):
    """``M(theta)``: the stack of ``theta(a) Q(a)`` over keys with ``theta(a) != 0``.

    Rows of block a are the cells of marginal a in C order over its attributes.
    """

    def __init__(self, theta: np.ndarray, shape: Sequence[int]) -> None:
        self.theta = np.asarray(theta, dtype=float)
        self.domain_shape = tuple(int(n) for n in shape)
        self.d = len(self.domain_shape)
        if self.theta.shape != (2**self.d,):
            raise ValueError("MarginalStrategy: need one weight per marginal (2**d)")
        self.keys = np.flatnonzero(self.theta)

    def block_axes(self) -> list[tuple[int, ...]]:
        """Axes of each measured marginal, in block order."""
        return [axes_of(int(a), self.d) for a in self.keys]

    @property
    def shape(self) -> tuple[int, int]:
        m = sum(math.prod(self.domain_shape[i] for i in ax) for ax in self.block_axes())
        return (m, math.prod(self.domain_shape))

    def measure_marginals(self, marginal) -> np.ndarray:
        """``M(theta) x`` from a function returning the count tensor over an axis tuple."""
        return np.concatenate([self.theta[a] * np.asarray(marginal(ax), float).reshape(-1)
                               for a, ax in zip(self.keys, self.block_axes(), strict=True)])

    def matvec(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        batch = x.shape[1:] if x.ndim == 2 else ()
        t = x.reshape(self.domain_shape + batch)
        parts = []
        for a, ax in zip(self.keys, self.block_axes(), strict=True):
            others = tuple(i for i in range(self.d) if i not in ax)
            parts.append(self.theta[a] * t.sum(axis=others).reshape((-1,) + batch))
        return np.concatenate(parts)

    def rmatvec(self, y: np.ndarray) -> np.ndarray:
        y = np.asarray(y, dtype=float)
        batch = y.shape[1:] if y.ndim == 2 else ()
        out = np.zeros(self.domain_shape + batch)
        pos = 0
        for a, ax in zip(self.keys, self.block_axes(), strict=True):
            shp = tuple(self.domain_shape[i] for i in ax)
            size = math.prod(shp)
            block = y[pos:pos + size].reshape(shp + batch)
            pos += size
            others = tuple(i for i in range(self.d) if i not in ax)
            out += self.theta[a] * np.expand_dims(block, others)
        return out.reshape((-1,) + batch)

    def gram(self) -> Matrix:
        return MarginalsGram(self.theta**2, self.domain_shape)

    def sensitivity(self, p: int) -> float:
        """Every column has one 1 per block: L1 = sum |theta|, L2 = ||theta||_2 (Prop. 7)."""
        return float(np.abs(self.theta).sum() if p == 1 else np.sqrt((self.theta**2).sum()))

    def column_norms(self, p: int) -> np.ndarray:
        return np.full(math.prod(self.domain_shape), self.sensitivity(p))

    def fro2(self) -> float:
        # every column of Q(a) holds exactly one 1, so ||Q(a)||_F^2 = n for every a
        return float(math.prod(self.domain_shape) * (self.theta**2).sum())

    def pinv(self) -> Matrix:
        """``M(theta)^+ = G(theta**2)^+ M(theta)^T``, implicit (any domain size)."""
        return Product(self.gram().pinv(), self.T)

    def pinv_apply(self, y: np.ndarray) -> np.ndarray:
        """Least-squares ``x = M(theta)^+ y``."""
        return self.pinv().matvec(y)


def factor_pair(V: np.ndarray) -> tuple[float, float]:
    """``(beta, alpha)`` with ``alpha I + beta 1`` matching trace and sum of V (Thm. 10)."""
    n = V.shape[0]
    tr, total = float(np.trace(V)), float(V.sum())
    if n == 1:
        return 0.0, tr
    beta = (total - tr) / (n * (n - 1))
    return beta, tr / n - beta


def is_marginal_like(V: np.ndarray, rtol: float = 1e-12) -> bool:
    """True when a factor Gram is exactly ``alpha I + beta 1`` (identity/total-like)."""
    beta, alpha = factor_pair(V)
    approx = alpha * np.eye(V.shape[0]) + beta
    return bool(np.allclose(V, approx, rtol=rtol, atol=rtol * max(1.0, float(np.abs(V).max()))))


def marginal_weights(factor_grams: Sequence[tuple[float, Sequence[np.ndarray]]]) -> np.ndarray:
    """Thm. 10: ``w`` with ``tr[G(u) W.T W] = tr[G(u) G(w)]`` for every u.

    Args:
        factor_grams: ``(weight, per-attribute Gram arrays)`` for each product term.
    """
    w = None
    for weight, grams in factor_grams:
        vec = np.array([weight**2])
        for V in grams:
            beta, alpha = factor_pair(np.asarray(V, float))
            vec = np.kron(vec, [beta, alpha])
        w = vec if w is None else w + vec
    return w


def marginal_svd_bound(w: np.ndarray, ns: Sequence[int]) -> float:
    """Corrected Thm. 12: ``(1/n) (sum_a mult(a) sqrt(kappa(a)))**2`` with ``kappa = Y w``."""
    kappa = np.clip(eigenvalues(w, ns), 0.0, None)
    n = math.prod(ns)
    return float((multiplicities(ns) * np.sqrt(kappa)).sum() ** 2 / n)


def marginal_trace(theta2: np.ndarray, w: np.ndarray, ns: Sequence[int],
                   rtol: float = 1e-10) -> float:
    """``tr[G(theta2)^+ G(w)]``, or ``inf`` when the strategy does not support the workload."""
    lam = eigenvalues(theta2, ns)
    kappa = eigenvalues(w, ns)
    mult = multiplicities(ns)
    scale = max(float(np.abs(lam).max()), 1e-300)
    kscale = max(float(np.abs(kappa).max()), 1e-300)
    live = (np.abs(kappa) > rtol * kscale) & (mult > 0)
    if np.any(live & (lam <= rtol * scale)):
        return math.inf
    return float((mult[live] * kappa[live] / lam[live]).sum())
