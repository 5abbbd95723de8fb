"""Workload reductions for large n (paper section 4.2, spec 7.2): cheaper Program 1 instances.

* **Eigen-separation**: cut the eigen-queries (by descending eigenvalue) into groups of
  ``group_size``; weigh each group alone (Program 1 with the other eigenvalues set to 0), then
  give every group one common scale factor found by a second, small Program 1 over the groups
  as "super design queries". The paper's cost analysis picks ``group_size ~ n**(1/3)``.
  Accuracy: nearly free on range workloads (+0.1 % at n = 512), about +10 % on marginals.
* **Principal vectors**: keep the top ``fraction`` of the non-zero eigen-queries as individual
  design queries and give all the others one shared weight (Program 1 with k + 1 variables).
  Accuracy: +2.6 % / +7.7 % / +14 % over the bound for 25 % / 10 % / 6 % on all ranges
  (n = 512), essentially exact on marginals.

Both can keep the full eigendecomposition, so they reproduce the paper's accuracy trade-off; with
our own fast Program 1 solver the O(n**3) linear algebra, not Program 1, dominates the time of
the full algorithm (all ranges at n = 8192, one core: eigh ~110 s, Program 1 ~16 s, completion
and exact error ~45 s, since about half the cells get a completion row).
:func:`principal_vectors_partial` therefore also avoids the eigendecomposition: it finds an
orthonormal basis of the dominant eigenspace by randomized subspace iteration and measures its
complement through the projector ``I - Q^T Q``, so the strategy is exact and its error is
evaluated exactly (Woodbury). With the implicit Gram of ``gram`` (O(n) per product for 1-D
blocks) it costs O(n k**2): 2.5 s at n = 8192 with 6 % of the eigenvectors, about 65x below
the full algorithm. Use it for full-rank
workloads; on low-rank ones (marginals) its complement also covers the null space, and the
Kronecker path of ``structured`` is exact and faster. :func:`separation_partial` does the same
for eigen-separation: separation over the groups of the computed top eigen-queries, the
complement one more super design query of stage 2. The shared weight of the tail is its only
approximation, and the tail of the all-range spectrum is wide (the 25 % point's eigenvalue is
~7x the smallest), so staying within 2 % of the full algorithm takes 20-25 % of the
eigen-queries; the O(n k**2) orthonormalisation and Rayleigh-Ritz then dominate its time.

Choosing: ``separation`` when the eigendecomposition is affordable and accuracy matters;
``principal`` with ``fraction`` 0.1-0.25 for large 1-D / full-rank workloads (beyond
``max_dense_cells`` both switch to the randomized subspace automatically). With a fixed
fraction the partial eigensolver is O(fraction**2 n**3), the same order as eigh, so its
speed-up over the full algorithm does not grow with n (all ranges, CPU: ~6-8x at 20-25 %).
"""

from __future__ import annotations

import math
import time

import numpy as np
import scipy.linalg as sla
import scipy.linalg.blas as blas

from engine.linalg.matrix import Matrix
from engine.mechanisms.eigen_design.design import (
    EigenQueries,
    WeightedDesign,
    constraint_matrix,
    program1_power,
    weighted_design,
)
from engine.mechanisms.eigen_design.gram import gram_diagonal, gram_product
from engine.mechanisms.eigen_design.program1 import (
    GAP_TOL,
    Program1Result,
    solve_batch_active,
    solve_program1,
)
from engine.progress import Progress, report


def default_group_size(n: int) -> int:
    """The paper's group size: the power of two nearest to ``n**(1/3)`` (16 at n = 8192)."""
    return max(1, 2 ** round(math.log2(max(n, 1) ** (1.0 / 3.0))))


def separation_weights(values: np.ndarray, B: np.ndarray, group_size: int, power: float,
                       progress: Progress | None = None, *,
                       rest: tuple[float, np.ndarray] | None = None
                       ) -> tuple[np.ndarray, float | None, list[dict[str, float | int | str]]]:
    """Program 1 weights by eigen-query separation (spec 7.2, steps 1-3).

    Args:
        values: costs of the design queries, in the order the groups are cut (descending
            eigenvalues).
        B: (r x n) constraint rows of the design queries.
        group_size: queries per group (the last group may be smaller).
        power: Program 1 exponent (1: L2 Gram weights, 2: L1 row weights).
        progress: receives stage-1 and stage-2 iterations.
        rest: ``(cost, row)`` of a block whose directions share one weight (the complement
            of eigen-queries that were not computed): it enters stage 2 as one more super
            design query, with equal weights inside it.

    Returns:
        ``(x, rest_x, summaries)``: weights for every design query and for the rest block
        (None without one), exactly feasible together, and a summary of each stage.
    """
    r = values.shape[0]
    g = max(1, min(int(group_size), r))
    full, tail = divmod(r, g)
    start = time.perf_counter()
    x = np.empty(r)
    iterations = 0
    if full:
        xs, _, _, it = solve_batch_active(values[:full * g].reshape(full, g),
                                          B[:full * g].reshape(full, g, -1), power,
                                          GAP_TOL, progress)
        x[:full * g] = xs.reshape(-1)
        iterations += it
    if tail:
        res = solve_program1(values[full * g:], B[full * g:], power=power, progress=progress)
        x[full * g:] = res.x
        iterations += res.iterations
    stage1 = {"stage": "groups", "groups": full + (1 if tail else 0), "group_size": g,
              "iterations": iterations, "seconds": time.perf_counter() - start}
    # stage 2: each group is one super design query scaled by a common factor t_g
    labels = np.arange(r) // g
    ngroups = int(labels.max()) + 1
    super_costs = np.bincount(labels, weights=values * x**-power, minlength=ngroups)
    super_B = np.zeros((ngroups, B.shape[1]))
    np.add.at(super_B, labels, x[:, None] * B)
    if rest is not None:
        super_costs = np.append(super_costs, rest[0])
        super_B = np.vstack([super_B, rest[1]])
    res2: Program1Result = solve_program1(super_costs, super_B, power=power, progress=progress)
    weights = res2.x[labels] * x
    load = B.T @ weights
    rest_x = None
    if rest is not None:
        rest_x = float(res2.x[ngroups])
        load = load + rest_x * rest[1]
    scale = float(load.max())
    weights /= scale
    if rest_x is not None:
        rest_x /= scale
    return weights, rest_x, [stage1, {"stage": "combine", **res2.summary()}]


def eigen_separation(eig: EigenQueries, group_size: int | None = None, norm: int = 2, *,
                     complete: bool = True, progress: Progress | None = None
                     ) -> WeightedDesign:
    """Eigen-Design with the eigen-separation reduction (group size default ~ n**(1/3))."""
    g = default_group_size(eig.n) if not group_size else int(group_size)
    B = constraint_matrix(eig.vectors, norm)
    x, _, summaries = separation_weights(eig.values, B, g, program1_power(norm), progress)
    return weighted_design(eig.vectors, eig.values, x, norm, complete=complete,
                           eigenbasis=True, program1=tuple(summaries),
                           info={"design_set": "eigen", "reduction": "separation",
                                 "group_size": g})


def principal_count(rank: int, fraction: float) -> int:
    """Number of individually weighted eigen-queries: ``round(fraction * rank)``, at least 1.

    Rounding (not ceil/floor) reproduces the spec's n = 512 table (31 for 6 %, 51 for 10 %).
    """
    return max(1, min(rank, int(math.floor(fraction * rank + 0.5))))


def principal_vectors(eig: EigenQueries, fraction: float = 0.1, norm: int = 2, *,
                      complete: bool = True, progress: Progress | None = None
                      ) -> WeightedDesign:
    """Eigen-Design with the principal-vectors reduction (spec 7.2).

    The top ``round(fraction * rank)`` eigen-queries (percent of the *non-zero* ones) get
    their own weight; all other non-zero eigen-queries share one weight.
    """
    k = principal_count(eig.rank, fraction)
    B = constraint_matrix(eig.vectors, norm)
    p = program1_power(norm)
    if k >= eig.rank:
        res = solve_program1(eig.values, B, power=p, progress=progress)
        x = res.x
    else:
        costs = np.append(eig.values[:k], eig.values[k:].sum())
        rows = np.vstack([B[:k], B[k:].sum(axis=0, keepdims=True)])
        res = solve_program1(costs, rows, power=p, progress=progress)
        x = np.append(res.x[:k], np.full(eig.rank - k, res.x[k]))
    return weighted_design(eig.vectors, eig.values, x, norm, complete=complete,
                           eigenbasis=True, program1=(res.summary(),),
                           info={"design_set": "eigen", "reduction": "principal",
                                 "fraction": fraction, "principal": k})


def orthonormal_columns(Y: np.ndarray, passes: int = 2) -> np.ndarray:
    """An orthonormal basis of Y's columns (n x l, n >> l).

    Cholesky-QR (the l x l Gram matrix by a symmetric rank-k update, half a matrix product,
    then a triangular solve: about 3x faster than Householder here), after equilibrating the
    columns; ``passes = 2`` repeats it, which corrects the first pass's loss of orthogonality
    (cond(Y)**2 * eps) down to round-off, ``passes = 1`` is enough between the products of a
    subspace iteration (only the span matters there). Householder QR when the Gram matrix is
    too ill-conditioned for a Cholesky factor.
    """
    Z = Y / np.maximum(np.linalg.norm(Y, axis=0), 1e-300)
    try:
        for _ in range(passes):
            # Z^T Z into the upper triangle (Z.T is a Fortran view of a C-ordered Z: no copy)
            R = sla.cholesky(blas.dsyrk(1.0, Z.T), lower=False, check_finite=False)
            Z = sla.solve_triangular(R, Z.T, trans="T", lower=False, check_finite=False).T
    except np.linalg.LinAlgError:
        return np.linalg.qr(Y)[0]
    # a second-pass factor far from the identity means the first Cholesky was too inaccurate
    # (cond(Y) near 1e8)
    if passes > 1 and np.abs(np.diag(R) - 1.0).max() > 1e-3:
        return np.linalg.qr(Y)[0]
    return np.ascontiguousarray(Z)


def dominant_subspace(G: np.ndarray | Matrix, k: int, *, oversample: int | None = None,
                      power_iterations: int = 2, seed: int = 0
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Orthonormal Ritz vectors (k x n) and Ritz values of G's dominant k-dim eigenspace.

    Randomized subspace iteration (Halko, Martinsson & Tropp 2011) with re-orthonormalisation
    between the products, then Rayleigh-Ritz. Each product costs ``O(n**2 (k + oversample))``
    with a dense G and ``O(n (k + oversample))`` with a fast :class:`GramOperator`, against
    ``O(n**3)`` for a full eigendecomposition.
    """
    n = G.shape[0]
    extra = max(10, k // 10) if oversample is None else oversample
    size = min(n, k + extra)
    rng = np.random.default_rng(seed)
    Y = gram_product(G, rng.standard_normal((n, size)))
    for _ in range(power_iterations):
        Y = gram_product(G, orthonormal_columns(Y, passes=1))
    basis = orthonormal_columns(Y)
    theta, U = np.linalg.eigh(basis.T @ gram_product(G, basis))
    top = np.argsort(theta)[::-1][:k]
    vectors = np.ascontiguousarray((basis @ U[:, top]).T)
    return vectors, np.maximum(theta[top], 0.0)


def principal_vectors_partial(G: np.ndarray | Matrix, fraction: float = 0.1, *,
                              complete: bool = True,
                              seed: int = 0, power_iterations: int = 2,
                              progress: Progress | None = None) -> WeightedDesign:
    """Principal vectors without the full eigendecomposition (L2 only).

    The top ``round(fraction * n)`` directions come from :func:`dominant_subspace`; the
    complement (everything else, including any null space of G, because the rank is not
    known) shares one weight and is measured through ``I - Q^T Q``. For any orthonormal Q the
    error separates exactly (``c_i = (Q G Q^T)_ii``, ``c_rest = tr G - sum c_i``), so the
    design is exact even though Q only approximates the eigenvectors. G may be dense or a
    :class:`GramOperator` (then nothing of size n**2 is formed).
    """
    start = time.perf_counter()
    n = G.shape[0]
    k = principal_count(n, fraction)
    Q, ritz = dominant_subspace(G, k, power_iterations=power_iterations, seed=seed)
    report(progress, 0, float(ritz.sum()), "dominant subspace")
    costs = np.maximum(np.einsum("ji,ij->i", gram_product(G, Q.T), Q), 0.0)
    rest_cost = max(float(gram_diagonal(G).sum()) - float(costs.sum()), 0.0)
    Bq = Q * Q
    rest_row = np.maximum(1.0 - Bq.sum(axis=0), 0.0)
    subspace_seconds = time.perf_counter() - start
    if rest_cost <= 0.0 or not rest_row.any():
        res = solve_program1(costs, Bq, progress=progress)
        rest = None
        x = res.x
    else:
        res = solve_program1(np.append(costs, rest_cost), np.vstack([Bq, rest_row]),
                             progress=progress)
        x = res.x[:k]
        rest = (rest_cost, float(res.x[k]))
    return weighted_design(Q, costs, x, 2, complete=complete, rest=rest, G=G,
                           program1=(res.summary(),),
                           info={"design_set": "eigen (randomized dominant subspace)",
                                 "reduction": "principal", "fraction": fraction,
                                 "principal": k, "subspace_seconds": subspace_seconds})


def separation_partial(G: np.ndarray | Matrix, fraction: float = 0.25,
                       group_size: int | None = None, *, complete: bool = True, seed: int = 0,
                       power_iterations: int = 2, progress: Progress | None = None
                       ) -> WeightedDesign:
    """Eigen-separation without the full eigendecomposition (L2 only).

    The top ``round(fraction * n)`` eigen-queries come from :func:`dominant_subspace` (an
    iterative eigensolver on G's products: O(n) per column for a :class:`GramOperator` of 1-D
    blocks, O(n k**2) for the orthonormalisation and Rayleigh-Ritz). They are cut into groups
    of ``group_size`` (default ~ n**(1/3)) and weighted by separation (spec 7.2, steps 1-2);
    the directions that were not computed, ``I - Q^T Q`` (including any null space of G),
    enter stage 2 as one more super design query whose members share one weight, with cost
    ``tr G - sum c_i`` and constraint row ``1 - sum_i Q_i**2``. As in
    :func:`principal_vectors_partial` the error is exact for any orthonormal Q
    (``c_i = (Q G Q^T)_ii``), and the completion is evaluated exactly by Woodbury.

    Accuracy is set by ``fraction``: the shared weight is the only approximation of the tail
    of the spectrum, and on all ranges (n = 2048) 15 / 20 / 25 % of the eigen-queries give
    +2.8 / +1.7 / +1.1 % over the full algorithm (root scale).
    """
    start = time.perf_counter()
    n = G.shape[0]
    k = principal_count(n, fraction)
    g = default_group_size(n) if not group_size else int(group_size)
    Q, ritz = dominant_subspace(G, k, power_iterations=power_iterations, seed=seed)
    report(progress, 0, float(ritz.sum()), "dominant subspace")
    costs = np.maximum(np.einsum("ji,ij->i", gram_product(G, Q.T), Q), 0.0)
    # Rayleigh-Ritz leaves the costs in the descending order the groups are cut in
    order = np.argsort(costs)[::-1]
    Q, costs = np.ascontiguousarray(Q[order]), costs[order]
    rest_cost = max(float(gram_diagonal(G).sum()) - float(costs.sum()), 0.0)
    Bq = Q * Q
    rest_row = np.maximum(1.0 - Bq.sum(axis=0), 0.0)
    subspace_seconds = time.perf_counter() - start
    has_rest = rest_cost > 0.0 and bool(rest_row.any())
    x, rest_x, summaries = separation_weights(
        costs, Bq, g, 1.0, progress,
        rest=(rest_cost, rest_row) if has_rest else None)
    return weighted_design(Q, costs, x, 2, complete=complete,
                           rest=None if rest_x is None else (rest_cost, rest_x), G=G,
                           program1=tuple(summaries),
                           info={"design_set": "eigen (randomized dominant subspace)",
                                 "reduction": "separation", "group_size": g,
                                 "fraction": fraction, "eigenqueries_computed": k,
                                 "subspace_seconds": subspace_seconds})
