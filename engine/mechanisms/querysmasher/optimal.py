"""The optimal low-dimensional matrix mechanism (spec 3.3): Eq. 4 with a certificate.

Solves ``OPT(G) = min { tr(G V^+) : V PSD, diag(V) <= 1, range(V) contains range(G) }`` for an
explicit PSD Gram ``G`` (c x c). Residual Grams are always singular (every sub-query sums to
zero along each axis), and the optimum can be singular too (the centred prefix workload, spec
R6): a unit-diagonal parametrisation as in HDMM / RP+ (``V = X`` with ``diag X = 1``, L-BFGS)
cannot represent it and stalls. This module works on the dual instead::

    OPT(G) = max_{lambda >= 0, sum(lambda) = 1}  tr( (A^T diag(lambda) A)^{1/2} )^2,  G = A A^T

Given lambda, ``K = A^T diag(lambda) A = Q diag(e) Q^T`` gives the lower bound ``(sum sqrt e)^2``
and the feasible primal point ``V = A K^{-1/2} A^T / max_i d_i`` (``d = diag(A K^{-1/2} A^T)``)
with value ``sum(sqrt e) * max(d)``; the relative gap between the two certifies the answer.

Two phases: the multiplicative fixed point ``lambda <- lambda * (d / sum sqrt e)**rho`` (cheap,
fast at first, but only sublinear when optimal weights vanish), then projected Newton steps on
the dual (exact Hessian of the concave dual on the current support) when the Hessian fits in
memory. Either way the returned strategy is the best feasible primal point seen and ``lower``
the best dual bound, so ``(loss - lower) / loss`` is a certificate, not an estimate.

Example (spec R6, the centred prefix workload on 8 cells):
    >>> import numpy as np
    >>> n = 8
    >>> C = np.eye(n) - 1.0 / n
    >>> P = np.tril(np.ones((n, n)))
    >>> round(solve_optimal(C @ P.T @ P @ C).loss, 8)
    6.76607344
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla

from engine.progress import Progress, report

#: Relative eigenvalue below which a direction of G counts as outside its range.
RANGE_RCOND = 1e-12
#: Largest Newton step, in multiply-adds for the Hessian (support**2 * r(r+1)/2): Newton
#: is postponed while the support estimate is larger (it shrinks as the fixed point runs).
NEWTON_FLOPS = 3e9
#: Weights below this multiple of the uniform weight 1/c are dropped when Newton starts.
SUPPORT_CUTOFF = 1e-4
#: Newton starts once the gap is below this or after this many multiplicative iterations.
NEWTON_GAP, NEWTON_AFTER = 1e-3, 100
#: Multiplicative iterations taken after a failed or unaffordable Newton step.
MULTIPLICATIVE_BURST = 10
#: Stop (with the certified gap reached so far) after this many steps without progress:
#: ill-conditioned optima stall at a gap of ~1e-9 in floating point.
STALL_STEPS = 60
#: Exponent of the multiplicative update (1 is the classical fixed point; 1.5 is faster).
RHO = 1.5


@dataclass(frozen=True)
class OptimalSolution:
    """A certified solution of Eq. 4.

    Attributes:
        basis: strategy rows B (r x c) with ``V = B^T B`` and ``max diag V = 1``; rows lie in
            range(G).
        basis_pinv: ``B^+`` (c x r).
        vdag: ``V^+`` (c x c); the unit-cost variance of a query q is ``q V^+ q^T``.
        loss: ``tr(G V^+)`` of the returned strategy (an upper bound on OPT(G)).
        lower: a dual lower bound on OPT(G).
        iterations: multiplicative iterations used.
        newton_steps: Newton steps used.
    """

    basis: np.ndarray
    basis_pinv: np.ndarray
    vdag: np.ndarray
    loss: float
    lower: float
    iterations: int
    newton_steps: int

    @property
    def gap(self) -> float:
        """Certified relative optimality gap ``(loss - lower) / loss``."""
        return (self.loss - self.lower) / self.loss if self.loss > 0 else 0.0


class _Dual:
    """Evaluates the dual at lambda for ``G = A A^T`` (A = U sqrt(w), orthogonal columns)."""

    def __init__(self, U: np.ndarray, w: np.ndarray) -> None:
        self.U, self.w = U, w
        self.A = U * np.sqrt(w)

    def evaluate(self, lam: np.ndarray) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
        """``(sum sqrt e, d, e, Q)`` at lambda."""
        K = (self.A.T * lam) @ self.A
        e, Q = sla.eigh((K + K.T) / 2.0, driver="evd")
        e = np.maximum(e, 1e-300)
        Bu = self.A @ (Q * e**-0.25)
        d = np.einsum("ij,ij->i", Bu, Bu)
        return float(np.sqrt(e).sum()), d, e, Q

    def hessian(self, support: np.ndarray, e: np.ndarray, Q: np.ndarray) -> np.ndarray:
        """Hessian of ``tr(K^{1/2})`` in lambda, restricted to ``support`` (negative
        semi-definite): ``H_ij = 1/2 sum_kl Gamma_kl b_ik b_il b_jk b_jl`` with ``b_i = Q^T a_i``
        and ``Gamma`` the divided differences of ``x^{-1/2}`` at the eigenvalues."""
        B = self.A[support] @ Q
        s = np.sqrt(e)
        gamma = -1.0 / (s[:, None] * s[None, :] * (s[:, None] + s[None, :]))
        row, col = np.triu_indices(len(e))
        weight = np.where(row == col, gamma[row, col], 2.0 * gamma[row, col])
        Z = B[:, row] * B[:, col]
        return 0.5 * (Z * weight) @ Z.T


def solve_optimal(G: np.ndarray, tol: float = 1e-10, max_iter: int = 20_000,
                  progress: Progress | None = None, label: str = "") -> OptimalSolution:
    """Certified optimum of Eq. 4 for an explicit PSD Gram ``G``.

    Args:
        G: the sub-workload Gram ``W^T D W`` (c x c, symmetric PSD, not all zero).
        tol: stop when the certified relative gap is below this.
        max_iter: cap on multiplicative iterations plus Newton steps.
        progress: receives ``(iteration, current loss, label)`` every few iterations; its
            cancel() stops the solve with ``Cancelled``.
        label: message passed to progress.

    Returns:
        The best feasible strategy found, its loss and the dual lower bound.
    """
    G = np.asarray(G, dtype=float)
    G = (G + G.T) / 2.0
    scale = float(np.trace(G))
    if not scale > 0:
        raise ValueError("solve_optimal: the Gram matrix is zero")
    w, U = np.linalg.eigh(G / scale)
    keep = w > RANGE_RCOND * w.max()
    dual = _Dual(U[:, keep], w[keep])
    c, r = dual.A.shape
    lam = np.full(c, 1.0 / c)
    best_ub, best_lb = math.inf, 0.0
    best: tuple[np.ndarray, np.ndarray, float] | None = None
    iterations = newton_steps = 0

    def record(trm: float, d: np.ndarray, e: np.ndarray, Q: np.ndarray) -> float:
        nonlocal best_ub, best_lb, best
        best_lb = max(best_lb, trm**2)
        ub = trm * float(d.max())
        if ub < best_ub:
            best_ub, best = ub, (e, Q, float(d.max()))
        return (best_ub - best_lb) / best_ub

    trm, d, e, Q = dual.evaluate(lam)
    gap = record(trm, d, e, Q)
    stalled = 0
    while gap > tol and iterations + newton_steps < max_iter and stalled < STALL_STEPS:
        previous = best_ub - best_lb
        new = None
        if gap < NEWTON_GAP or iterations >= NEWTON_AFTER:
            support = _support(lam, d, trm, gap)
            if len(support) ** 2 * r * (r + 1) / 2 <= NEWTON_FLOPS:
                new = _newton_step(dual, lam, support, trm, d, e, Q)
        if new is not None:
            lam = new
            newton_steps += 1
            trm, d, e, Q = dual.evaluate(lam)
            gap = record(trm, d, e, Q)
        else:
            for _ in range(MULTIPLICATIVE_BURST if iterations >= NEWTON_AFTER else 1):
                lam = lam * (d / trm) ** RHO
                lam /= lam.sum()
                iterations += 1
                trm, d, e, Q = dual.evaluate(lam)
                gap = record(trm, d, e, Q)
                if gap <= tol:
                    break
        stalled = stalled + 1 if best_ub - best_lb >= previous * (1.0 - 1e-3) else 0
        report(progress, iterations + newton_steps, best_ub * scale, label)
    assert best is not None
    e, Q, dmax = best
    # B = e^{-1/4} Q^T A^T / sqrt(dmax) and its pseudo-inverse U w^{-1/2} Q e^{1/4} sqrt(dmax)
    basis = ((dual.A @ (Q * e**-0.25)) / math.sqrt(dmax)).T
    pinv_half = (dual.U / np.sqrt(dual.w)) @ (Q * e**0.25)
    # V does not depend on the scale of G; only the loss does.
    return OptimalSolution(basis=basis, basis_pinv=pinv_half * math.sqrt(dmax),
                           vdag=dmax * (pinv_half @ pinv_half.T), loss=best_ub * scale,
                           lower=best_lb * scale, iterations=iterations,
                           newton_steps=newton_steps)


def _support(lam: np.ndarray, d: np.ndarray, trm: float, gap: float) -> np.ndarray:
    """Coordinates that still carry weight or are nearly active: at the optimum
    ``d_i = sum sqrt e`` wherever ``lambda_i > 0`` (and ``d_i <= sum sqrt e`` elsewhere)."""
    slack = min(1e-2, max(10.0 * gap, 1e-9))
    return np.flatnonzero((lam * len(lam) > SUPPORT_CUTOFF) | (d >= trm * (1.0 - slack)))


def _newton_step(dual: _Dual, lam: np.ndarray, support: np.ndarray, trm: float,
                 d: np.ndarray, e: np.ndarray, Q: np.ndarray) -> np.ndarray | None:
    """One projected Newton step on the dual restricted to ``support`` (the negligible weights
    elsewhere are dropped), or None when it neither increases the dual value nor, keeping it
    (to rounding), reduces the current primal-dual gap ``max(d) / sum(sqrt e) - 1`` (near the
    optimum the dual value is too flat to judge progress in floating point, the gap is not)."""
    M = -dual.hessian(support, e, Q)  # PSD, often singular: add a tiny ridge
    M[np.diag_indices_from(M)] += 1e-12 * float(np.diag(M).max(initial=1.0)) + 1e-300
    g = d[support] / 2.0  # gradient of tr(K^{1/2}) in lambda
    # maximise g.D - D.M.D / 2 subject to sum(D) = 0: D = M^-1 (g - nu 1)
    try:
        factor = sla.cho_factor(M, lower=True, check_finite=False)
    except np.linalg.LinAlgError:
        return None
    Mg = sla.cho_solve(factor, g, check_finite=False)
    M1 = sla.cho_solve(factor, np.ones_like(g), check_finite=False)
    step = Mg - (Mg.sum() / M1.sum()) * M1
    base = np.zeros_like(lam)
    base[support] = lam[support]
    base /= base.sum()
    merit = float(d.max()) / trm - 1.0
    t = 1.0
    while t > 1e-6:
        new = base.copy()
        new[support] += t * step
        new = np.maximum(new, 0.0)
        new /= new.sum()
        trm_new, d_new, _, _ = dual.evaluate(new)
        if trm_new > trm * (1.0 + 1e-13) or (trm_new > trm * (1.0 - 1e-12) and
                                               float(d_new.max()) / trm_new - 1.0 < merit):
            return new
        t /= 4.0
    return None
