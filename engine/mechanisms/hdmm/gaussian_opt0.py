"""OPT_0 for Gaussian noise: the convex problem ``min tr[X^-1 V]`` over ``diag X = 1``
(``X = A^T A``; HDMM Def. 12, spec section 3.2).

It is solved through its Lagrange dual ``max_lambda 2 tr[(F^T Lambda F)^(1/2)] - sum lambda``
(``V = F F^T``), started from the multipliers that satisfy the optimality condition ``Lambda =
X^-1 V X^-1`` at the SVD-bound strategy ``X0 ~ V^(1/2)``. Every dual iterate gives a primal X
with unit diagonal whose error is an upper bound, the dual value a lower bound; the loop stops
on a certified relative gap (default 1e-7), usually after 5-10 eigendecompositions. The
strategy is the Cholesky factor ``A = L^T`` of the best X. Rank-deficient V (e.g. width-k
ranges) is handled exactly: multipliers may reach 0 (the unit-diagonal constraint becomes
``diag X <= 1`` there) and the primal point is padded on the diagonal, which never increases
``tr[X^-1 V]``; when the optimum itself is singular the strategy is a rank(V) x n factor whose
rows span exactly the range of V.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.linalg as sla
import scipy.optimize as so

from engine.linalg.pinv import RCOND
from engine.mechanisms.hdmm.tracking import Reporter, reporter
from engine.progress import Progress

#: Relative eigenvalue cutoff under which V is treated as rank deficient.
RANK_RTOL = 1e-10
#: The Gaussian dual forms its primal point once every |diag X(lambda) - 1| is below this.
PRIMAL_TRIGGER = 0.05

class _Converged(Exception):  # noqa: N818 -- control flow, not an error
    """Raised inside the dual objective once the certified gap is small enough."""


@dataclass
class _DualState:
    """Best primal (upper bound) and dual (lower bound) seen by the dual ascent."""

    upper: float = math.inf
    lower: float = -math.inf
    A: np.ndarray | None = None
    factorization: str = ""
    evals: int = 0
    last: tuple[np.ndarray, np.ndarray, float] | None = None


def _cholesky_trace(X: np.ndarray, F: np.ndarray) -> tuple[float, np.ndarray | None]:
    """``tr[X^-1 F F^T]`` and the lower Cholesky factor of X; ``(inf, None)`` unless X is
    positive definite and well conditioned (the same test as engine.linalg.pinv: a nearly
    singular factor would make the exact inverse, and so the error, meaningless)."""
    try:
        L = sla.cholesky(X, lower=True, check_finite=False)
    except np.linalg.LinAlgError:
        return math.inf, None
    diag = np.abs(np.diag(L))
    if not (np.all(np.isfinite(L)) and diag.min() > np.sqrt(RCOND) * 1e2 * diag.max()):
        return math.inf, None
    Z = sla.solve_triangular(L, F, lower=True, check_finite=False)
    return float((Z * Z).sum()), L


def gaussian_opt0(V: np.ndarray, *, tol: float = 1e-7, maxiter: int = 100,
                  progress: Progress | Reporter | None = None
                  ) -> tuple[np.ndarray, float, dict[str, Any]]:
    """Solve ``min tr[X^-1 V]`` s.t. ``diag X = 1`` and return the Cholesky strategy.

    Args:
        V: workload Gram (n x n, PSD, not zero).
        tol: stop when ``(upper - lower) / upper <= tol`` (a certified optimality gap).
        maxiter: largest number of dual iterations.
        progress: receives one step (the current upper bound) per dual evaluation.

    Returns:
        ``(A, loss, info)``: the strategy, upper triangular ``A = L^T`` with unit column norms
        (``info["factorization"] == "cholesky"``; when the optimum is singular, a rank(V) x n
        factor whose rows span the range of V, ``"range"``), its unit-noise error
        ``||A||_2**2 tr[(A^T A)^+ V]`` and info with ``lower_bound``, ``gap``,
        ``evaluations`` and ``rank`` (of V).
    """
    n = V.shape[0]
    V = (V + V.T) / 2.0
    ev, P = np.linalg.eigh(V)
    keep = ev > RANK_RTOL * max(float(ev.max()), 0.0)
    if not keep.any():
        raise ValueError("gaussian_opt0: V is zero")
    Pk, evk = P[:, keep], ev[keep]
    F = Pk * np.sqrt(evk)  # V = F F^T
    # multipliers from the optimality condition Lambda = X0^-1 V X0^-1 at the SVD-bound start
    # X0 = N V^(1/2) N (N: unit diagonal); exact for PD V, a good start otherwise
    h = (Pk**2 * np.sqrt(evk)).sum(axis=1)  # diag(V^(1/2))
    T = (Pk / np.sqrt(evk)) @ (Pk.T @ (np.sqrt(h)[:, None] * F))
    lam0 = h * (T * T).sum(axis=1)
    lam0 = np.maximum(lam0, 1e-12 * lam0.max())
    singular = int(keep.sum()) < n
    state = _DualState()
    rep = reporter(progress, "OPT_0 gaussian (dual ascent)")

    def primal(H: np.ndarray, xd: np.ndarray, trace: float) -> None:
        # X(lambda) = H H^T; a unit-diagonal version of it is the paper's strategy family
        X = sla.blas.dsyrk(1.0, H, lower=1)  # lower triangle only: all Cholesky reads
        if singular:
            # pad the diagonal after scaling to diag <= 1: the range (so the support) is
            # kept and tr[X^-1 V] can only go down
            top = float(xd.max())
            Xp = X / top
            Xp[np.diag_indices(n)] += 1.0 - xd / top
        else:
            r = 1.0 / np.sqrt(xd)
            Xp = X * np.outer(r, r)
        Xp[np.diag_indices(n)] = 1.0
        value, L = _cholesky_trace(Xp, F)
        if value < state.upper:
            state.upper, state.A, state.factorization = value, L.T.copy(), "cholesky"
        elif L is None:
            # the optimum itself can be singular (every constraint active on a rank-deficient
            # V): then the strategy is X(lambda)'s own factor, scaled to diag <= 1, whose
            # rows span exactly the range of V; its error is max(diag X) tr[X^+ V]
            top = float(xd.max())
            value = top * trace
            if value < state.upper:
                state.upper, state.A, state.factorization = value, H.T / np.sqrt(top), "range"

    def iterate(lam: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(H, diag X, sqrt of the eigenvalues)`` of ``X(lambda) = H H^T``."""
        if singular:
            # F^T Lambda F (r x r) stays invertible when some multipliers reach 0
            G = F * np.sqrt(lam)[:, None]
            s, W = np.linalg.eigh(sla.blas.dsyrk(1.0, G, trans=1, lower=1))
            rs = np.sqrt(np.clip(s, 1e-300, None))
            H = (F @ W) / np.sqrt(rs)  # F (F^T Lambda F)^(-1/2) F^T
            return H, (H * H).sum(axis=1), rs
        # V positive definite: M = D V D with D = Lambda^(1/2) needs no product with F, and
        # diag X = diag(M^(1/2)) / lambda is O(n^2) from the eigenvectors
        d = np.sqrt(lam)
        s, U = np.linalg.eigh(V * np.outer(d, d), UPLO="L")
        rs = np.sqrt(np.clip(s, 0.0, None))
        return (U * np.sqrt(rs)) / d[:, None], ((U * U) @ rs) / lam, rs

    def neg_dual(z: np.ndarray) -> tuple[float, np.ndarray]:
        lam = lam0 * z
        H, xd, rs = iterate(lam)
        dual = float(2.0 * rs.sum() - lam.sum())
        state.lower = max(state.lower, dual)
        state.evals += 1
        state.last = (H, xd, float(rs.sum()))
        # the primal point costs about one eigendecomposition: for PD V form it once the
        # constraints are nearly met (and at the start, for an upper bound to report); for
        # rank-deficient V some constraints stay slack (diag X < 1) so form it every time
        if (singular or state.evals == 1
                or float(np.abs(xd - 1.0).max()) <= PRIMAL_TRIGGER):
            primal(H, xd, float(rs.sum()))
        rep.step(state.upper)
        if state.upper - state.lower <= tol * state.upper:
            raise _Converged
        return -dual, -(xd - 1.0) * lam0

    floor = 0.0 if singular else 1e-12  # PD V: lambda = 0 would divide by zero
    with contextlib.suppress(_Converged):
        so.minimize(neg_dual, np.ones(n), jac=True, method="L-BFGS-B",
                    bounds=[(floor, None)] * n,
                    options={"ftol": 1e-15, "gtol": 1e-14, "maxiter": maxiter,
                             "maxfun": 3 * maxiter})
    if state.upper - state.lower > tol * state.upper and state.last is not None:
        primal(*state.last)  # out of iterations: the last point may still be the best
    if state.A is None:
        raise np.linalg.LinAlgError("gaussian_opt0: no iterate supports the workload")
    info = {"lower_bound": state.lower, "gap": max(0.0, 1.0 - state.lower / state.upper),
            "evaluations": state.evals, "rank": int(keep.sum()),
            "factorization": state.factorization}
    return state.A, state.upper, info

