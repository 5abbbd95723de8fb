"""Conditional ResidualPlanner (CRP): per-round noise allocation over the residuals of a marginal.

When marginal ``gamma`` is measured with round budget ``rho_round = 1/(2 sigma2_t)``, CRP picks a
noise variance per residual ``tau subset gamma`` that minimises the per-cell variance of the
updated estimate of ``gamma`` given the precisions ``lambda_tau`` already pooled (spec
aim_grem.md 4.2). In the stabilised parametrisation ``x_tau = sigma2_t / sigma2_tau`` and
``a_tau = lambda_tau sigma2_t`` the problem is::

    minimise  sum_tau v_tau / (x_tau + a_tau)   subject to  sum_tau p_tau x_tau <= 1,  x >= 0

The relaxed (x unconstrained) optimum is closed form, ``x = (1 + Q) r - a`` with
``r_tau = sqrt(v_tau / p_tau) = prod_{k in gamma \\ tau} 1/n_k`` and ``Q = sum p a`` (the
normaliser ``S = sum sqrt(p v)`` is exactly 1). When it has negative entries the exact
constrained optimum is found by water-filling on the KKT conditions
``x_tau = max(0, c r_tau - a_tau)``; a CVXPY/Clarabel solver is available as a cross-check.
Residuals with ``p_tau x_tau < eta`` are skipped; the round is still charged in full.

Example (spec R12 (a): no prior information gives the IID allocation):
    >>> alloc = crp((0, 1), {}, 25.0, (4, 3))
    >>> [round(s, 6) for s in alloc.sigma2]
    [300.0, 75.0, 100.0, 25.0]
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from engine.linalg.residuals import AttrSet, privacy_factor, subsets, variance_factor

#: Skip threshold on a residual's share ``p_tau x_tau`` of the round (the paper's eta).
ETA = 1e-3
SOLVERS = ("water-filling", "cvxpy")


@dataclass(frozen=True)
class Allocation:
    """Noise per residual of one measured marginal.

    Attributes:
        gamma: the measured marginal's attribute set.
        taus: its residuals, smallest first.
        x: share parameters ``sigma2_t / sigma2_tau`` (0 = not measured).
        sigma2: per-residual noise variance (counts squared); ``inf`` for skipped residuals.
        p: privacy factors ``p_tau``.
        v: variance factors ``v_tau`` with respect to gamma.
        a: prior precisions in units of the round, ``lambda_tau sigma2_t``.
        sigma2_t: the round's marginal-equivalent noise variance.
        method: ``"closed-form"``, ``"water-filling"``, ``"cvxpy"`` or ``"iid"``.
    """

    gamma: AttrSet
    taus: tuple[AttrSet, ...]
    x: np.ndarray
    sigma2: tuple[float, ...]
    p: np.ndarray
    v: np.ndarray
    a: np.ndarray
    sigma2_t: float
    method: str

    def measured(self) -> list[tuple[AttrSet, float]]:
        """``(tau, sigma2_tau)`` of the residuals that are measured this round."""
        return [(t, s) for t, s in zip(self.taus, self.sigma2, strict=True) if math.isfinite(s)]

    @property
    def skipped(self) -> tuple[AttrSet, ...]:
        """Residuals not measured this round (budget share below the threshold)."""
        return tuple(t for t, s in zip(self.taus, self.sigma2, strict=True)
                     if not math.isfinite(s))

    def spent(self) -> float:
        """zCDP cost of the residuals actually measured, ``sum p_tau / (2 sigma2_tau)``
        (at most the round budget ``1/(2 sigma2_t)``; the round is charged in full anyway)."""
        return math.fsum(p / (2.0 * s) for p, s in zip(self.p, self.sigma2, strict=True)
                         if math.isfinite(s))

    def cell_variance(self) -> float:
        """Per-cell variance of the estimate of gamma after pooling the measured residuals
        (``sum v_tau / (lambda_tau + 1/sigma2_tau)``, counts squared; inf if some residual of
        gamma stays unknown)."""
        x = np.array([xi if math.isfinite(s) else 0.0
                      for xi, s in zip(self.x, self.sigma2, strict=True)])
        precision = (x + self.a) / self.sigma2_t
        if np.any(precision <= 0):
            return math.inf
        return float(np.sum(self.v / precision))


def problem(gamma: AttrSet, lam: Mapping[AttrSet, float], sigma2_t: float,
            shape: Sequence[int]) -> tuple[tuple[AttrSet, ...], np.ndarray, np.ndarray,
                                           np.ndarray, np.ndarray]:
    """The CRP data for measuring ``gamma`` at marginal-equivalent variance ``sigma2_t``.

    Returns:
        ``(taus, p, v, r, a)`` with ``r_tau = prod_{k in gamma \\ tau} 1/n_k`` computed exactly
        (``v`` underflows for large domains, ``r`` does not).
    """
    taus = tuple(subsets(gamma))
    p = np.array([privacy_factor(t, shape) for t in taus])
    v = np.array([variance_factor(t, gamma, shape) for t in taus])
    r = np.array([math.prod(1.0 / shape[k] for k in gamma if k not in t) for t in taus])
    a = np.array([lam.get(t, 0.0) * sigma2_t for t in taus])
    return taus, p, v, r, a


def relaxed_solution(p: np.ndarray, r: np.ndarray, a: np.ndarray) -> np.ndarray:
    """Closed-form optimum without ``x >= 0`` (spec Thm. D.1 with S = 1)."""
    q = float(np.dot(p, a))
    s = float(np.dot(p, r))  # = sum sqrt(p v) = 1 up to rounding
    return (1.0 + q) / s * r - a


def water_fill(p: np.ndarray, r: np.ndarray, a: np.ndarray) -> np.ndarray:
    """Exact optimum of the constrained problem by water-filling on the KKT conditions.

    ``x_tau(c) = max(0, c r_tau - a_tau)``; ``sum p x(c)`` increases in ``c``, so the active
    set is a prefix of the residuals sorted by breakpoint ``a_tau / r_tau`` and
    ``c = (1 + sum_active p a) / (sum_active p r)``.
    """
    breaks = a / r
    order = np.argsort(breaks, kind="stable")
    pa = np.cumsum((p * a)[order])
    pr = np.cumsum((p * r)[order])
    c = math.inf
    for k in range(len(order)):
        c = (1.0 + pa[k]) / pr[k]
        nxt = breaks[order[k + 1]] if k + 1 < len(order) else math.inf
        if c <= nxt:
            break
    return np.maximum(0.0, c * r - a)


def cvxpy_solution(p: np.ndarray, v: np.ndarray, a: np.ndarray,
                   x0: np.ndarray | None = None) -> np.ndarray:
    """The constrained optimum by CVXPY with Clarabel (tolerance 1e-8), as the paper does.

    ``v`` is rescaled to max 1 first (the optimum does not depend on a common factor and tiny
    ``v`` values would otherwise sit below the solver's tolerances).
    """
    import cvxpy as cp  # lazily: only this cross-check needs it

    scale = v / v.max()
    x = cp.Variable(len(p), nonneg=True)
    if x0 is not None:
        x.value = np.maximum(x0, 0.0)
    objective = cp.Minimize(cp.sum(cp.multiply(scale, cp.inv_pos(x + a))))
    cp.Problem(objective, [p @ x <= 1]).solve(
        solver=cp.CLARABEL, tol_gap_abs=1e-8, tol_gap_rel=1e-8, tol_feas=1e-8)
    return np.maximum(np.asarray(x.value, dtype=float), 0.0)


def crp(gamma: AttrSet, lam: Mapping[AttrSet, float], sigma2_t: float,
        shape: Sequence[int], eta: float = ETA, solver: str = "water-filling") -> Allocation:
    """Allocate the round budget ``1/(2 sigma2_t)`` over the residuals of ``gamma``.

    Args:
        gamma: the marginal measured this round (sorted axis tuple).
        lam: current pooled precisions ``lambda_tau`` (missing = 0).
        sigma2_t: the round's marginal-equivalent noise variance (counts squared).
        shape: sizes of every attribute of the domain.
        eta: skip residuals whose budget share ``p_tau x_tau`` is below this.
        solver: for an infeasible closed form, ``"water-filling"`` (exact) or ``"cvxpy"``.

    Returns:
        The allocation (skipped residuals have ``sigma2 = inf``).
    """
    if solver not in SOLVERS:
        raise ValueError(f"crp.solver: unknown {solver!r}; allowed: {', '.join(SOLVERS)}")
    taus, p, v, r, a = problem(gamma, lam, sigma2_t, shape)
    x = relaxed_solution(p, r, a)
    method = "closed-form"
    if np.any(x < 0):
        method = solver
        x = water_fill(p, r, a) if solver == "water-filling" else cvxpy_solution(p, v, a, x)
    sigma2 = tuple(float(sigma2_t / xi) if (xi > 0 and pi * xi >= eta) else math.inf
                   for xi, pi in zip(x, p, strict=True))
    return Allocation(tuple(gamma), taus, x, sigma2, p, v, a, float(sigma2_t), method)


def iid(gamma: AttrSet, lam: Mapping[AttrSet, float], sigma2_t: float,
        shape: Sequence[int]) -> Allocation:
    """The isotropic allocation: measure the whole marginal with i.i.d. ``N(0, sigma2_t)``
    noise, i.e. ``sigma2_tau = sigma2_t prod_{k in gamma \\ tau} n_k`` for every residual."""
    taus, p, v, r, a = problem(gamma, lam, sigma2_t, shape)
    sigma2 = tuple(float(sigma2_t / ri) for ri in r)
    return Allocation(tuple(gamma), taus, r.copy(), sigma2, p, v, a, float(sigma2_t), "iid")
