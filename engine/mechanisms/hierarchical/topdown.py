"""TopDown: the US Census 2018 end-to-end-test style baseline, level by level (spec §4).

Noisy histograms are measured at every level like M_DP. Then, from the top: the national
vector is projected onto ``{x >= 0, sum x = n}`` and rounded with largest-remainder rounding
(which keeps the sum); for every parent region and size, its children's noisy values are
projected onto ``{x >= 0, sum x = parent value}`` and rounded the same way. The output is
consistent and valid, but greedy: a level never sees the noisy data below it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from engine.errors import NotApplicable, SpecError
from engine.linalg.nonnegative import largest_remainder_rows
from engine.mechanisms.hierarchical.model import RegionTree
from engine.progress import Progress, report

#: decimals kept before largest-remainder rounding, so float or solver noise (~1e-8) cannot
#: reorder tied remainders
SNAP_DECIMALS = 6


def simplex_projection(y: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Euclidean projection of every row of ``y`` onto ``{x >= 0, sum x = target}``.

    Args:
        y: ``(rows, m)`` points.
        targets: ``(rows,)`` non-negative sums.
    """
    y = np.asarray(y, dtype=float)
    targets = np.asarray(targets, dtype=float)
    u = -np.sort(-y, axis=1)
    css = np.cumsum(u, axis=1) - targets[:, None]
    ind = np.arange(1, y.shape[1] + 1)
    cond = u - css / ind > 0
    rho = y.shape[1] - 1 - np.argmax(cond[:, ::-1], axis=1)  # last index where cond holds
    theta = css[np.arange(len(y)), rho] / (rho + 1)
    out = np.maximum(y - theta[:, None], 0.0)
    out[targets <= 0] = 0.0
    return out


def largest_remainder(x: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Round rows of non-negative reals to integers with the given row sums.

    Floors every value, then gives the missing units to the largest remainders (ties to the
    lower index).
    """
    return largest_remainder_rows(np.round(np.asarray(x, dtype=float), SNAP_DECIMALS), targets)


@dataclass(frozen=True)
class TopDownResult:
    """TopDown output: per-level integer counts and the time taken."""

    levels: tuple[np.ndarray, ...]
    seconds: float


def qp_projection(y: np.ndarray, targets: np.ndarray, solver: str = "CLARABEL") -> np.ndarray:
    """:func:`simplex_projection` solved as one QP per parent with cvxpy.

    This is how the Census TopDown (and the paper's baseline) solves each parent's L2
    program. The solver's answer is polished with its own active set (the KKT conditions
    give ``x = max(y - theta, 0)`` with theta fixed by the positive entries), so that ties
    in the later rounding are decided as in the closed form and not by solver noise.
    """
    import cvxpy as cp

    y = np.asarray(y, dtype=float)
    X = cp.Variable(y.shape, nonneg=True)
    problem = cp.Problem(cp.Minimize(cp.sum_squares(X - y)),
                         [cp.sum(X, axis=1) == np.asarray(targets, dtype=float)])
    problem.solve(solver=solver)
    if problem.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
        raise NotApplicable(f"TopDown QP: solver {solver} ended with status {problem.status}")
    x = np.asarray(X.value, dtype=float)
    active = x > 1e-6 * np.maximum(1.0, np.abs(y).max(axis=1, keepdims=True))
    count = np.maximum(active.sum(axis=1), 1)
    theta = (np.where(active, y, 0.0).sum(axis=1) - targets) / count
    out = np.where(active, np.maximum(y - theta[:, None], 0.0), 0.0)
    out[np.asarray(targets) <= 0] = 0.0
    return out


PROJECTIONS = ("closed-form", "qp")


def topdown_postprocess(tree: RegionTree, noisy: Sequence[np.ndarray], total: int,
                        progress: Progress | None = None, projection: str = "closed-form"
                        ) -> TopDownResult:
    """Run TopDown on noisy per-level histograms.

    Args:
        tree: the region tree.
        noisy: per level, ``(regions, buckets)`` noisy values.
        total: the public n.
        progress: one report per parent region; cancellable.
        projection: ``closed-form`` (sort-based simplex projection) or ``qp`` (one cvxpy
            QP per parent, like the Census implementation); same result.
    """
    if projection not in PROJECTIONS:
        raise SpecError(f"projection: unknown {projection!r}; allowed: "
                        f"{', '.join(PROJECTIONS)}")
    project = simplex_projection if projection == "closed-form" else qp_projection
    start = time.perf_counter()
    root = np.asarray(noisy[0], dtype=float)
    x = project(root, np.array([float(total)]))
    levels = [largest_remainder(x, np.array([total]))]
    step = 0
    for lev in range(tree.depth - 1):
        child_noisy = np.asarray(noisy[lev + 1], dtype=float)
        out = np.empty(child_noisy.shape, dtype=np.int64)
        for p in range(tree.level_sizes[lev]):
            span = tree.children(lev, p)
            rows = child_noisy[span.start:span.stop].T  # (sizes, children)
            target = levels[lev][p]
            proj = project(rows, target.astype(float))
            out[span.start:span.stop] = largest_remainder(proj, target).T
            step += 1
            report(progress, step, 0.0, f"TopDown level {lev + 2}")
        levels.append(out)
    return TopDownResult(tuple(levels), time.perf_counter() - start)
