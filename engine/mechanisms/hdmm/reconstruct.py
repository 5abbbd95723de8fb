"""MEASURE and RECONSTRUCT for HDMM strategies at census scale (spec section 5).

Nothing here forms a strategy matrix or its pseudo-inverse over the full domain:

* **Kronecker blocks** ``c (A_1 kron ... kron A_d)`` are applied with the Kronecker mat-vec
  to the data's marginal over the attributes whose factor is not Total (a Total factor only
  sums its attribute), and least squares applies the per-factor pseudo-inverses the same way.
  So a block that touches 2 of 14 attributes needs a 2-attribute marginal, never x.
* **Marginal strategies** ``M(theta)`` are measured marginal by marginal, and the workload is
  answered from estimated marginals ``Q(S) x_hat`` computed straight from the measurements:
  ``Q(S) G(eta) M^T y = G_S(eta_S) z_S`` with ``z_S = Q(S) M^T y`` (both on the S-marginal,
  see :func:`marginal_estimates`). This is the *marginal-only path*: it runs on domains whose
  data vector cannot be stored (Adult: 6.4e17 cells).
* **Unions** (OPT_+) answer each group from its own block by local least squares.

Workload answers are always computed from estimated marginals over each term's attributes,
cached so that each distinct attribute set is summed once.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from engine.domain import Domain
from engine.errors import NotApplicable
from engine.linalg.marginals import axes_of, characteristic, key_of, pinv_weights
from engine.linalg.matrix import Dense, Matrix, kmatvec
from engine.workloads.blocks import MatrixBlock
from engine.workloads.term import Term
from engine.workloads.workload import Workload

#: Largest data tensor (cells) that measure/reconstruct hold as float64: 2 GB per copy, and
#: a Kronecker pass keeps about three copies alive, which fits this machine's 24 GB with room.
MAX_CELLS = 250_000_000

#: ``marginal(axes) -> tensor`` over the axes in domain order.
MarginalFn = Callable[[tuple[int, ...]], np.ndarray]


def support_axes(factors: Sequence[Matrix]) -> tuple[int, ...]:
    """Axes whose Kronecker factor is not the Total query (those that must be vectorised)."""
    return tuple(i for i, f in enumerate(factors) if not f.is_total())


def too_large(domain: Domain, axes: Sequence[int], max_cells: int, what: str) -> NotApplicable:
    """The error for a marginal that cannot be stored, naming the marginal-only way out."""
    cells = math.prod(domain.shape[i] for i in axes)
    names = ", ".join(domain.names[i] for i in axes) or "none"
    return NotApplicable(
        f"{what} needs the data over ({names}): {cells:,} cells, more than the {max_cells:,} "
        "this machine can hold (x cannot be stored); use a strategy whose blocks touch few "
        "attributes: hdmm-marginals (marginal-only path) or hdmm-union")


def data_marginal(data: Any, axes: Sequence[int], domain: Domain, max_cells: int = MAX_CELLS
                  ) -> np.ndarray:
    """The data's count tensor over ``axes`` (domain order) as float64.

    Args:
        data: a data vector over the whole domain (C order) or a Dataset (counted from its
            records, so the full vector is never built).
        axes: attribute axes, sorted.
        domain: the domain of the data.
        max_cells: refuse tensors larger than this (NotApplicable).
    """
    axes = tuple(axes)
    if math.prod(domain.shape[i] for i in axes) > max_cells:
        raise too_large(domain, axes, max_cells, "measuring this strategy")
    if hasattr(data, "marginal"):
        counts = data.marginal([domain.names[i] for i in axes], max_cells=max_cells)
        return np.asarray(counts, dtype=float)
    x = np.asarray(data, dtype=float)
    if x.size != domain.size:
        raise ValueError(f"data vector has {x.size:,} entries; the domain has "
                         f"{domain.size:,} cells")
    t = x.reshape(domain.shape)
    others = tuple(i for i in range(len(domain)) if i not in axes)
    return t.sum(axis=others) if others else t


class TensorMarginals:
    """Marginals of an estimated data tensor, cached by attribute set.

    The tensor covers ``axes``; the attributes outside it were estimated as uniform
    (a Total factor's least squares spreads its sum evenly), so a marginal over them is the
    tensor's marginal spread evenly over their values.
    """

    def __init__(self, tensor: np.ndarray, axes: Sequence[int], domain: Domain) -> None:
        self.domain = domain
        self.axes = tuple(axes)
        self.cache: dict[tuple[int, ...], np.ndarray] = {self.axes: tensor}

    def __call__(self, attrs: tuple[int, ...]) -> np.ndarray:
        attrs = tuple(attrs)
        if attrs in self.cache:
            return self.cache[attrs]
        inside = tuple(i for i in attrs if i in self.axes)
        base = self._inside(inside)
        out = base
        if len(inside) != len(attrs):
            shape = [self.domain.shape[i] if i in inside else 1 for i in attrs]
            spread = math.prod(self.domain.shape[i] for i in attrs if i not in inside)
            out = np.broadcast_to(base.reshape(shape) / spread,
                                  tuple(self.domain.shape[i] for i in attrs)).copy()
        self.cache[attrs] = out
        return out

    def _inside(self, attrs: tuple[int, ...]) -> np.ndarray:
        if attrs in self.cache:
            return self.cache[attrs]
        # sum from the smallest cached superset (cheaper than from the full tensor)
        supers = [k for k in self.cache if set(attrs) <= set(k) and set(k) <= set(self.axes)]
        src = min(supers, key=lambda k: math.prod(self.domain.shape[i] for i in k))
        drop = tuple(p for p, i in enumerate(src) if i not in attrs)
        out = self.cache[src].sum(axis=drop) if drop else self.cache[src]
        self.cache[attrs] = out
        return out


def term_answers(term: Term, marginal: MarginalFn) -> np.ndarray:
    """Weighted answers of one term from the marginal over its attributes."""
    return term.weight * term.answer_marginal(marginal(term.attrs))


def answers(workload: Workload, marginal: MarginalFn,
            terms: Sequence[int] | None = None) -> np.ndarray:
    """Workload answers (all terms, or the listed ones, in order) from estimated marginals."""
    chosen = range(len(workload.terms)) if terms is None else terms
    return np.concatenate([term_answers(workload.terms[j], marginal) for j in chosen])


# --------------------------------------------------------------------------------------
# Kronecker blocks
# --------------------------------------------------------------------------------------
def kron_measure(factors: Sequence[Matrix], data: Any, domain: Domain,
                 max_cells: int = MAX_CELLS) -> np.ndarray:
    """Exact answers ``(A_1 kron ... kron A_d) x`` from the data's marginal on the non-Total
    attributes."""
    axes = support_axes(factors)
    t = data_marginal(data, axes, domain, max_cells)
    if not axes:
        return np.atleast_1d(np.asarray(t, dtype=float)).reshape(1)
    return kmatvec([factors[i] for i in axes], t.reshape(-1))


def kron_estimate(pinvs: Sequence[np.ndarray | Matrix], axes: Sequence[int], y: np.ndarray,
                  domain: Domain) -> TensorMarginals:
    """Least-squares data estimate over ``axes`` from ``y``: ``kron_i A_i^+`` applied to y."""
    axes = tuple(axes)
    shape = tuple(domain.shape[i] for i in axes)
    if not axes:
        return TensorMarginals(np.asarray(y, dtype=float).reshape(()), axes, domain)
    return TensorMarginals(kmatvec(list(pinvs), y).reshape(shape), axes, domain)


def kron_answers(factor_pinvs: Sequence[np.ndarray], factors: Sequence[Matrix], y: np.ndarray,
                 workload: Workload, terms: Sequence[int] | None = None,
                 scale: float = 1.0) -> np.ndarray:
    """Answers to (some of) the workload's terms by least squares on one Kronecker block.

    Args:
        factor_pinvs: per-attribute pseudo-inverses (only those of non-Total factors are used).
        factors: the block's per-attribute factors.
        y: the block's noisy answers ``c (kron_i A_i) x + noise``.
        workload: the workload.
        terms: indices of the terms to answer (default all).
        scale: the block's weight c (divided out before the pseudo-inverses).
    """
    axes = support_axes(factors)
    est = kron_estimate([factor_pinvs[i] for i in axes], axes, np.asarray(y) / scale,
                        workload.domain)
    return answers(workload, est, terms)


# --------------------------------------------------------------------------------------
# marginal strategies: the marginal-only path
# --------------------------------------------------------------------------------------
def _restricted_weights(eta: np.ndarray, mask: int, c: np.ndarray) -> np.ndarray:
    """``eta_S(k) = sum_{a: a & S = k} eta(a) prod_{i not in S or a} n_i`` (``Q(S) G(eta) =
    G_S(eta_S) Q(S)``), indexed by full-width keys k inside S."""
    keys = np.arange(eta.size)
    return np.bincount(keys & mask, weights=eta * c[keys | mask], minlength=eta.size)


def _gram_on(weights: np.ndarray, z: np.ndarray, attrs: tuple[int, ...], d: int) -> np.ndarray:
    """``G_S(weights) z`` for a tensor z over ``attrs``: sum over the attributes outside each
    key (keeping dims) and broadcast back."""
    out = np.zeros_like(z)
    for k in np.flatnonzero(weights):
        summed = tuple(p for p, i in enumerate(attrs) if not (int(k) >> (d - 1 - i)) & 1)
        part = z.sum(axis=summed, keepdims=True) if summed else z
        out += weights[k] * part
    return out


class MarginalEstimates:
    """Least-squares marginals ``Q(S) M(theta)^+ y`` without the data vector.

    Args:
        theta: marginal weights (2**d).
        shape: attribute sizes.
        y: the noisy answers ``M(theta) x + noise`` (blocks in key order).
    """

    def __init__(self, theta: np.ndarray, shape: Sequence[int], y: np.ndarray) -> None:
        self.theta = np.asarray(theta, dtype=float)
        self.shape = tuple(int(n) for n in shape)
        self.d = len(self.shape)
        self.c = characteristic(self.shape)
        self.eta = pinv_weights(self.theta**2, self.shape)
        self.blocks: list[tuple[int, tuple[int, ...], np.ndarray]] = []
        pos = 0
        for b in np.flatnonzero(self.theta):
            ax = axes_of(int(b), self.d)
            shp = tuple(self.shape[i] for i in ax)
            size = math.prod(shp)
            self.blocks.append((int(b), ax, np.asarray(y[pos:pos + size], float).reshape(shp)))
            pos += size
        if pos != len(y):
            raise ValueError(f"expected {pos:,} measurements for this marginal strategy, "
                             f"got {len(y):,}")
        self.cache: dict[tuple[int, ...], np.ndarray] = {}
        self._block_marginals: dict[tuple[int, tuple[int, ...]], np.ndarray] = {}

    def _marginal_of_block(self, pos: int, keep: tuple[int, ...]) -> np.ndarray:
        """Block ``pos``'s answers summed down to the attributes ``keep`` (cached)."""
        key = (pos, keep)
        if key not in self._block_marginals:
            _, ax, yb = self.blocks[pos]
            drop = tuple(p for p, i in enumerate(ax) if i not in keep)
            self._block_marginals[key] = yb.sum(axis=drop) if drop else yb
        return self._block_marginals[key]

    def backprojection(self, attrs: tuple[int, ...]) -> np.ndarray:
        """``z_S = Q(S) M(theta)^T y`` on the S-marginal.

        Block b contributes ``theta(b) prod_{i not in S or b} n_i`` times its answers summed
        down to ``b & S`` and broadcast over S; contributions are pooled per ``b & S`` first
        so that each distinct broadcast over the (possibly large) S-marginal happens once.
        """
        mask = key_of(attrs, self.d)
        pooled: dict[int, np.ndarray] = {}
        for pos, (b, ax, _) in enumerate(self.blocks):
            t = b & mask
            keep = tuple(i for i in ax if i in attrs)
            part = self.theta[b] * self.c[b | mask] * self._marginal_of_block(pos, keep)
            pooled[t] = part if t not in pooled else pooled[t] + part
        out = np.zeros(tuple(self.shape[i] for i in attrs))
        for t, part in pooled.items():
            out += part.reshape([self.shape[i] if (t >> (self.d - 1 - i)) & 1 else 1
                                 for i in attrs])
        return out

    def __call__(self, attrs: tuple[int, ...]) -> np.ndarray:
        attrs = tuple(attrs)
        if attrs not in self.cache:
            mask = key_of(attrs, self.d)
            weights = _restricted_weights(self.eta, mask, self.c)
            self.cache[attrs] = _gram_on(weights, self.backprojection(attrs), attrs, self.d)
        return self.cache[attrs]


def _row_sums(Q: Matrix) -> np.ndarray:
    return np.asarray(Q.matvec(np.ones(Q.shape[1])), dtype=float)


def _row_norms2(Q: Matrix) -> np.ndarray:
    if isinstance(Q, Dense | MatrixBlock) or Q.size <= 4_000_000:
        D = Q.dense()
        return (D * D).sum(axis=1)
    # every implicit built-in block (ranges, prefixes, identity, total) has 0/1 rows
    return _row_sums(Q)


def marginal_variances(theta: np.ndarray, workload: Workload) -> np.ndarray:
    """Unit-noise per-query variances of least squares on ``M(theta)`` (any domain size).

    The estimate of the S-marginal has covariance ``prod_{i not in S} n_i G_S(eta_S)``, so a
    row q of a product term has variance ``prod n_i sum_k eta_S(k) prod_{i in k} ||q_i||**2
    prod_{i in S - k} (1^T q_i)**2``.
    """
    shape = workload.domain.shape
    d = len(shape)
    c = characteristic(shape)
    eta = pinv_weights(np.asarray(theta, float) ** 2, shape)
    parts = []
    for t in workload.terms:
        mask = key_of(t.attrs, d)
        weights = _restricted_weights(eta, mask, c)
        outside = c[mask]
        if t.is_product:
            sums = [_row_sums(f) ** 2 for f in t.factors]
            norms = [_row_norms2(f) for f in t.factors]
            var = np.zeros(t.num_queries)
            for k in np.flatnonzero(weights):
                vec = np.ones(1)
                for pos, i in enumerate(t.attrs):
                    vec = np.kron(vec, norms[pos] if (int(k) >> (d - 1 - i)) & 1 else sums[pos])
                var += weights[k] * vec
        else:
            rows = t.query.dense().reshape((-1,) + t.marginal_shape)
            var = np.zeros(t.num_queries)
            for k in np.flatnonzero(weights):
                summed = tuple(1 + p for p, i in enumerate(t.attrs)
                               if not (int(k) >> (d - 1 - i)) & 1)
                r = rows.sum(axis=summed) if summed else rows
                var += weights[k] * (r * r).reshape(r.shape[0], -1).sum(axis=1)
        parts.append(t.weight**2 * outside * var)
    return np.concatenate(parts)
