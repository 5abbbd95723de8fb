"""Eigen-queries, weighted designs and the full Eigen-Design algorithm (Program 2).

Program 2 (spec 4.2): eigendecompose ``G = W^T W``, drop the zero eigenvalues (relative
tolerance), weight the remaining eigen-queries with Program 1 (``c = eigenvalues``), and
complete the under-used cells with single-cell queries. The same :func:`weighted_design` turns
the weights of any orthonormal design set (eigen-queries, reductions, Wavelet, Fourier) into a
strategy with an exactly evaluated error.

A repeated eigenvalue leaves its eigen-queries undetermined: any orthonormal basis of the
eigenspace diagonalises G, but Program 1 weights single queries, so its optimum depends on the
basis. LAPACK's choice depends on the BLAS thread count (the CLI's threaded BLAS and the
explorer's one-thread planner processes gave RMSE 7.8970 and 7.9040 on age x sex x race
prefix + 2-way marginals, whose Gram has eigenspaces of dimension 594 and 99), so
:func:`eigen_queries` rotates every such eigenspace to a canonical basis
(:func:`canonical_eigenbasis`).
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
#: Computed eigenvalues within this fraction of each other (plus the round-off of
#: :data:`EIGH_ROUNDOFF`) are one repeated eigenvalue, whose eigenspace's basis
#: :func:`canonical_eigenbasis` chooses. Repeated eigenvalues come out of eigh equal to about
#: 1e-11 of their value (6e-12 on age x sex x race prefix + 2-way marginals); distinct ones of
#: the workloads tested differ by at least 1.8e-6 (all ranges and prefixes at n = 2048, whose
#: small eigenvalues crowd within 1e-12 of the largest one: a tolerance relative to the
#: largest eigenvalue would merge them).
DEGENERATE_RTOL = 1e-8
#: eigh's absolute eigenvalue error as a fraction of the largest eigenvalue (64 units of
#: round-off): small repeated eigenvalues differ by this much more than their own scale says.
EIGH_ROUNDOFF = 64 * float(np.finfo(float).eps)
#: Entries within this fraction of a row's largest magnitude tie for fixing the row's sign
#: (round-off moves entries by far less, so the same entry leads on every BLAS).
SIGN_RTOL = 1e-6
#: Rows of the eigen-queries handled at once when summing over them (bounds a temporary at
#: 256 x n floats).
ROW_CHUNK = 256


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
    """Eigen-queries of a PSD Gram: eigenvalues above ``zero_tol * max`` (descending), in the
    canonical basis of :func:`canonical_eigenbasis` within repeated eigenvalues."""
    start = time.perf_counter()
    G = np.asarray(G, dtype=float)
    sig, V = np.linalg.eigh(G)
    keep = np.flatnonzero(sig > zero_tol * max(float(sig.max(initial=0.0)), 1e-300))[::-1]
    values = sig[keep].copy()
    vectors = canonical_eigenbasis(values, np.ascontiguousarray(V[:, keep].T))
    return EigenQueries(values, vectors, G.shape[0], float(np.trace(G)),
                        time.perf_counter() - start)


def canonical_eigenbasis(values: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """The eigen-queries in a basis that does not depend on the eigensolver's choice.

    Within each repeated eigenvalue (:data:`DEGENERATE_RTOL`), the rows are rotated to the
    eigenvectors of the eigenspace's compression of ``diag(load)``, where
    ``load = diag(G^(1/2))`` is each cell's squared column norm under the SVD-bound weights
    (``u ~ sqrt(eigenvalue)``, basis-invariant); rows whose compressed loads tie again are
    separated by the cell index. A basis that follows the cells' loads lets Program 1 give
    lightly loaded cells more weight: on age x sex x race prefix + 2-way marginals it reaches
    3393.18 at unit noise where LAPACK's bases reached 3543.0-3549.3 (SVD bound 3350.07).
    The ties the load leaves there are symmetries of the workload (the contrasts of twin
    values), on which Program 1's optimum, unique and symmetric, is the same in every basis;
    the cell index fixes the rows all the same. Every row's sign is then chosen so that its
    first entry of largest magnitude is positive. Eigenvalues are not changed; distinct ones
    keep their eigenvectors. Cost: O(k**2 n) per eigenspace of dimension k (0.12 s CPU against
    eigh's 0.37 s on that workload, one BLAS thread), O(r n) without repeated eigenvalues.

    Args:
        values: eigenvalues, descending, all positive (r,).
        vectors: orthonormal eigen-queries as rows (r x n); not modified.

    Returns:
        The rotated eigen-queries (r x n), orthonormal, in the order of ``values``.
    """
    out = np.array(vectors, dtype=float, order="C")
    roundoff = EIGH_ROUNDOFF * float(values[0]) if values.size else 0.0
    runs = [(i, j) for i, j in _runs(values, DEGENERATE_RTOL, roundoff) if j - i > 1]
    if runs:
        load = np.zeros(out.shape[1])
        roots = np.sqrt(values)
        for lo in range(0, out.shape[0], ROW_CHUNK):
            block = out[lo:lo + ROW_CHUNK]
            load += roots[lo:lo + ROW_CHUNK] @ (block * block)
        keys = (load, np.arange(out.shape[1], dtype=float))
        for i, j in runs:
            out[i:j] = _split(out[i:j], keys)
    for lo in range(0, out.shape[0], ROW_CHUNK):
        block = out[lo:lo + ROW_CHUNK]
        size = np.abs(block)
        lead = np.argmax(size >= (1.0 - SIGN_RTOL) * size.max(axis=1, keepdims=True),
                         axis=1)
        block *= np.where(block[np.arange(block.shape[0]), lead] < 0, -1.0, 1.0)[:, None]
    return out


def _runs(values: np.ndarray, rtol: float, atol: float) -> list[tuple[int, int]]:
    """Index ranges ``[i, j)`` of sorted ``values``: each value within ``rtol |v_i| + atol``
    of its range's first value ``v_i``."""
    runs, i = [], 0
    while i < values.size:
        j = i + 1
        tol = rtol * abs(float(values[i])) + atol
        while j < values.size and abs(float(values[j] - values[i])) <= tol:
            j += 1
        runs.append((i, j))
        i = j
    return runs


def _split(rows: np.ndarray, keys: tuple[np.ndarray, ...]) -> np.ndarray:
    """An orthonormal basis of the span of ``rows`` (k x n) that diagonalises the compression
    ``rows diag(key) rows^T`` of the first key, its ties (within :data:`DEGENERATE_RTOL` of
    the key's largest magnitude) split by the next keys in turn; the rows come in ascending
    order of the key. A span of k unit vectors (the projector's diagonal is 1 on k cells) is
    returned as those unit vectors in cell order at O(k n) cost, not O(k**2 n) (the identity
    workload: one eigenspace of all n cells)."""
    k = rows.shape[0]
    if k == 1:
        return rows
    weight = (rows * rows).sum(axis=0)
    cells = np.flatnonzero(weight > 0.5)
    if cells.size == k and np.all(np.abs(weight[cells] - 1.0) <= DEGENERATE_RTOL):
        units = np.zeros_like(rows)
        units[np.arange(k), cells] = 1.0
        return units
    if not keys:
        return rows
    key, rest = keys[0], keys[1:]
    C = (rows * key) @ rows.T
    C = (C + C.T) / 2.0
    tol = DEGENERATE_RTOL * float(np.abs(key).max())
    diagonal = np.diag(C)
    if np.ptp(diagonal) <= tol and np.abs(C - np.diag(diagonal)).max() <= tol:
        return _split(rows, rest)  # a multiple of the identity: this key tells nothing
    w, U = np.linalg.eigh(C)
    rotated = U.T @ rows
    return np.vstack([_split(rotated[i:j], rest) for i, j in _runs(w, 0.0, tol)])


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
