"""The optimal low-dimensional matrix mechanism (spec 3.3): Eq. 4 with a certificate.

Solves ``OPT(G) = min { tr(G V^+) : V PSD, diag(V) <= 1, range(V) contains range(G) }`` for a
PSD Gram ``G`` (c x c, or given as a c x k factor). Residual Grams are always singular (every
sub-query sums to zero along each axis), and the optimum can be singular too (the centred
prefix workload, spec R6): a unit-diagonal parametrisation as in HDMM / RP+ (``V = X`` with
``diag X = 1``, L-BFGS) cannot represent it and stalls. This module works on the dual::

    OPT(G) = max_{lambda >= 0, sum(lambda) = 1}  tr( (A^T diag(lambda) A)^{1/2} )^2,  G = A A^T

Given lambda, ``K = A^T diag(lambda) A = Q diag(e) Q^T`` gives the lower bound ``(sum sqrt e)^2``
and the feasible primal point ``V = A K^{-1/2} A^T / max_i d_i`` (``d = diag(A K^{-1/2} A^T)``)
with value ``sum(sqrt e) * max(d)``; the relative gap between the two certifies the answer.

Two phases: the multiplicative fixed point ``lambda <- lambda * (d / sum sqrt e)**rho`` (cheap
per step and fast at first, but only sublinear when optimal weights vanish or the optimal face
is degenerate), then a log-barrier Newton method on the dual restricted to the likely support
(exact Hessian of the concave dual; the barrier keeps the weights positive and regularises
the flat directions of degenerate optima), whenever that Hessian is affordable. Either way the
returned strategy is the best feasible primal point seen and ``lower`` the best dual bound, so
``(loss - lower) / loss`` is a certificate, not an estimate.

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
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla

from engine.progress import Progress, report

#: Relative eigenvalue below which a direction of G counts as outside its range.
RANGE_RCOND = 1e-12
#: Exponent of the multiplicative update (1 is the classical fixed point; 1.5 is faster).
RHO = 1.5
#: The Newton phase starts once the gap is below this or after this many fixed-point steps.
NEWTON_GAP, NEWTON_AFTER = 1e-3, 100
#: Budget of one Newton step: Hessian multiply-adds (support**2 * r(r+1)/2) and the entries
#: of its factor (support * r(r+1)/2); larger supports keep to the fixed point.
NEWTON_FLOPS, NEWTON_ENTRIES = 2e10, 6e7
#: Dual weights below this multiple of the uniform weight 1/c start outside the support.
SUPPORT_CUTOFF = 1e-6
#: Newton steps before giving the fixed point another go.
NEWTON_STEPS = 200
#: Fixed-point steps without a 0.1 % smaller gap after which the solver stops (returning the
#: certified gap reached).
STALL_STEPS = 500


@dataclass(frozen=True)
class OptimalSolution:
    """A certified solution of Eq. 4.

    Attributes:
        basis: strategy rows B (r x c) with ``V = B^T B`` and ``max diag V = 1``; rows lie in
            range(G).
        basis_pinv: ``B^+`` (c x r); ``V^+ = B^+ B^+T`` (see ``vdag``).
        loss: ``tr(G V^+)`` of the returned strategy (an upper bound on OPT(G)).
        lower: a dual lower bound on OPT(G).
        iterations: multiplicative iterations used.
        newton_steps: Newton steps used.
    """

    basis: np.ndarray
    basis_pinv: np.ndarray
    loss: float
    lower: float
    iterations: int
    newton_steps: int

    @property
    def vdag(self) -> np.ndarray:
        """``V^+`` (c x c); the unit-cost variance of a query q is ``q V^+ q^T``."""
        return self.basis_pinv @ self.basis_pinv.T

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


def solve_optimal(G: np.ndarray | None, tol: float = 1e-10, max_iter: int = 20_000,
                  progress: Progress | None = None, label: str = "",
                  factor: np.ndarray | None = None) -> OptimalSolution:
    """Certified optimum of Eq. 4 for a PSD Gram ``G`` (explicit, or as ``factor``).

    Args:
        G: the sub-workload Gram ``W^T D W`` (c x c, symmetric PSD, not all zero); None when
            ``factor`` is given.
        tol: stop when the certified relative gap is below this.
        max_iter: cap on multiplicative iterations plus Newton steps.
        progress: receives ``(iteration, current loss, label)`` every few iterations; its
            cancel() stops the solve with ``Cancelled``.
        label: message passed to progress.
        factor: a c x k matrix F with ``G = F F^T`` instead of G (e.g. the transposed
            sub-queries): low-rank Grams never need their c x c form (spec App. D, 1).

    Returns:
        The best feasible strategy found, its loss and the dual lower bound.
    """
    if factor is not None:
        F = np.asarray(factor, dtype=float)
        scale = float((F * F).sum())
        if not scale > 0:
            raise ValueError("solve_optimal: the Gram matrix is zero")
        U, sv, _ = np.linalg.svd(F / math.sqrt(scale), full_matrices=False)
        w = sv**2
    else:
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
    newton_tried = False
    while gap > tol and iterations + newton_steps < max_iter and stalled < STALL_STEPS:
        if not newton_tried and (gap < NEWTON_GAP or iterations >= NEWTON_AFTER):
            support = _support(lam, d, trm)
            entries = len(support) * r * (r + 1) / 2
            if entries <= NEWTON_ENTRIES and entries * len(support) <= NEWTON_FLOPS:
                newton_tried = True
                lam, steps = _barrier_newton(dual, lam, support, record, tol,
                                             min(NEWTON_STEPS, max_iter), progress, label)
                newton_steps += steps
                trm, d, e, Q = dual.evaluate(lam)
                gap = record(trm, d, e, Q)
                continue
        previous = best_ub - best_lb
        lam = lam * (d / trm) ** RHO
        lam /= lam.sum()
        iterations += 1
        trm, d, e, Q = dual.evaluate(lam)
        gap = record(trm, d, e, Q)
        stalled = stalled + 1 if best_ub - best_lb >= previous * (1.0 - 1e-3) else 0
        if iterations % 10 == 0:
            report(progress, iterations + newton_steps, best_ub * scale, label)
    assert best is not None
    e, Q, dmax = best
    # B = e^{-1/4} Q^T A^T / sqrt(dmax) and its pseudo-inverse U w^{-1/2} Q e^{1/4} sqrt(dmax)
    basis = ((dual.A @ (Q * e**-0.25)) / math.sqrt(dmax)).T
    pinv_half = (dual.U / np.sqrt(dual.w)) @ (Q * e**0.25)
    # V does not depend on the scale of G; only the loss does.
    return OptimalSolution(basis=basis, basis_pinv=pinv_half * math.sqrt(dmax),
                           loss=best_ub * scale,
                           lower=best_lb * scale, iterations=iterations,
                           newton_steps=newton_steps)


def _support(lam: np.ndarray, d: np.ndarray, trm: float) -> np.ndarray:
    """Coordinates that still carry weight or are nearly active: at the optimum
    ``d_i = sum sqrt e`` wherever ``lambda_i > 0`` (and ``d_i <= sum sqrt e`` elsewhere)."""
    return np.flatnonzero((lam * len(lam) > SUPPORT_CUTOFF) | (d >= trm * (1.0 - 1e-2)))


def _barrier_newton(dual: _Dual, lam: np.ndarray, support: np.ndarray,
                    record: Callable[[float, np.ndarray, np.ndarray, np.ndarray], float],
                    tol: float, max_steps: int, progress: Progress | None, label: str
                    ) -> tuple[np.ndarray, int]:
    """Newton's method for the dual on the simplex face S, with a log barrier when needed.

    Each step first tries the plain Newton step (quadratic convergence at non-degenerate
    optima, such as the centred prefix of R6) and keeps it when it halves the primal-dual gap
    ``max(d) / sum(sqrt e) - 1``; otherwise it takes a damped Newton step on
    ``f(lambda) + tau sum_S log(lambda_i)``, whose barrier keeps the weights positive and
    regularises the flat directions of degenerate optima. ``tau`` shrinks tenfold whenever
    the iterate is centred. Coordinates outside S that become active join S. Stops at the
    tolerance, or after ten steps without a 0.1 % better certificate (rounding floor).

    Returns:
        The last weights and the number of Newton steps.
    """
    c = len(lam)
    inside = np.zeros(c, dtype=bool)
    inside[support] = True
    lam = np.where(inside, np.maximum(lam, SUPPORT_CUTOFF * 1e-3 / c), 0.0)
    lam /= lam.sum()
    trm, d, e, Q = dual.evaluate(lam)
    best = record(trm, d, e, Q)
    tau = max(float(d.max()) / trm - 1.0, 1e-8) * trm / (2.0 * len(support))
    since_best = 0
    step_count = 0
    for step_count in range(1, max_steps + 1):  # noqa: B007 -- returned below
        S = np.flatnonzero(inside)
        lam_s = lam[S]
        gap_here = float(d.max()) / trm - 1.0
        M = -dual.hessian(S, e, Q)
        g = d[S] / 2.0
        accepted = None
        plain = _kkt_step(M, g, 1e-12 * float(np.diag(M).max(initial=1.0)) + 1e-300)
        if plain is not None:
            new = lam.copy()
            new[S] = np.maximum(lam_s + plain, 0.0)
            new /= new.sum()
            out = dual.evaluate(new)
            if out[0] > trm * (1.0 - 1e-12) and float(out[1].max()) / out[0] - 1.0 \
                    < 0.5 * gap_here:
                accepted = (new, out, True)
                inside &= new > 0  # weights the step zeroed leave the face (may rejoin)
        if accepted is None:
            M[np.diag_indices_from(M)] += tau / lam_s**2
            delta = _kkt_step(M, g + tau / lam_s, 0.0)
            if delta is None:
                break
            decrement = float(delta @ (M @ delta))
            shrinking = delta < 0
            t_max = min(1.0, 0.99 * float(np.min(-lam_s[shrinking] / delta[shrinking]))) \
                if shrinking.any() else 1.0
            merit = trm + tau * float(np.log(lam_s).sum())
            slope = float((g + tau / lam_s) @ delta)
            t = t_max
            while True:
                new = lam.copy()
                new[S] = lam_s + t * delta
                out = dual.evaluate(new)
                if out[0] + tau * float(np.log(new[S]).sum()) >= merit + 1e-4 * t * slope \
                        or t < 1e-12:
                    break
                t /= 2.0
            accepted = (new, out, decrement < 0.25 * tau * len(S) or t == t_max == 1.0)
        lam, (trm, d, e, Q), centred = accepted
        joining = np.flatnonzero(~inside & (d > trm * (1.0 + 1e-12)))
        if len(joining):
            inside[joining] = True
            lam[joining] = tau / trm
            lam /= lam.sum()
            trm, d, e, Q = dual.evaluate(lam)
        gap = record(trm, d, e, Q)
        report(progress, step_count, float("nan"), label)
        since_best = 0 if gap < best * (1.0 - 1e-3) else since_best + 1
        best = min(best, gap)
        if gap <= tol or since_best >= 10:
            break
        if centred:
            tau *= 0.1
    return lam, step_count


def _kkt_step(M: np.ndarray, g: np.ndarray, ridge: float) -> np.ndarray | None:
    """The step D maximising ``g.D - D.M.D / 2`` subject to ``sum(D) = 0``
    (``D = M^-1 (g - nu 1)``), or None when ``M + ridge I`` is not positive definite."""
    M = M.copy()
    M[np.diag_indices_from(M)] += ridge
    try:
        factor = sla.cho_factor(M, lower=True, check_finite=False)
    except np.linalg.LinAlgError:
        return None
    Mg = sla.cho_solve(factor, g, check_finite=False)
    M1 = sla.cho_solve(factor, np.ones_like(g), check_finite=False)
    return Mg - (Mg.sum() / M1.sum()) * M1
