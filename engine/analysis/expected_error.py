"""Expected error of a strategy for a workload, and a Monte-Carlo checker.

For a strategy A (measured with i.i.d. noise of variance ``sigma**2 * ||A||**2`` per entry,
``||A||`` the L1 or L2 sensitivity) and least-squares reconstruction, the expected total
squared error over the workload is::

    TSE = sigma**2 * ||A||**2 * tr[(A^T A)^+ W^T W]

where ``sigma`` is the privacy level's noise std per unit sensitivity (``Privacy.sigma()``).
RMSE is ``sqrt(TSE / m)`` with m the number of workload queries. Changing eps/delta/rho only
changes ``sigma``: error for a new privacy level is a rescale, never a re-plan.
:func:`reconstruction_map` gives ``W A^+`` itself (small domains), the weights behind each
answer.
"""

from __future__ import annotations

import math

import numpy as np

from engine.errors import NotApplicable
from engine.linalg.marginals import (
    MarginalStrategy,
    marginal_trace,
    marginal_weights,
    pinv_weights,
)
from engine.linalg.matrix import DENSE_GUARD, Dense, Kron, Matrix
from engine.linalg.pinv import is_positive_definite, psd_pinv, supports
from engine.linalg.spectral import GramSpectrum, gram_spectrum
from engine.privacy import Privacy
from engine.workloads.blocks import (
    AllRangeBlock,
    Block,
    MatrixBlock,
    PermutedBlock,
    WidthRangeBlock,
)
from engine.workloads.term import Term
from engine.workloads.workload import Workload

#: Largest domain on which error is computed with explicit n x n matrices.
EXPLICIT_LIMIT = 8192
#: Largest number of per-query variances listed.
QUERY_LIMIT = 20_000_000


def _gram_array(M: Matrix) -> np.ndarray:
    return M.gram_array() if isinstance(M, Block) else M.gram().dense()


class FactorInverse:
    """The pseudo-inverse of one Kronecker strategy factor's Gram ``G = A_i^T A_i``, applied
    to the factors of workload terms.

    When G is diagonal in a known orthogonal basis (identity, Haar; see
    :mod:`engine.linalg.spectral`) traces are evaluated in that basis in O(n**2) without any
    n x n inverse; otherwise an explicit pseudo-inverse is formed once (O(n**3)).
    """

    def __init__(self, A: Matrix) -> None:
        self.A = A
        self.n = A.shape[1]
        self.spectrum: GramSpectrum | None = gram_spectrum(A)
        self._gram: np.ndarray | None = None
        self._pinv: np.ndarray | None = None
        self._full_rank: bool | None = None

    @property
    def gram(self) -> np.ndarray:
        """``A_i^T A_i`` as an explicit array (formed on first use)."""
        if self._gram is None:
            self._gram = _gram_array(self.A)
        return self._gram

    def pinv(self) -> np.ndarray:
        """The explicit pseudo-inverse of the Gram (formed on first use)."""
        if self._pinv is None:
            self._pinv = (self.spectrum.pinv() if self.spectrum is not None
                          else psd_pinv(self.gram))
        return self._pinv

    def full_rank(self) -> bool:
        """True when the Gram is invertible (then it supports every query)."""
        if self._full_rank is None:
            self._full_rank = (bool(self.spectrum.live().all()) if self.spectrum is not None
                               else is_positive_definite(self.gram))
        return self._full_rank

    def trace(self, block: Matrix | None) -> float:
        """``tr[G^+ V]`` for the Gram V of a term factor (None: the total query ``1 1^T``);
        inf when the factor's queries are not in the row space of A_i."""
        if self.spectrum is not None:
            spec = self.spectrum
            if block is None:
                q = spec.total_forms()
            elif spec.basis is None:  # standard basis: the forms are the column norms
                q = block.column_norms(2) ** 2
            else:
                q = spec.quadratic_forms(_quadratic(block))
            return spec.trace_with(q)
        V = np.ones((self.n, self.n)) if block is None else _gram_array(block)
        if not self.full_rank() and not supports(V, self.gram):
            return math.inf
        return float((self.pinv() * V).sum())


def _quadratic(block: Matrix):
    """Column-wise ``||B x||**2`` for a term factor B."""
    if isinstance(block, Block):
        return block.gram_quadratic

    def quad(X: np.ndarray) -> np.ndarray:
        Y = block.matvec(X)
        return (Y * Y).sum(axis=0)

    return quad


def _kron_term_trace(term: Term, solvers: list[FactorInverse]) -> float:
    """``tr[(A^T A)^+ W_j^T W_j]`` for one term under a Kronecker strategy (inf if unsupported)."""
    parts = [solvers[i].trace(None) for i in range(len(term.domain.shape))
             if i not in term.attrs]
    if term.is_product:
        parts += [solvers[i].trace(f) for i, f in zip(term.attrs, term.factors, strict=True)]
        return math.inf if any(math.isinf(p) for p in parts) else math.prod(parts)
    if any(math.isinf(p) for p in parts):
        return math.inf
    if all(solvers[i].full_rank() for i in term.attrs):
        # a Kronecker product of invertible Grams is invertible (supports every query), and
        # its inverse is applied factor by factor: never a prod(n_i)-square matrix
        pinvs = [solvers[i].pinv() for i in term.attrs]
        return math.prod(parts) * _kron_inverse_trace(term, pinvs)
    P = np.ones((1, 1))
    Gs = np.ones((1, 1))
    for i in term.attrs:
        P = np.kron(P, solvers[i].pinv())
        Gs = np.kron(Gs, solvers[i].gram)
    V = term.query.gram().dense()
    if not supports(V, Gs):
        return math.inf
    return math.prod(parts) * float((P * V).sum())


def _kron_inverse_trace(term: Term, pinvs: list[np.ndarray]) -> float:
    """``tr[(P_1 x ... x P_k) Q^T Q]`` for a non-product term's query Q on its C-ordered
    marginal and the symmetric factor inverses ``pinvs`` (one per attribute of the term): the
    rows of Q (or of its Gram, whichever is shorter) times the Kronecker product, one axis at a
    time."""
    shape = tuple(P.shape[0] for P in pinvs)
    rows_are_queries = term.query.shape[0] <= term.query.shape[1]
    X = term.query.dense() if rows_are_queries else term.query.gram().dense()
    T = X.reshape((X.shape[0], *shape))
    for axis, P in enumerate(pinvs, start=1):
        T = np.moveaxis(np.tensordot(T, P, axes=([axis], [0])), -1, axis)
    XP = T.reshape(X.shape)  # X (P_1 x ... x P_k), the product being symmetric
    return float((XP * X).sum()) if rows_are_queries else float(np.trace(XP))


def trace_term(workload: Workload, strategy: Matrix) -> float:
    """``tr[(A^T A)^+ W^T W]``; ``inf`` when A does not support W.

    Uses the strategy's structure: per-attribute factors for a Kronecker strategy, the shared
    eigenspaces for a marginal strategy, explicit n x n matrices otherwise (small n only).
    """
    d = len(workload.domain)
    if isinstance(strategy, Kron) and len(strategy.factors) == d and all(
            f.shape[1] == n for f, n in zip(strategy.factors, workload.domain.shape,
                                            strict=True)):
        solvers = [FactorInverse(f) for f in strategy.factors]
        return float(sum(t.weight**2 * _kron_term_trace(t, solvers)
                         for t in workload.terms))
    if isinstance(strategy, MarginalStrategy):
        w = marginal_weights(workload.factor_grams())
        return marginal_trace(strategy.theta**2, w, workload.domain.shape)
    return explicit_trace(workload.gram().dense() if workload.domain.size <= EXPLICIT_LIMIT
                          else _too_big(workload), strategy.gram().dense())


def _too_big(workload: Workload) -> np.ndarray:
    raise NotApplicable(f"explicit error needs n <= {EXPLICIT_LIMIT:,} cells; this domain has "
                        f"{workload.domain.size:,}")


def explicit_trace(V: np.ndarray, G: np.ndarray) -> float:
    """``tr[G^+ V]`` for explicit Grams, ``inf`` when range(V) is not inside range(G)."""
    if not supports(V, G):
        return math.inf
    return float((psd_pinv(G) * V).sum())


def expected_tse(workload: Workload, strategy: Matrix, privacy: Privacy) -> float:
    """Expected total squared error of least squares on ``strategy`` at ``privacy``."""
    sens = strategy.sensitivity(privacy.norm)
    return privacy.unit_variance() * sens**2 * trace_term(workload, strategy)


def rmse(tse: float, queries: int) -> float:
    """Root mean squared error per query from a total squared error."""
    return math.sqrt(tse / queries)


def _interval_quadratic(block: Block, P: np.ndarray) -> np.ndarray:
    """``diag(W P W^T)`` for a block whose rows are intervals, via 2-D prefix sums of P."""
    n = P.shape[0]
    S = np.zeros((n + 1, n + 1))
    S[1:, 1:] = P.cumsum(0).cumsum(1)
    if isinstance(block, AllRangeBlock):
        a, b = np.triu_indices(n)
    else:
        a = np.arange(block.shape[0])
        b = a + block.width - 1
    return S[b + 1, b + 1] - S[a, b + 1] - S[b + 1, a] + S[a, a]


def _row_quadratic(block: Matrix, P: np.ndarray) -> np.ndarray:
    if isinstance(block, AllRangeBlock | WidthRangeBlock):
        return _interval_quadratic(block, P)
    if block.is_total():
        return np.array([P.sum()])
    W = block.dense()
    return np.einsum("ij,jk,ik->i", W, P, W)


def per_query_variances(workload: Workload, strategy: Matrix) -> np.ndarray:
    """``w^T (A^T A)^+ w`` for every workload row w (multiply by sigma**2 ||A||**2).

    Raises NotApplicable for strategies without a structured formula on large domains.
    """
    if workload.num_queries > QUERY_LIMIT:
        raise NotApplicable(f"{workload.num_queries:,} queries: per-query variances are listed "
                            f"up to {QUERY_LIMIT:,}")
    d = len(workload.domain)
    if isinstance(strategy, Kron) and len(strategy.factors) == d:
        pinvs = [FactorInverse(f).pinv() for f in strategy.factors]
        parts = []
        for t in workload.terms:
            scale = t.weight**2
            for i in range(d):
                if i not in t.attrs:
                    scale *= float(pinvs[i].sum())
            if t.is_product:
                vec = np.ones(1)
                for i, f in zip(t.attrs, t.factors, strict=True):
                    vec = np.kron(vec, _row_quadratic(f, pinvs[i]))
            else:
                P = np.ones((1, 1))
                for i in t.attrs:
                    P = np.kron(P, pinvs[i])
                W = t.query.dense()
                vec = np.einsum("ij,jk,ik->i", W, P, W)
            parts.append(scale * vec)
        return np.concatenate(parts)
    if isinstance(strategy, MarginalStrategy) and workload.is_product_union:
        return _marginal_query_variances(workload, strategy)
    if workload.domain.size > EXPLICIT_LIMIT:
        raise NotApplicable("per-query variances on large domains need a Kronecker or "
                            "marginal strategy")
    P = psd_pinv(strategy.gram().dense())
    W = workload.dense()
    return np.einsum("ij,jk,ik->i", W, P, W)


#: Largest (marginals x queries) product evaluated for marginal per-query variances.
MARGINAL_VARIANCE_LIMIT = 200_000_000


def _row_sums_and_squares(block: Matrix) -> tuple[np.ndarray, np.ndarray]:
    """Per row of a term factor: ``(sum of entries)**2`` and the squared norm."""
    ones = np.ones(block.shape[1])
    sums = np.asarray(block.matvec(ones), dtype=float)
    base = block
    while isinstance(base, PermutedBlock):
        base = base.base
    if isinstance(base, Block) and not isinstance(base, MatrixBlock):
        return sums**2, sums  # the structured blocks have 0/1 entries
    D = block.dense()
    return sums**2, (D * D).sum(axis=1)


def _marginal_query_variances(workload: Workload, strategy: MarginalStrategy) -> np.ndarray:
    """``w^T G(eta) w`` with ``G(eta) = M(theta)^T M(theta)^+`` for product-term rows w.

    For a Kronecker row, ``w^T H(a) w`` factorises: ``(sum w_i)**2`` on attributes outside a,
    ``||w_i||**2`` on those in a (Total factors: ``n_i**2`` and ``n_i``).
    """
    shape = workload.domain.shape
    d = len(shape)
    eta = pinv_weights(strategy.theta**2, shape)
    keys = np.flatnonzero(eta)
    if keys.size * workload.num_queries > MARGINAL_VARIANCE_LIMIT:
        raise NotApplicable(f"per-query variances of {workload.num_queries:,} queries under "
                            f"{keys.size:,} marginal eigenspaces exceed the work limit")
    parts = []
    for t in workload.terms:
        pairs: list[tuple[np.ndarray, np.ndarray]] = []
        it = iter(t.factors)
        for i in range(d):
            if i in t.attrs:
                pairs.append(_row_sums_and_squares(next(it)))
            else:
                pairs.append((np.array([float(shape[i]) ** 2]), np.array([float(shape[i])])))
        vec = np.zeros(t.num_queries)
        for a in keys:
            row = np.ones(1)
            for i, (clear, kept) in enumerate(pairs):
                row = np.kron(row, kept if (a >> (d - 1 - i)) & 1 else clear)
            vec += eta[a] * row
        parts.append(t.weight**2 * vec)
    return np.concatenate(parts)


def reconstruction_map(workload: Workload, strategy: Matrix) -> np.ndarray:
    """``W (A^T A)^+ A^T = W A^+``: how least squares rebuilds each workload answer (a row)
    from the strategy's measurements (the columns), as an explicit queries x measurements array.

    A zero-noise measurement ``y = A x`` gives ``W x`` back when A supports W; the noise of
    query i is ``sigma**2 ||A||**2`` times the squared norm of row i.

    Raises:
        NotApplicable: a domain above :data:`EXPLICIT_LIMIT` cells, or a W, A or map with more
            than :data:`~engine.linalg.matrix.DENSE_GUARD` entries (the map is explicit).
    """
    (m, n), k = workload.shape, strategy.shape[0]
    largest = max(m * n, k * n, m * k)
    if n > EXPLICIT_LIMIT or largest > DENSE_GUARD:
        raise NotApplicable(f"reconstruction map: {m:,} queries x {k:,} measurements over "
                            f"{n:,} cells is formed explicitly only up to {EXPLICIT_LIMIT:,} "
                            f"cells and {DENSE_GUARD:,} entries per matrix")
    A = strategy.dense()
    return workload.dense() @ psd_pinv(A.T @ A) @ A.T


def monte_carlo_tse(workload: Workload, strategy: Matrix, privacy: Privacy, trials: int,
                    rng: np.random.Generator) -> float:
    """Empirical total squared error of least squares on ``strategy`` (small domains).

    Noise is drawn at the privacy level and reconstructed by an explicit pseudo-inverse;
    the data vector cancels out, so zeros are used.
    """
    A = strategy.dense()
    W = workload.dense()
    WAp = W @ np.linalg.pinv(A)
    sens = strategy.sensitivity(privacy.norm)
    noise = privacy.sample((A.shape[0], trials), sens, rng)
    err = WAp @ noise
    return float((err**2).sum(axis=0).mean())


__all__ = ["Dense", "expected_tse", "explicit_trace", "monte_carlo_tse", "per_query_variances",
           "reconstruction_map", "rmse", "trace_term"]
