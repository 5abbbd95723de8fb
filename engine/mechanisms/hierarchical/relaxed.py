"""M_H^R: Model 1 relaxed to a continuous QP, then each value rounded on its own.

The QP keeps consistency, non-negativity and the root sum but drops integrality (spec §3.1):
the variables are the leaf counts ``X`` (leaves x buckets), every level is an aggregation of
them, and the objective is ``sum_l w_l ||H_l X - c~_l||**2``. It is solved with cvxpy (the
paper used Gurobi). Rounding each value separately breaks consistency (spec R11); the
violations are counted and reported, never repaired: that is the point of the comparison.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from engine.errors import NotApplicable, SpecError
from engine.mechanisms.hierarchical.model import RegionTree

ROUNDINGS = ("half-up", "half-even")
#: decimals kept from the QP solution before rounding (interior-point accuracy is ~1e-8)
SNAP_DECIMALS = 6


@dataclass(frozen=True)
class RelaxedResult:
    """The continuous optimum, its rounding and the solver's facts.

    Attributes:
        continuous: per level, the QP solution (consistent, non-negative reals).
        levels: per level, each value rounded separately (may be inconsistent).
        objective: the QP objective at the continuous solution.
        sum_multiplier: the KKT multiplier of the root-sum constraint: the rate at which
            the optimal objective grows with n.
        solver: the cvxpy solver used.
        seconds: wall-clock time.
    """

    continuous: tuple[np.ndarray, ...]
    levels: tuple[np.ndarray, ...]
    objective: float
    sum_multiplier: float
    solver: str
    seconds: float


def aggregation_matrix(tree: RegionTree, level: int) -> sp.csr_matrix:
    """``H_l``: the ``(|R_l|, leaves)`` 0/1 matrix summing leaves into level-l regions."""
    anc = tree.leaf_ancestors(level)
    return sp.csr_matrix((np.ones(tree.num_leaves), (anc, np.arange(tree.num_leaves))),
                         shape=(tree.level_sizes[level], tree.num_leaves))


def round_values(x: np.ndarray, rule: str = "half-up") -> np.ndarray:
    """Round every value on its own: ``half-up`` (floor(x + 1/2)) or ``half-even``."""
    if rule == "half-up":
        return np.floor(np.asarray(x, dtype=float) + 0.5).astype(np.int64)
    if rule == "half-even":
        return np.rint(np.asarray(x, dtype=float)).astype(np.int64)
    raise SpecError(f"rounding: unknown {rule!r}; allowed: {', '.join(ROUNDINGS)}")


def relaxed_postprocess(tree: RegionTree, noisy: Sequence[np.ndarray], total: int,
                        weights: Sequence[float] | None = None, rounding: str = "half-up",
                        solver: str = "CLARABEL") -> RelaxedResult:
    """Solve the relaxed Model 1 and round.

    Args:
        tree: the region tree.
        noisy: per level, ``(regions, buckets)`` noisy values.
        total: the public n.
        weights: per-level least-squares weights (default 1).
        rounding: ``half-up`` or ``half-even``.
        solver: a cvxpy QP solver name (CLARABEL, OSQP, ...).
    """
    import cvxpy as cp  # about 2 s to import: only for the relaxed variant, not every import

    start = time.perf_counter()
    L = tree.depth
    w = np.ones(L) if weights is None else np.asarray(weights, dtype=float)
    k = np.asarray(noisy[0]).shape[1]
    X = cp.Variable((tree.num_leaves, k), nonneg=True)
    terms = []
    for lev in range(L):
        target = np.asarray(noisy[lev], dtype=float)
        expr = X if lev == L - 1 else aggregation_matrix(tree, lev) @ X
        terms.append(w[lev] * cp.sum_squares(expr - target))
    total_constraint = cp.sum(X) == total
    problem = cp.Problem(cp.Minimize(cp.sum(terms)), [total_constraint])
    try:
        problem.solve(solver=solver)
    except cp.error.SolverError as exc:
        raise NotApplicable(f"relaxed QP: solver {solver} failed: {exc}") from None
    if problem.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
        raise NotApplicable(f"relaxed QP: solver {solver} ended with status {problem.status}")
    leaf = np.maximum(np.asarray(X.value, dtype=float), 0.0)
    continuous = [leaf]
    for lev in range(L - 2, -1, -1):
        continuous.append(tree.aggregate(continuous[-1], lev))
    continuous = continuous[::-1]
    # snap to the solver's accuracy first, so that an exact tie such as 0.5 is rounded by
    # the rule and not by the solver's last digits
    levels = tuple(round_values(np.round(a, SNAP_DECIMALS), rounding) for a in continuous)
    multiplier = float(np.asarray(total_constraint.dual_value).reshape(-1)[0])
    return RelaxedResult(tuple(continuous), levels, float(problem.value), multiplier,
                         solver, time.perf_counter() - start)
