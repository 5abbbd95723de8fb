"""Expected error of a strategy for a workload, and a Monte-Carlo checker.

For a strategy A (measured with i.i.d. noise of variance ``sigma**2 * ||A||**2`` per entry,
``||A||`` the L1 or L2 sensitivity) and least-squares reconstruction, the expected total
squared error over the workload is::

    TSE = sigma**2 * ||A||**2 * tr[(A^T A)^+ W^T W]

where ``sigma`` is the privacy level's noise std per unit sensitivity (``Privacy.sigma()``).
RMSE is ``sqrt(TSE / m)`` with m the number of workload queries. Changing eps/delta/rho only
changes ``sigma``: error for a new privacy level is a rescale, never a re-plan.
"""

from __future__ import annotations

import math

import numpy as np

from engine.errors import NotApplicable
from engine.linalg.marginals import MarginalStrategy, marginal_trace, marginal_weights
from engine.linalg.matrix import Dense, Kron, Matrix
from engine.linalg.pinv import psd_pinv, supports
from engine.privacy import Privacy
from engine.workloads.blocks import AllRangeBlock, Block, WidthRangeBlock
from engine.workloads.term import Term
from engine.workloads.workload import Workload

#: Largest domain on which error is computed with explicit n x n matrices.
EXPLICIT_LIMIT = 8192
#: Largest number of per-query variances listed.
QUERY_LIMIT = 20_000_000


def _gram_array(M: Matrix) -> np.ndarray:
    return M.gram_array() if isinstance(M, Block) else M.gram().dense()


def _kron_pinvs(strategy: Kron) -> list[np.ndarray]:
    return [psd_pinv(_gram_array(f)) for f in strategy.factors]


def _kron_term_trace(term: Term, factor_grams: list[np.ndarray], pinvs: list[np.ndarray]
                     ) -> float:
    """``tr[(A^T A)^+ W_j^T W_j]`` for one term under a Kronecker strategy (inf if unsupported)."""
    total = 1.0
    for i in range(len(term.domain.shape)):
        if i in term.attrs:
            continue
        P = pinvs[i]  # Total factor: tr[P 1 1^T] = sum(P); supported iff 1 in range(A_i)
        ones = np.ones((P.shape[0], P.shape[0]))
        if not supports(ones, factor_grams[i]):
            return math.inf
        total *= float(P.sum())
    if term.is_product:
        for i, f in zip(term.attrs, term.factors, strict=True):
            V = _gram_array(f)
            if not supports(V, factor_grams[i]):
                return math.inf
            total *= float((pinvs[i] * V).sum())
        return total
    P = np.ones((1, 1))
    Gs = np.ones((1, 1))
    for i in term.attrs:
        P = np.kron(P, pinvs[i])
        Gs = np.kron(Gs, factor_grams[i])
    V = term.query.gram().dense()
    if not supports(V, Gs):
        return math.inf
    return total * float((P * V).sum())


def trace_term(workload: Workload, strategy: Matrix) -> float:
    """``tr[(A^T A)^+ W^T W]``; ``inf`` when A does not support W.

    Uses the strategy's structure: per-attribute factors for a Kronecker strategy, the shared
    eigenspaces for a marginal strategy, explicit n x n matrices otherwise (small n only).
    """
    d = len(workload.domain)
    if isinstance(strategy, Kron) and len(strategy.factors) == d and all(
            f.shape[1] == n for f, n in zip(strategy.factors, workload.domain.shape,
                                            strict=True)):
        grams = [_gram_array(f) for f in strategy.factors]
        pinvs = [psd_pinv(G) for G in grams]
        return float(sum(t.weight**2 * _kron_term_trace(t, grams, pinvs)
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
        pinvs = _kron_pinvs(strategy)
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
    if workload.domain.size > EXPLICIT_LIMIT:
        raise NotApplicable("per-query variances on large domains need a Kronecker strategy")
    P = psd_pinv(strategy.gram().dense())
    W = workload.dense()
    return np.einsum("ij,jk,ik->i", W, P, W)


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
           "rmse", "trace_term"]
