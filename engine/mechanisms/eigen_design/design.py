"""Eigen-queries, weighted designs and the full Eigen-Design algorithm (Program 2).

Program 2 (spec 4.2): eigendecompose ``G = W^T W``, drop the zero eigenvalues (relative
tolerance), weight the remaining eigen-queries with Program 1 (``c = eigenvalues``), and
complete the under-used cells with single-cell queries. The same :func:`weighted_design` turns
the weights of any orthonormal design set (eigen-queries, reductions, Wavelet, Fourier) into a
strategy with an exactly evaluated error.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine.linalg.matrix import Matrix
from engine.mechanisms.eigen_design.program1 import GAP_TOL, Program1Result, solve_program1
from engine.mechanisms.eigen_design.strategy import (
    EigenStrategy,
    LazySensitivity,
    NormalSolver,
    completion,
    completion_l1,
)
from engine.progress import Progress
from engine.workloads.blocks import Block
from engine.workloads.workload import Workload

#: Eigenvalues at or below ``ZERO_TOL * max`` count as zero (spec pitfall 4).
ZERO_TOL = 1e-10
#: Largest domain whose Gram :func:`dense_gram` builds (8 bytes x n**2: 2 GB at 16384).
GRAM_LIMIT = 16384


def _gram_array(M: Matrix) -> np.ndarray:
    return M.gram_array() if isinstance(M, Block) else M.gram().dense()


def dense_gram(workload: Workload, limit: int = GRAM_LIMIT) -> np.ndarray:
    """``W^T W`` as a dense n x n array, built term by term from closed-form Grams.

    Product terms are Kronecker products of per-attribute Grams (Total -> all-ones); other
    terms expand the Gram of their query over the marginal to the full domain. Nothing of
    size m (the number of queries) is ever formed.

    Raises:
        ValueError: when the domain has more than ``limit`` cells.
    """
    domain = workload.domain
    n = domain.size
    if n > limit:
        raise ValueError(f"a dense Gram needs n <= {limit:,} cells; this domain has {n:,}")
    G = np.zeros((n, n))
    coords = np.indices(domain.shape).reshape(len(domain.shape), -1)
    for t in workload.terms:
        w2 = t.weight**2
        if t.is_product:
            K = np.ones((1, 1))
            for f in t.full_factors():
                K = np.kron(K, _gram_array(f))
            G += w2 * K
        else:
            Gs = t.gram_on_attrs().dense()
            if t.attrs:
                idx = np.ravel_multi_index(coords[list(t.attrs)], t.marginal_shape)
                G += w2 * Gs[np.ix_(idx, idx)]
            else:
                G += w2 * float(Gs.sum())
    return (G + G.T) / 2.0


@dataclass(frozen=True)
class EigenQueries:
    """The eigen-queries of a Gram matrix, zero eigenvalues dropped.

    Attributes:
        values: non-zero eigenvalues, descending (r,).
        vectors: the matching eigen-queries as rows (r x n), orthonormal.
        n: number of cells.
        trace: ``tr G`` (including round-off on the dropped part).
        seconds: time of the eigendecomposition.
    """

    values: np.ndarray
    vectors: np.ndarray
    n: int
    trace: float
    seconds: float = 0.0

    @property
    def rank(self) -> int:
        """Number of non-zero eigenvalues."""
        return int(self.values.size)

    @property
    def svd_bound(self) -> float:
        """``(sum sqrt(sigma))**2 / n`` (spec section 2), unit privacy."""
        return float(np.sqrt(self.values).sum() ** 2 / self.n)

    def factor(self) -> np.ndarray:
        """``F`` (n x r) with ``G = F F^T`` (the eigen-queries scaled by sqrt(sigma))."""
        return self.vectors.T * np.sqrt(self.values)

    def approximation_ratio(self) -> float:
        """Theorem 3's factor ``rho = (n sigma_max / svdb)**(1/4)`` (root scale)."""
        return float((self.n * self.values[0] / self.svd_bound) ** 0.25)


def eigen_queries(G: np.ndarray, zero_tol: float = ZERO_TOL) -> EigenQueries:
    """Eigen-queries of a PSD Gram: eigenvalues above ``zero_tol * max`` (descending)."""
    start = time.perf_counter()
    G = np.asarray(G, dtype=float)
    sig, V = np.linalg.eigh(G)
    keep = np.flatnonzero(sig > zero_tol * max(float(sig.max(initial=0.0)), 1e-300))[::-1]
    vectors = np.ascontiguousarray(V[:, keep].T)
    return EigenQueries(sig[keep].copy(), vectors, G.shape[0], float(np.trace(G)),
                        time.perf_counter() - start)


@dataclass(frozen=True)
class WeightedDesign:
    """A weighted design set turned into a strategy, with its exact error.

    Attributes:
        strategy: the strategy matrix (weighted queries, optional complement, completion).
        norm: sensitivity norm the weights were optimised for (2: Gram weights, 1: row).
        costs: Program 1's c per design query.
        weights: Program 1's variables per design query (u under L2, lambda under L1).
        program1: solver summaries (one per Program 1 instance solved).
        value: Program 1's objective before completion (unit privacy, sensitivity 1).
        trace: ``tr[G (A^T A)^+]`` of the stored strategy.
        sensitivity: ``{1: L1, 2: L2}`` of the stored strategy (computed on first access).
        solver: the NormalSolver of the strategy (reconstruction, variances).
        info: extra views (reduction groups, basis names, timings).
    """

    strategy: EigenStrategy
    norm: int
    costs: np.ndarray
    weights: np.ndarray
    program1: tuple[dict[str, Any], ...]
    value: float
    trace: float
    sensitivity: Mapping[int, float]
    solver: NormalSolver | None
    info: dict[str, Any] = field(default_factory=dict)

    def unit_error(self, norm: int | None = None) -> float:
        """``||A||**2 tr[G (A^T A)^+]`` in the given norm (default: the optimised one)."""
        p = self.norm if norm is None else norm
        return self.sensitivity[p] ** 2 * self.trace


def weighted_design(queries: np.ndarray | Matrix, costs: np.ndarray, weights: np.ndarray,
                    norm: int, *, complete: bool = True, rest: tuple[float, float] | None = None,
                    G: np.ndarray | Matrix | None = None, F: np.ndarray | None = None,
                    eigenbasis: bool = False, program1: tuple[dict[str, Any], ...] = (),
                    info: dict[str, Any] | None = None,
                    completion_cells: int | None = None) -> WeightedDesign:
    """Build the strategy for Program 1 weights and evaluate its error exactly.

    Args:
        queries: orthonormal design rows (r x n), explicit or implicit.
        costs: c per design query (for the pre-completion value).
        weights: Program 1's variables (Gram weights u under L2, row weights under L1).
        norm: 2 or 1.
        complete: add the diagonal completion.
        rest: ``(cost, weight)`` of the shared complement block (principal vectors without a
            full eigendecomposition), or None.
        G, F: the workload Gram (dense, or a GramOperator for a complement block), or a
            factor with ``G = F F^T`` (explicit designs; a square design without completion
            uses Program 1's exact value instead).
        eigenbasis: the queries are eigenvectors of G with eigenvalues ``costs`` (then
            ``G = Q^T diag(costs) Q`` and neither G nor F is needed).
        program1: solver summaries to keep with the design.
        info: extra views.
        completion_cells: complete at most this many cells, those with the largest
            deficits (None: every under-used cell). A partial completion keeps the
            sensitivity and only adds to ``A^T A``, so the error lies between the uncompleted
            and the fully completed design's; it bounds the Woodbury system at m x m.
    """
    p = 1.0 if norm == 2 else 2.0
    x = np.asarray(weights, float)
    lam = np.sqrt(x) if norm == 2 else x
    rest_w = 0.0
    value = float((costs[x > 0] * x[x > 0] ** -p).sum())
    if rest is not None:
        rest_cost, rest_x = rest
        rest_w = math.sqrt(rest_x) if norm == 2 else rest_x
        value += rest_cost * rest_x**-p
    base = EigenStrategy(queries, lam, rest_w)
    d = None
    if complete:
        norms = base.column_norms(norm)
        d = completion(norms) if norm == 2 else completion_l1(norms)
        if completion_cells is not None and np.count_nonzero(d) > completion_cells:
            d[np.argsort(-d)[completion_cells:]] = 0.0
        if not d.any():
            d = None
    strategy = EigenStrategy(queries, lam, rest_w, d)
    # a square orthonormal design measured without completion: A^T A = Q^T diag(lam**2) Q, so
    # tr[G (A^T A)^+] = sum c_i / lam_i**2 exactly (c = diag(Q G Q^T)); a direction the
    # workload uses (c_i > 0) but the design does not measure makes the error infinite
    square = queries.shape[0] == queries.shape[1]
    solver = NormalSolver(strategy)
    if square and d is None and rest is None:
        costs_arr = np.asarray(costs, float)
        unmeasured = float(costs_arr[x <= 0].sum())
        trace = (math.inf if unmeasured > 1e-8 * float(costs_arr.sum())
                 else float((costs_arr[x > 0] / lam[x > 0] ** 2).sum()))
    elif eigenbasis:
        trace = solver.trace(diagonal=np.asarray(costs, float))
    else:
        trace = solver.trace(G=G, F=F)
    sens = LazySensitivity(strategy)
    return WeightedDesign(strategy, norm, np.asarray(costs, float), x, tuple(program1), value,
                          trace, sens, solver, dict(info or {}))


def design_costs(queries: np.ndarray, G: np.ndarray | None = None, F: np.ndarray | None = None
                 ) -> np.ndarray:
    """Program 1's ``c_i = (Q G Q^T)_ii`` for orthonormal design rows (spec 3.3)."""
    if F is not None:
        QF = queries @ F
        return np.maximum((QF * QF).sum(axis=1), 0.0)
    return np.maximum(np.einsum("ij,ij->i", queries @ G, queries), 0.0)


def constraint_matrix(queries: np.ndarray, norm: int) -> np.ndarray:
    """``B = Q o Q`` (L2: column norms squared) or ``|Q|`` (L1: column sums)."""
    return queries * queries if norm == 2 else np.abs(queries)


def program1_power(norm: int) -> float:
    """Program 1's exponent: 1 for Gram weights (L2), 2 for row weights (L1)."""
    return 1.0 if norm == 2 else 2.0


def eigen_design(eig: EigenQueries, norm: int = 2, *, complete: bool = True,
                 method: str = "auto", tol: float = GAP_TOL, max_iter: int = 5000,
                 progress: Progress | None = None) -> WeightedDesign:
    """The full Eigen-Design algorithm on precomputed eigen-queries (Program 2).

    Args:
        eig: eigen-queries of the workload Gram.
        norm: 2 for (eps, delta) / zCDP (Program 1 on Gram weights), 1 for the eps-DP
            variant of section 3.5 (row weights under L1 column sums).
        complete: add the diagonal completion (step 4).
        method: Program 1 solver (see :func:`solve_program1`).
        tol, max_iter: Program 1's target relative gap and iteration cap.
        progress: receives Program 1 iterations.
    """
    B = constraint_matrix(eig.vectors, norm)
    res: Program1Result = solve_program1(eig.values, B, power=program1_power(norm),
                                         method=method, tol=tol, max_iter=max_iter,
                                         progress=progress)
    return weighted_design(eig.vectors, eig.values, res.x, norm, complete=complete,
                           eigenbasis=True, program1=(res.summary(),),
                           info={"design_set": "eigen"})


def basis_design(queries: np.ndarray, eig: EigenQueries, norm: int = 2, *,
                 complete: bool = True, method: str = "auto", tol: float = GAP_TOL,
                 max_iter: int = 5000, name: str = "basis",
                 progress: Progress | None = None) -> WeightedDesign:
    """Program 1 on a fixed orthonormal design set (Wavelet, Fourier, identity; Figure 5).

    Args:
        queries: (n x n) orthonormal design rows.
        eig: the workload's eigen-queries (used only as the factor ``G = F F^T``).
        norm: 2 (Gram weights) or 1 (row weights, section 3.5).
        complete: add the diagonal completion.
        method: Program 1 solver.
        tol, max_iter: Program 1's target relative gap and iteration cap.
        name: the design set's name (kept in ``info``).
        progress: receives Program 1 iterations.
    """
    F = eig.factor()
    identity = queries.shape[0] == queries.shape[1] and np.array_equal(
        queries, np.eye(queries.shape[0]))
    # c = diag(Q G Q^T) is diag(G) for the identity: no n x n product needed
    costs = (F * F).sum(axis=1) if identity else design_costs(queries, F=F)
    res = solve_program1(costs, constraint_matrix(queries, norm), power=program1_power(norm),
                         method=method, tol=tol, max_iter=max_iter, progress=progress)
    return weighted_design(queries, costs, res.x, norm, complete=complete, F=F,
                           program1=(res.summary(),), info={"design_set": name})
