"""Noise allocation: how one privacy-cost budget is split over independent Gaussian measurements.

Measurement i has privacy factor ``p_i`` and noise variance ``tau2_i``; it costs
``p_i / tau2_i``, and the costs add (zCDP composition; cost beta is rho = beta / 2). Two
objectives:

* ``sum_allocation``: minimise a weighted sum of variances ``sum v_i tau2_i`` -- closed form;
* ``max_allocation``: minimise the largest of several linear variance profiles ``A tau2``
  -- a convex program.

ResidualPlanner (one measurement per residual, ``v`` the traces of the residual sub-workloads)
and the batch ResidualPlanner baseline of AIM+GReM use these.

Example (Cauchy-Schwarz: the costs spend exactly beta):
    >>> tau2, total = sum_allocation([1.0, 4.0], [1.0, 1.0])
    >>> tau2.tolist(), total
    ([3.0, 1.5], 9.0)
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np

from engine.errors import NotApplicable


def sum_allocation(v: Sequence[float], p: Sequence[float], beta: float = 1.0
                   ) -> tuple[np.ndarray, float]:
    """Minimise ``sum v tau2`` subject to ``sum p / tau2 = beta`` (Cauchy-Schwarz).

    Args:
        v: weight of each measurement's variance in the objective (positive).
        p: privacy factor of each measurement (positive).
        beta: total privacy cost (zCDP rho = beta / 2).

    Returns:
        ``(tau2, total)`` with ``tau2 = sqrt(p/v) sum sqrt(v p) / beta`` and the optimal
        weighted sum of variances ``total = (sum sqrt(v p))**2 / beta``.
    """
    v, p = np.asarray(v, dtype=float), np.asarray(p, dtype=float)
    s = float(np.sqrt(v * p).sum())
    return np.sqrt(p / v) * s / beta, s**2 / beta


def max_allocation(p: np.ndarray, A: np.ndarray, beta: float = 1.0
                   ) -> tuple[np.ndarray, float]:
    """Minimise the privacy cost ``sum p / s`` subject to ``A s <= 1``, then rescale to beta.

    Args:
        p: privacy factor of each measurement.
        A: one row per variance profile (for ResidualPlanner: one query's
            ``w_q ||q_{=>A'}||^2`` per residual), one column per measurement.
        beta: target privacy cost.

    Returns:
        ``(tau2, max_variance)``: the noise variances at cost beta and the resulting maximum
        profile variance ``P* / beta`` (P* the optimal cost at variance bound 1).

    Raises:
        NotApplicable: when no solver reaches an optimal solution.
    """
    # cvxpy takes about 2 s to import: loaded on the first max-variance allocation, not with
    # every import of the engine
    import cvxpy as cp

    # Scale each variable so that its largest coefficient is 1: the raw coefficients span
    # many orders of magnitude (1/d**2 per marginalised attribute).
    scale = 1.0 / A.max(axis=0)
    s = cp.Variable(len(p), pos=True)
    objective = cp.Minimize(cp.sum(cp.multiply(p / scale, cp.inv_pos(s))))
    problem = cp.Problem(objective, [(A * scale) @ s <= 1.0])
    # Tight tolerances first (the defaults leave ~1e-5 relative error in the variances);
    # looser ones and SCS only if the solver reports an inaccurate solution.
    attempts = [(cp.CLARABEL, {"tol_gap_abs": 1e-10, "tol_gap_rel": 1e-10, "tol_feas": 1e-10}),
                (cp.CLARABEL, {}), (cp.SCS, {"eps": 1e-9, "max_iters": 200_000})]
    for solver, settings in attempts:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Solution may be inaccurate")
            try:
                problem.solve(solver=solver, **settings)
            except cp.SolverError:
                continue
        if problem.status == cp.OPTIMAL and s.value is not None:
            break
    else:
        raise NotApplicable(f"max-variance noise allocation: the convex program failed "
                            f"({problem.status})")
    raw = np.asarray(s.value) * scale
    # rescale so the privacy cost is exactly beta; report the variance bound actually met
    tau2 = raw * float((p / raw).sum()) / beta
    return tau2, float((A @ tau2).max())
