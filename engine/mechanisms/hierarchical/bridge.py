"""The hierarchical workload for the matrix-mechanism tools, and the privacy-unit trap.

Data vector: the 2-D domain (size bucket x leaf region), ``x[(i, leaf)] = c^leaf_i``, size
slowest (C order). The PGSR queries (one per size and region) are the Kronecker product

    W = I_k (x) H_T,    H_T = the (|R| x leaves) 0/1 matrix of leaf descendants,

so HDMM's Kronecker optimiser and eigen-design apply directly (spec §7); planning them on
these queries is a comparison across families and lives above them
(:func:`engine.workflows.census_comparison.matrix_mechanism_rmse`).

**Privacy unit.** The matrix mechanisms' usual sensitivity (max column norm) is the
*group* unit: adding or removing a whole group changes one cell of x by 1 (and changes n,
which PGSR treats as public). PGSR's unit is the *individual*: adding one moves a group to
the adjacent size, ``dx = e_(i+1, leaf) - e_(i, leaf)``, so the sensitivity of ``A x`` is
``max ||A dx||_1``. In cumulative coordinates ``y = (P_k (x) I) x`` one individual changes
exactly one cell of y by 1, and the workload becomes ``W_y = P_k^-1 (x) H_T``: a strategy
planned for ``W_y`` with the ordinary sensitivity is private under the individual unit and
directly comparable with PGSR. Every function here says which unit it uses.

Example (spec R2 and R15 on the running example):
    >>> from engine.mechanisms.hierarchical.synthetic import running_example
    >>> h = running_example()
    >>> W = hierarchical_workload(h.tree, h.sizes)
    >>> individual_sensitivity(W.matrix, h.sizes.k), W.sensitivity(1)
    (4.0, 2.0)
    >>> round(linear_reference(h.tree, h.sizes, 1.0)["rmse"], 3)
    4.607
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from engine.domain import Attribute, Domain
from engine.errors import SpecError
from engine.linalg.matrix import DENSE_GUARD, Kron, Matrix
from engine.mechanisms.hierarchical.level_noise import noise_variance
from engine.mechanisms.hierarchical.model import Hierarchy, RegionTree, SizeSet
from engine.workloads.blocks import IdentityBlock, MatrixBlock
from engine.workloads.workload import Workload

COORDINATES = ("counts", "cumulative")


def tree_matrix(tree: RegionTree) -> np.ndarray:
    """``H_T``: row per region (levels top-down, stored order), column per leaf."""
    rows = []
    for lev in range(tree.depth):
        anc = tree.leaf_ancestors(lev)
        block = np.zeros((tree.level_sizes[lev], tree.num_leaves))
        block[anc, np.arange(tree.num_leaves)] = 1.0
        rows.append(block)
    return np.vstack(rows)


def prefix_matrix(k: int) -> np.ndarray:
    """``P_k``: lower-triangular ones (cumulative sums over sizes)."""
    return np.tril(np.ones((k, k)))


def difference_matrix(k: int) -> np.ndarray:
    """``P_k^-1``: 1 on the diagonal, -1 below it (sizes from cumulative counts)."""
    return np.eye(k) - np.eye(k, k=-1)


def hierarchy_domain(tree: RegionTree, sizes: SizeSet) -> Domain:
    """The (size bucket, leaf region) domain of the data vector."""
    leaves = [tree.label(tree.depth - 1, j) for j in range(tree.num_leaves)]
    return Domain((Attribute("size", sizes.k, "numeric", tuple(sizes.labels)),
                   Attribute("region", tree.num_leaves, "categorical", tuple(leaves))))


def hierarchical_workload(tree: RegionTree, sizes: SizeSet, coordinates: str = "counts"
                          ) -> Workload:
    """``I_k (x) H_T`` over counts, or ``P_k^-1 (x) H_T`` over cumulative counts."""
    if coordinates not in COORDINATES:
        raise SpecError(f"coordinates: unknown {coordinates!r}; allowed: "
                        f"{', '.join(COORDINATES)}")
    k = sizes.k
    size_block = IdentityBlock(k) if coordinates == "counts" else MatrixBlock(
        difference_matrix(k))
    return Workload.product(hierarchy_domain(tree, sizes),
                            {"size": size_block, "region": MatrixBlock(tree_matrix(tree))})


def data_vector(hierarchy: Hierarchy, coordinates: str = "counts") -> np.ndarray:
    """x (counts) or y = (P_k (x) I) x (cumulative), size slowest."""
    counts = hierarchy.leaf_counts.astype(float)
    if coordinates == "cumulative":
        counts = np.cumsum(counts, axis=1)
    elif coordinates != "counts":
        raise SpecError(f"coordinates: unknown {coordinates!r}; allowed: "
                        f"{', '.join(COORDINATES)}")
    return counts.T.reshape(-1)


def individual_sensitivity(A: Matrix, k: int) -> float:
    """``max_(i, leaf) ||A (e_(i+1, leaf) - e_(i, leaf))||_1``: L1 sensitivity of ``x -> A x``
    when one individual joins or leaves a group (the group moves one size bucket).

    Args:
        A: a strategy or workload over the (size, leaf) data vector, size slowest.
        k: the number of size buckets.
    """
    if isinstance(A, Kron) and len(A.factors) == 2:
        size_part = A.factors[0].dense()
        moves = np.abs(size_part[:, 1:] - size_part[:, :-1]).sum(axis=0)
        return float(moves.max() * A.factors[1].sensitivity(1)) if moves.size else 0.0
    if A.size > DENSE_GUARD:
        raise SpecError("individual sensitivity: the strategy is too large to inspect "
                        "explicitly; give it as a Kronecker product (size x region)")
    D = A.dense()
    leaves = D.shape[1] // k
    cols = D.reshape(D.shape[0], k, leaves)
    moves = np.abs(cols[:, 1:, :] - cols[:, :-1, :]).sum(axis=0)
    return float(moves.max()) if moves.size else 0.0


def linear_reference(tree: RegionTree, sizes: SizeSet, epsilon: float,
                     noise: str = "geometric") -> dict[str, Any]:
    """The linear (OLS/GLS) error of measuring ``A = W = I_k (x) H_T`` (spec R15).

    With a uniform split each level's histograms get scale ``2L/eps`` (individual unit);
    the least-squares estimate from ``A = W`` has ``||W A^+||_F**2 = rank(W) = k * leaves``,
    so ``RMSE = sqrt(Var ||W A^+||_F**2 / (k |R|))`` (the public total is not used here).

    Returns:
        ``fro2``, ``queries``, ``variance`` (per measured entry), ``rmse`` (least
        squares) and ``raw_rmse`` (the noisy counts themselves).
    """
    L = tree.depth
    var = float(noise_variance(noise, 2.0 * L / epsilon))
    fro2 = float(sizes.k * tree.num_leaves)  # W has full column rank: W A^+ is a projector
    m = sizes.k * tree.num_regions
    return {"fro2": fro2, "queries": m, "variance": var, "rmse": math.sqrt(var * fro2 / m),
            "raw_rmse": math.sqrt(var), "privacy_unit": "individual"}
