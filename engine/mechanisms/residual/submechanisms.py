"""Unit-cost Gaussian mechanisms on one residual (the pieces QuerySmasher assembles).

Each sub-mechanism releases ``B x_{A'} + N(0, I)`` for the marginal ``x_{A'}`` of its residual,
with ``V = B^T B`` supported on the residual space (fully centred tensors) and ``max diag V = 1``
(privacy cost 1). What the assembler needs from it:

* ``release(x)`` = ``B x`` (whitened: the noise is i.i.d. N(0, multiplier)),
  ``release_adjoint(w)`` = ``B^T w``;
* ``estimate(w)`` = ``B^+ w``: a centred tensor whose dot product with any sub-query in the
  span of the strategy is an unbiased answer;
* ``vdag_apply`` / ``quad`` / ``trace_*``: the unit-cost variance ``q V^+ q^T`` of sub-queries
  and ``tr(G V^+)`` of sub-workload Grams (given explicitly, as Kronecker factors, or as row
  factors R with ``G = R^T R``);
* ``diag_v()``: the per-cell privacy cost ``diag(V)`` (for verifying the composed cost).

Three shapes cover every sub-solver: :class:`KronSub` (a Kronecker product of per-attribute
strategies: the Kronecker shortcut, ResidualPlanner, RP+ bases, and WFF on Kronecker Grams),
:class:`DenseSub` (an explicit strategy from the optimal SDP) and :class:`FourierSub` (WFF:
diagonal in the multidimensional DFT basis, released as in the spec's Appendix C).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from engine.linalg.matrix import kmatvec

#: Rows of sub-queries processed at once when a quadratic form needs explicit rows.
CHUNK_ENTRIES = 4_000_000


@dataclass(frozen=True)
class FactorSolution:
    """A 1-D unit-cost strategy on one attribute (d cells).

    Attributes:
        vdag: ``V^+`` (d x d).
        basis: ``B`` (r x d) with ``B^T B = V`` and ``max diag V = 1``.
        basis_pinv: ``B^+`` (d x r).
        iterations: solver iterations (0 for closed forms).
        gap: certified relative optimality gap (0 for closed forms).
    """

    vdag: np.ndarray
    basis: np.ndarray
    basis_pinv: np.ndarray
    iterations: int = 0
    gap: float = 0.0

    @staticmethod
    def from_v(V: np.ndarray, iterations: int = 0, gap: float = 0.0) -> FactorSolution:
        """The factor of a PSD ``V`` rescaled to unit maximum diagonal."""
        V = (V + V.T) / 2.0
        V = V / float(np.diag(V).max())
        ev, U = np.linalg.eigh(V)
        keep = ev > 1e-12 * ev.max()
        ev, U = ev[keep], U[:, keep]
        return FactorSolution(vdag=(U / ev) @ U.T, basis=(U * np.sqrt(ev)).T,
                              basis_pinv=U / np.sqrt(ev), iterations=iterations, gap=gap)


def _row_quad(rows: np.ndarray, apply: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """``diag(R M R^T)`` for explicit rows R, given ``apply(X) = M X`` (chunked)."""
    m, c = rows.shape
    out = np.empty(m)
    step = max(1, CHUNK_ENTRIES // max(c, 1))
    for lo in range(0, m, step):
        R = rows[lo:lo + step]
        out[lo:lo + step] = np.einsum("ij,ji->i", R, apply(R.T))
    return out


class SubMechanism:
    """Base class: see the module docstring for the contract."""

    kind: str = ""
    sizes: tuple[int, ...] = ()

    @property
    def cells(self) -> int:
        """Cells of the residual's marginal."""
        return math.prod(self.sizes)

    @property
    def outputs(self) -> int:
        """Number of released numbers."""
        raise NotImplementedError

    def release(self, x: np.ndarray) -> np.ndarray:
        """``B x`` for a marginal tensor x (noise-free, whitened)."""
        raise NotImplementedError

    def release_adjoint(self, w: np.ndarray) -> np.ndarray:
        """``B^T w`` as a tensor over the marginal."""
        raise NotImplementedError

    def estimate(self, w: np.ndarray) -> np.ndarray:
        """``B^+ w``: the centred residual estimate (a tensor over the marginal)."""
        raise NotImplementedError

    def vdag_apply(self, X: np.ndarray) -> np.ndarray:
        """``V^+ X`` for columns X (c x k)."""
        raise NotImplementedError

    def quad(self, rows: np.ndarray) -> np.ndarray:
        """Unit-cost variances ``q V^+ q^T`` for explicit sub-query rows (m x c)."""
        return _row_quad(rows, self.vdag_apply)

    def quad_product(self, factors: Sequence[np.ndarray]) -> np.ndarray:
        """Variances of the Kronecker product rows ``kron_i F_i`` (F_i: m_i x d_i), as a
        tensor of shape (m_1, ..., m_l)."""
        shape = tuple(F.shape[0] for F in factors)
        rows = np.ones((1, 1))
        for F in factors:
            rows = np.kron(rows, F)
        return self.quad(rows).reshape(shape)

    def trace_kron(self, grams: Sequence[np.ndarray]) -> float:
        """``tr((kron_i G_i) V^+)``."""
        G = np.ones((1, 1))
        for g in grams:
            G = np.kron(G, g)
        return self.trace_dense(G)

    def trace_dense(self, G: np.ndarray) -> float:
        """``tr(G V^+)`` for an explicit c x c Gram."""
        return float(np.trace(self.vdag_apply(G)))

    def trace_rows(self, R: np.ndarray) -> float:
        """``tr(R^T R V^+)`` for a row factor R (k x c) of a Gram."""
        return float(self.quad(R).sum())

    def diag_v(self) -> np.ndarray:
        """``diag(V)`` over the marginal's cells (the per-cell privacy cost at unit noise)."""
        raise NotImplementedError


class KronSub(SubMechanism):
    """``B = kron_i B_i`` over the residual's attributes (no factors: the total, B = [1])."""

    kind = "kron"

    def __init__(self, factors: Sequence[FactorSolution]) -> None:
        self.factors = tuple(factors)
        self.sizes = tuple(f.vdag.shape[0] for f in self.factors)

    @property
    def outputs(self) -> int:
        return math.prod(f.basis.shape[0] for f in self.factors)

    @staticmethod
    def _apply(mats: Sequence[np.ndarray], x: np.ndarray) -> np.ndarray:
        if not mats:  # the total: B = B^+ = V^+ = [1]
            return np.array(x, dtype=float)
        return kmatvec(mats, x)

    def release(self, x: np.ndarray) -> np.ndarray:
        return self._apply([f.basis for f in self.factors], np.asarray(x).reshape(-1))

    def release_adjoint(self, w: np.ndarray) -> np.ndarray:
        out = self._apply([f.basis.T for f in self.factors], w)
        return out.reshape(self.sizes)

    def estimate(self, w: np.ndarray) -> np.ndarray:
        return self._apply([f.basis_pinv for f in self.factors], w).reshape(self.sizes)

    def vdag_apply(self, X: np.ndarray) -> np.ndarray:
        return self._apply([f.vdag for f in self.factors], X)

    def quad_product(self, factors: Sequence[np.ndarray]) -> np.ndarray:
        out = np.ones(())
        for F, f in zip(factors, self.factors, strict=True):
            vec = np.einsum("ij,jk,ik->i", F, f.vdag, F)
            out = np.multiply.outer(out, vec)
        return out

    def trace_kron(self, grams: Sequence[np.ndarray]) -> float:
        return math.prod(float((G * f.vdag).sum()) for G, f in zip(grams, self.factors,
                                                                   strict=True))

    def diag_v(self) -> np.ndarray:
        out = np.ones(())
        for f in self.factors:
            out = np.multiply.outer(out, (f.basis * f.basis).sum(axis=0))
        return out


class DenseSub(SubMechanism):
    """An explicit strategy ``B`` (r x c) and its pseudo-inverse; ``V^+ = B^+ B^+T`` is only
    ever applied in factored form (r may be far below c)."""

    kind = "dense"

    def __init__(self, sizes: Sequence[int], basis: np.ndarray, basis_pinv: np.ndarray
                 ) -> None:
        self.sizes = tuple(sizes)
        self.basis, self.basis_pinv = basis, basis_pinv

    @property
    def outputs(self) -> int:
        return self.basis.shape[0]

    def release(self, x: np.ndarray) -> np.ndarray:
        return self.basis @ np.asarray(x, dtype=float).reshape(-1)

    def release_adjoint(self, w: np.ndarray) -> np.ndarray:
        return (self.basis.T @ w).reshape(self.sizes)

    def estimate(self, w: np.ndarray) -> np.ndarray:
        return (self.basis_pinv @ w).reshape(self.sizes)

    def vdag_apply(self, X: np.ndarray) -> np.ndarray:
        return self.basis_pinv @ (self.basis_pinv.T @ X)

    def quad(self, rows: np.ndarray) -> np.ndarray:
        Y = rows @ self.basis_pinv
        return np.einsum("ij,ij->i", Y, Y)

    def trace_kron(self, grams: Sequence[np.ndarray]) -> float:
        P = self.basis_pinv
        return float((P * kmatvec(list(grams), P)).sum())

    def diag_v(self) -> np.ndarray:
        return (self.basis * self.basis).sum(axis=0).reshape(self.sizes)


def fourier_diag_1d(G: np.ndarray) -> np.ndarray:
    """``h_t = f_t^H G f_t`` with ``f_t[x] = exp(2 pi i t x / d)``, t = 0..d-1."""
    d = G.shape[0]
    F = np.exp(2j * np.pi * np.outer(np.arange(d), np.arange(d)) / d)  # row t = f_t
    return np.real(np.einsum("tx,xy,ty->t", F.conj(), G, F))


def fourier_diag(G: np.ndarray, sizes: Sequence[int]) -> np.ndarray:
    """``h_j = f_j^H G f_j`` over the multidimensional frequency grid (shape ``sizes``)."""
    sizes = tuple(sizes)
    ell = len(sizes)
    T = np.asarray(G, dtype=float).reshape(sizes + sizes)
    T = np.fft.fftn(T, axes=tuple(range(ell)))              # e^{-2 pi i j.x/d} on rows
    T = np.fft.ifftn(T, axes=tuple(range(ell, 2 * ell)))    # e^{+2 pi i j.y/d} on columns
    c = math.prod(sizes)
    return np.real(np.diagonal(T.reshape(c, c))).reshape(sizes) * c


def fourier_diag_rows(R: np.ndarray, sizes: Sequence[int]) -> np.ndarray:
    """``h_j = f_j^H R^T R f_j = sum_k |R_k . f_j|^2`` for a row factor R (k x c)."""
    sizes = tuple(sizes)
    c = math.prod(sizes)
    T = np.fft.ifftn(R.reshape((-1,) + sizes), axes=tuple(range(1, len(sizes) + 1))) * c
    return (np.abs(T) ** 2).sum(axis=0)


def frequency_mask(sizes: Sequence[int]) -> np.ndarray:
    """Frequencies with every coordinate non-zero: exactly the residual space."""
    mask = np.ones(tuple(sizes), dtype=bool)
    for ax in range(len(sizes)):
        index = [slice(None)] * len(sizes)
        index[ax] = 0
        mask[tuple(index)] = False
    return mask


class FourierSub(SubMechanism):
    """WFF on one residual: independent noise on DFT coefficients (spec 6.1, Appendix C).

    Built from ``g_j = f_j^H G f_j / N**2`` (N = cells) over the frequencies with every
    coordinate non-zero; frequencies with ``g_j = 0`` are not measured. One variance parameter
    ``theta_j = gamma / sqrt(kappa_j g_j)`` per conjugate pair (``kappa`` = 4, or 1 when
    self-conjugate), ``gamma = sum_j sqrt(g_j)`` over all measured frequencies, so that
    ``sum 1/theta = 1`` (unit privacy cost at every cell) and the loss is ``gamma**2``.
    The release is, per parameter j, the real part of the DFT coefficient and (unless
    self-conjugate) its imaginary part, each divided by ``sqrt(theta_j)``.
    """

    kind = "fourier"

    def __init__(self, sizes: Sequence[int], g: np.ndarray) -> None:
        self.sizes = tuple(sizes)
        g = np.where(frequency_mask(self.sizes), np.maximum(np.asarray(g, float), 0.0), 0.0)
        measured = g > 1e-12 * float(g.max(initial=0.0))
        self.g = np.where(measured, g, 0.0)
        self.gamma = float(np.sqrt(self.g).sum())
        c = self.cells
        with np.errstate(divide="ignore"):
            self.lam = np.where(measured, self.gamma / (c**2 * np.sqrt(self.g)), 0.0)
        flat = np.flatnonzero(measured.reshape(-1))
        idx = np.array(np.unravel_index(flat, self.sizes)).T.reshape(len(flat), len(self.sizes))
        conj = np.ravel_multi_index(tuple(((np.array(self.sizes) - idx) % self.sizes).T),
                                    self.sizes) if len(flat) else flat
        keep = flat <= conj
        self.params = flat[keep]                       # one per conjugate pair
        self.conj = conj[keep]
        self.self_conj = self.params == self.conj
        kappa = np.where(self.self_conj, 1.0, 4.0)
        self.theta = self.gamma / np.sqrt(kappa * self.g.reshape(-1)[self.params])
        self.imag = ~self.self_conj                    # parameters that also release Im

    @property
    def loss_unit(self) -> float:
        """``gamma**2``: the loss on the Gram this mechanism was built for."""
        return self.gamma**2

    @property
    def outputs(self) -> int:
        return int(len(self.params) + self.imag.sum())

    def release(self, x: np.ndarray) -> np.ndarray:
        F = np.fft.fftn(np.asarray(x, dtype=float).reshape(self.sizes)).reshape(-1)
        s = np.sqrt(self.theta)
        coef = F[self.params]
        return np.concatenate([coef.real / s, (coef.imag / s)[self.imag]])

    def _split(self, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        k = len(self.params)
        im = np.zeros(k)
        im[self.imag] = w[k:]
        return np.asarray(w[:k], dtype=float), im

    def release_adjoint(self, w: np.ndarray) -> np.ndarray:
        re, im = self._split(w)
        Z = np.zeros(self.cells, dtype=complex)
        Z[self.params] = (re + 1j * im) / np.sqrt(self.theta)
        return np.real(np.fft.ifftn(Z.reshape(self.sizes))) * self.cells

    def estimate(self, w: np.ndarray) -> np.ndarray:
        re, im = self._split(w)
        s = np.sqrt(self.theta)
        Z = np.zeros(self.cells, dtype=complex)
        Z[self.conj] = (re - 1j * im) * s      # conjugate first: a self-conjugate j keeps re
        Z[self.params] = (re + 1j * im) * s
        return np.real(np.fft.ifftn(Z.reshape(self.sizes)))

    def vdag_apply(self, X: np.ndarray) -> np.ndarray:
        X = np.asarray(X, dtype=float)
        cols = X.reshape(self.sizes + (-1,))
        axes = tuple(range(len(self.sizes)))
        F = np.fft.fftn(cols, axes=axes) * self.lam[..., None]
        return np.real(np.fft.ifftn(F, axes=axes)).reshape(X.shape) * self.cells

    def quad(self, rows: np.ndarray) -> np.ndarray:
        m = rows.shape[0]
        axes = tuple(range(1, len(self.sizes) + 1))
        out = np.empty(m)
        step = max(1, CHUNK_ENTRIES // max(self.cells, 1))
        for lo in range(0, m, step):
            T = np.fft.ifftn(rows[lo:lo + step].reshape((-1,) + self.sizes), axes=axes)
            out[lo:lo + step] = (np.abs(T) ** 2 * self.lam).reshape(T.shape[0], -1).sum(1)
        return out * self.cells**2

    def trace_kron(self, grams: Sequence[np.ndarray]) -> float:
        h = np.ones(())
        for G in grams:
            h = np.multiply.outer(h, fourier_diag_1d(G))
        return float((h * self.lam).sum())

    def trace_dense(self, G: np.ndarray) -> float:
        return float((fourier_diag(G, self.sizes) * self.lam).sum())

    def diag_v(self) -> np.ndarray:
        return np.full(self.sizes, float((1.0 / self.theta).sum()))
