"""Program 1 of Li & Miklau: optimal non-negative weights for a fixed design set.

Every weighting problem of the eigen-design family (the full algorithm, both reductions, the
Wavelet/Fourier design sets and the eps-DP variant) is an instance of::

    minimise  sum_i c_i x_i**(-p)   subject to   B^T x <= 1,   x >= 0

with ``c`` (k,) non-negative, ``B`` (k x n) entrywise non-negative (one column per cell) and

* ``p = 1`` for the (eps, delta) / L2 case: ``x = u`` are Gram weights, ``B = Q o Q`` (spec 3.3);
* ``p = 2`` for the eps-DP / L1 case: ``x = lambda`` are row weights, ``B = |Q|`` (spec 6).

The constraint fixes the sensitivity of ``diag(x^(1/p')) Q`` at 1; the objective is then
``trace(W^T W (A^T A)^-1)`` (unit privacy, squared-sensitivity units).

Two solvers of our own are provided, each returning a *certificate*: a dual-feasible lower
bound ``g(mu)``, so the relative gap ``(primal - lower) / primal`` bounds the suboptimality.

* ``dual``: L-BFGS-B on the concave Lagrangian dual ``g(mu)`` (one variable per cell; only
  products with B and B^T, so B may be an implicit Kronecker operator). Fast for k ~ n.
* ``ipm``: a primal-dual interior-point method (Mehrotra predictor-corrector) whose Newton
  systems are k x k; cheap when k << n, and it solves a whole batch of independent problems at
  once (eigen-separation groups).

``cvxpy`` (Clarabel) is available as a third, independent route for cross-checks.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla
import scipy.optimize as so

from engine.linalg.matrix import Dense, Kron, Matrix
from engine.progress import Progress, report

#: Default relative duality gap at which the solvers stop (the spec's reference values are
#: printed to 1e-6 - 1e-8 relative, and solvers agree on the objective only to ~1e-8).
GAP_TOL = 1e-8
#: ``auto`` polishes a dual solution with the interior point when its gap is above this.
POLISH_GAP = 1e-6
#: ``auto`` uses the interior-point method (with constraint generation) below this many
#: variables when they are at most a quarter of the cells; its Newton systems are k x k over
#: the ~2k cells that can be tight, O(k**3) per iteration against O(k n) for a dual gradient.
IPM_MAX_VARIABLES = 2048
#: The interior point stops when its gap has not improved by 0.1 % in this many iterations.
STALL_ITERATIONS = 25
#: Iteration cap of the interior point (it converges in 10-40 iterations when it converges).
IPM_MAX_ITERATIONS = 200
#: The dual solver evaluates its duality gap every this many iterations.
GAP_CHECK_EVERY = 10
#: The dual solver stops early once its certified gap is at most POLISH_GAP and has not
#: halved over this many iterations: on large ill-conditioned instances (all ranges at
#: n = 8192) L-BFGS-B reaches 1e-6 in ~50 iterations and then needs thousands more for each
#: further halving while the objective moves by less than the gap.
DUAL_STALL_ITERATIONS = 200
#: Relative size under which a cost c_i counts as zero (the variable is then dropped).
ZERO_COST = 1e-13

Operator = np.ndarray | Matrix


@dataclass(frozen=True)
class Program1Result:
    """Solution of one Program 1 instance.

    Attributes:
        x: optimal weights (k,), rescaled so that ``max(B^T x) = 1`` exactly; 0 where c is 0.
        value: primal objective ``sum c_i x_i**(-p)`` at ``x`` (the unit-privacy error).
        lower: a certified lower bound on the optimum (the dual value).
        iterations: solver iterations.
        method: ``dual``, ``ipm`` or ``cvxpy``.
        seconds: wall-clock solve time.
    """

    x: np.ndarray
    value: float
    lower: float
    iterations: int
    method: str
    seconds: float

    @property
    def gap(self) -> float:
        """Relative duality gap ``(value - lower) / value`` (>= 0 up to round-off)."""
        return (self.value - self.lower) / self.value if self.value > 0 else 0.0

    def summary(self) -> dict[str, float | int | str]:
        """The solve's outcome as plain numbers: value, certified lower bound, relative gap,
        iterations, method and seconds."""
        return {"value": self.value, "lower": self.lower, "gap": self.gap,
                "iterations": self.iterations, "method": self.method, "seconds": self.seconds}


# ----- operator helpers --------------------------------------------------------------------
def _b_mul(B: Operator, mu: np.ndarray) -> np.ndarray:
    """``B @ mu`` (k,) for an explicit or implicit B (k x n)."""
    return B @ mu if isinstance(B, np.ndarray) else B.matvec(mu)


def _bt_mul(B: Operator, x: np.ndarray) -> np.ndarray:
    """``B.T @ x`` (n,)."""
    return B.T @ x if isinstance(B, np.ndarray) else B.rmatvec(x)


def _kappa(p: float) -> float:
    # min_x c x**-p + a x = kappa_p c**(1/(p+1)) a**(p/(p+1))
    return (p + 1.0) * p ** (-p / (p + 1.0))


def dual_value(c: np.ndarray, B: Operator, mu: np.ndarray, p: float = 1.0) -> float:
    """The Lagrangian dual ``g(mu)``: a lower bound on Program 1 for every ``mu >= 0``."""
    a = np.maximum(_b_mul(B, np.maximum(mu, 0.0)), 0.0)
    return float(_kappa(p) * (c ** (1 / (p + 1)) * a ** (p / (p + 1))).sum() - mu.sum())


def primal_value(c: np.ndarray, x: np.ndarray, p: float = 1.0) -> float:
    """``sum c_i x_i**(-p)`` over the variables with c > 0 (inf when such an x_i is 0)."""
    live = c > 0
    if np.any(x[live] <= 0):
        return math.inf
    return float((c[live] * x[live] ** (-p)).sum())


def rescale(x: np.ndarray, B: Operator) -> np.ndarray:
    """``x / max(B^T x)``: the exactly feasible point on the ray through x."""
    return x / float(_bt_mul(B, x).max())


def _minimiser(c: np.ndarray, a: np.ndarray, p: float) -> np.ndarray:
    """``argmin_x c x**-p + a x`` = ``(p c / a)**(1/(p+1))`` (a floored to stay finite)."""
    a = np.maximum(a, 1e-300)
    return (p * c / a) ** (1.0 / (p + 1.0))


# ----- the dual (first-order) solver -------------------------------------------------------
def _solve_dual(c: np.ndarray, B: Operator, p: float, tol: float, max_iter: int,
                progress: Progress | None, mu0: np.ndarray | None, return_mu: bool = False):
    start = time.perf_counter()
    n = _bt_mul(B, np.zeros(c.shape[0])).shape[0]
    kap = _kappa(p)
    cq = c ** (1.0 / (p + 1.0))
    q = p / (p + 1.0)
    if mu0 is None:
        # best multiple of the all-ones direction (for p = 1 its value is the SVD bound)
        h = kap * float((cq * np.maximum(_b_mul(B, np.ones(n)), 0.0) ** q).sum())
        mu0 = np.full(n, (q * h / n) ** (p + 1.0))
    scale = max(float(mu0.mean()), 1e-300)  # optimise over mu / scale: O(1) variables
    state = {"it": 0, "best": -math.inf, "mu": mu0, "x": None, "value": math.inf}
    gaps: list[float] = []  # the best certified gap so far, at every check
    window = DUAL_STALL_ITERATIONS // GAP_CHECK_EVERY

    def negative_dual(z: np.ndarray) -> tuple[float, np.ndarray]:
        mu = z * scale
        a = np.maximum(_b_mul(B, mu), 1e-300)
        g = kap * float((cq * a**q).sum()) - float(mu.sum())
        x = _minimiser(c, a, p)
        grad = (_bt_mul(B, x) - 1.0) * scale
        if g > state["best"]:
            state["best"], state["mu"] = g, mu
        return -g / scale, -grad / scale

    def callback(z: np.ndarray) -> None:
        state["it"] += 1
        report(progress, state["it"], state["best"], "Program 1 (dual)")
        if state["it"] % GAP_CHECK_EVERY == 0:
            # the certificate: primal value of the Lagrangian minimiser, made feasible (the
            # best one seen and the best dual bound seen certify each other)
            x = rescale(_minimiser(c, np.maximum(_b_mul(B, state["mu"]), 0.0), p), B)
            value = primal_value(c, x, p)
            if value < state["value"]:
                state["x"], state["value"] = x, value
            gaps.append((state["value"] - state["best"]) / state["value"])
            if gaps[-1] <= tol:
                raise StopIteration
            if (gaps[-1] <= POLISH_GAP and len(gaps) > window
                    and gaps[-1] > 0.5 * gaps[-1 - window]):
                raise StopIteration  # stalled below POLISH_GAP: more iterations buy nothing

    # ftol/gtol are set below what L-BFGS-B can reach: it stops on the certified gap (above)
    # or when its line search stalls, at a relative gap of ~1e-8 or better
    res = so.minimize(negative_dual, mu0 / scale, jac=True, method="L-BFGS-B",
                      bounds=so.Bounds(np.zeros(n), np.full(n, np.inf)), callback=callback,
                      options={"maxiter": max_iter, "maxcor": 20, "ftol": 1e-16,
                               "gtol": 1e-12})
    mu = np.maximum(res.x * scale, 0.0)
    lower = dual_value(c, B, mu, p)
    if state["best"] > lower:  # keep the best certificate seen (the line search may overshoot)
        mu, lower = state["mu"], state["best"]
    x = rescale(_minimiser(c, np.maximum(_b_mul(B, mu), 0.0), p), B)
    value = primal_value(c, x, p)
    if state["value"] < value:
        x, value = state["x"], state["value"]
    result = Program1Result(x, value, lower, int(res.nit), "dual",
                            time.perf_counter() - start)
    state["final_mu"] = mu
    return result if not return_mu else (result, mu)


# ----- the primal-dual interior-point solver (batched) ------------------------------------
def _step_to_boundary(v: np.ndarray, dv: np.ndarray) -> np.ndarray:
    """Largest step in [0, 1] per batch row keeping ``v + alpha dv > 0``."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        ratio = np.where(dv < 0, -v / dv, np.inf)
    return np.minimum(1.0, ratio.min(axis=-1))


def _spd_solver(K: np.ndarray):
    """A solver ``rhs (g,k) -> K^-1 rhs`` for a batch of SPD matrices (g,k,k).

    The Newton matrices of an interior point get badly scaled near the optimum (dual weights
    of tight cells blow up), so they are equilibrated by their diagonal first; a batch whose
    Cholesky factorisation still fails is solved through eigh with a relative cutoff.
    """
    d = np.sqrt(np.maximum(np.diagonal(K, axis1=1, axis2=2), 1e-300))
    Ks = K / d[:, :, None] / d[:, None, :]
    try:
        L = np.linalg.cholesky(Ks)
    except np.linalg.LinAlgError:
        lam, U = np.linalg.eigh(Ks)
        lam = np.maximum(lam, 1e-14 * lam.max(axis=1, keepdims=True))

        def solve_eigh(rhs: np.ndarray) -> np.ndarray:
            z = np.matmul(np.swapaxes(U, 1, 2), (rhs / d)[:, :, None])[:, :, 0] / lam
            return np.matmul(U, z[:, :, None])[:, :, 0] / d

        return solve_eigh

    def solve_chol(rhs: np.ndarray) -> np.ndarray:
        if L.shape[0] == 1:  # one large system: triangular solves, not LU on a triangle
            z = sla.cho_solve((L[0], True), (rhs[0] / d[0]), check_finite=False)
            return (z / d[0])[None, :]
        y = np.linalg.solve(L, (rhs / d)[:, :, None])
        return np.linalg.solve(np.swapaxes(L, 1, 2), y)[:, :, 0] / d

    return solve_chol


def _newton_direction(solve, bm, bt, r_d: np.ndarray, r_p: np.ndarray, r_c: np.ndarray,
                      mu: np.ndarray, s: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One primal-dual Newton direction from the reduced k x k system (see solve_batch_ipm).

    ``(H + B diag(mu/s) B^T) dx = -r_d - B ((mu r_p - r_c) / s)``, then
    ``ds = -r_p - B^T dx`` and ``dmu = (-r_c - mu ds) / s``.
    """
    dx = solve(-r_d - bm((mu * r_p - r_c) / s))
    ds = -r_p - bt(dx)
    dmu = (-r_c - mu * ds) / s
    return dx, ds, dmu


def solve_batch_ipm(c: np.ndarray, B: np.ndarray, p: float = 1.0, tol: float = GAP_TOL,
                    max_iter: int = 200, progress: Progress | None = None,
                    x0: np.ndarray | None = None
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Solve a batch of independent Program 1 instances with a primal-dual interior point.

    Args:
        c: costs, shape (g, k); every entry must be > 0.
        B: constraint matrices, shape (g, k, n), entrywise >= 0, each row non-zero.
        p: objective exponent (1 for L2 Gram weights, 2 for L1 row weights).
        tol: relative duality gap at which a problem counts as solved.
        max_iter: iteration cap.
        progress: receives (iteration, largest gap).
        x0: optional warm start (g, k), positive (e.g. the solution of a relaxation).

    Returns:
        ``(x, value, lower, iterations)``: feasible weights (g, k) with ``max(B^T x) = 1``,
        primal values (g,), certified lower bounds (g,), iterations used.
    """
    c = np.asarray(c, float)
    B = np.asarray(B, float)
    g, k, n = B.shape
    Bt = np.swapaxes(B, 1, 2)

    def bt(x: np.ndarray) -> np.ndarray:  # (g,k) -> (g,n)
        return np.matmul(x[:, None, :], B)[:, 0, :]

    def bm(mu: np.ndarray) -> np.ndarray:  # (g,n) -> (g,k)
        return np.matmul(B, mu[:, :, None])[:, :, 0]

    # a strictly feasible start: the Cauchy-Schwarz weights, pulled inside to max(B^T x) = 1/2
    x = c ** (1.0 / (p + 1.0)) if x0 is None else np.maximum(x0, 1e-12 * x0.max())
    x = 0.5 * x / bt(x).max(axis=1, keepdims=True)
    s = 1.0 - bt(x)
    grad = -p * c * x ** (-p - 1.0)
    rows = B.sum(axis=2)
    mu = np.broadcast_to((np.abs(grad) / rows).mean(axis=1, keepdims=True), (g, n)).copy()
    best_x = x / bt(x).max(axis=1, keepdims=True)
    best_val = (c * best_x ** (-p)).sum(axis=1)
    lower = np.full(g, -np.inf)
    kap = _kappa(p)
    it = 0
    stall_best, stall_it = math.inf, 0
    for it in range(1, max_iter + 1):
        a = np.maximum(bm(mu), 0.0)
        lower = np.maximum(lower, kap * (c ** (1 / (p + 1)) * a ** (p / (p + 1))).sum(axis=1)
                           - mu.sum(axis=1))
        # two primal candidates: the iterate, and the Lagrangian minimiser for the current
        # dual weights (the latter is far more accurate once mu has converged)
        for cand in (x, _minimiser(c, a, p)):
            xf = cand / bt(cand).max(axis=1, keepdims=True)
            val = (c * xf ** (-p)).sum(axis=1)
            better = val < best_val
            best_x[better], best_val[better] = xf[better], val[better]
        gap = (best_val - lower) / best_val
        report(progress, it, float(gap.max()), "Program 1 (interior point)")
        if np.all(gap <= tol):
            break
        # a stalled interior point (Newton systems too ill-conditioned to make progress) is
        # stopped; the caller sees the gap and can switch solvers
        worst = float(gap.max())
        if worst < stall_best * (1.0 - 1e-3):
            stall_best, stall_it = worst, it
        elif it - stall_it >= STALL_ITERATIONS:
            break
        hess = p * (p + 1.0) * c * x ** (-p - 2.0)
        grad = -p * c * x ** (-p - 1.0)
        r_d = grad + bm(mu)
        r_p = bt(x) + s - 1.0
        D = mu / s
        K = np.matmul(B * D[:, None, :], Bt)
        K[:, np.arange(k), np.arange(k)] += hess
        solve = _spd_solver(K)
        comp = (mu * s).mean(axis=1, keepdims=True)
        # predictor (affine scaling), then Mehrotra's centred corrector
        dx, ds, dmu = _newton_direction(solve, bm, bt, r_d, r_p, mu * s, mu, s)
        alpha = np.minimum(np.minimum(_step_to_boundary(x, dx), _step_to_boundary(s, ds)),
                           _step_to_boundary(mu, dmu))[:, None]
        comp_aff = ((mu + alpha * dmu) * (s + alpha * ds)).mean(axis=1, keepdims=True)
        sigma = np.clip(comp_aff / comp, 0.0, 1.0) ** 3
        dx, ds, dmu = _newton_direction(solve, bm, bt, r_d, r_p,
                                        mu * s + ds * dmu - sigma * comp, mu, s)
        alpha = 0.99 * np.minimum(np.minimum(_step_to_boundary(x, dx),
                                             _step_to_boundary(s, ds)),
                                  _step_to_boundary(mu, dmu))[:, None]
        x = x + alpha * dx
        s = np.maximum(s + alpha * ds, 1e-300)
        mu = np.maximum(mu + alpha * dmu, 1e-300)
    return best_x, best_val, lower, it


def solve_batch_active(c: np.ndarray, B: np.ndarray, p: float = 1.0, tol: float = GAP_TOL,
                       progress: Progress | None = None, start_columns: int | None = None,
                       max_rounds: int = 50, max_iter: int = 200
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """:func:`solve_batch_ipm` by constraint generation, for k << n (many slack cells).

    With k variables, generically at most k cells are tight at the optimum. Each problem
    starts from the cells a cheap guess loads most (the Cauchy-Schwarz weights; for a single
    large problem, the support of a loose dual solution); the restricted problems (a
    relaxation) are solved by the batched interior point, warm-started, and the most violated
    cells are added until every cell's constraint holds. The restricted dual is a valid dual
    for the full problem (zero weight on the other cells), so the certificate carries over.
    Returns the same tuple as :func:`solve_batch_ipm`.
    """
    c = np.asarray(c, float)
    B = np.asarray(B, float)
    g, k, n = B.shape
    size = min(n, start_columns or 4 * k + 16)
    if size >= n // 2:
        return solve_batch_ipm(c, B, p, tol, max_iter, progress)
    x: np.ndarray | None = None
    load = np.matmul((c ** (1.0 / (p + 1.0)))[:, None, :], B)[:, 0, :]
    if g == 1 and k >= 64:
        # one large problem: a loose dual solve (cheap O(k n) products) points at the cells
        # that end up tight, far better than the Cauchy-Schwarz loads
        guess, mu = _solve_dual(c[0], B[0], p, 1e-3, 300, None, None, return_mu=True)
        load = mu[None, :] + 1e-300 * load
        x = guess.x[None, :]
        size = min(size, 2 * k + 16)
    columns = np.argsort(-load, axis=1)[:, :size]
    chosen = np.zeros((g, n), dtype=bool)
    np.put_along_axis(chosen, columns, True, axis=1)
    iterations = 0
    for _ in range(max_rounds):
        sub = np.take_along_axis(B, columns[:, None, :], axis=2)
        # warm start from the previous (relaxed) solution: few Newton steps per round
        x, _, lower, it = solve_batch_ipm(c, sub, p, tol, max_iter, progress, x)
        iterations += it
        # x is exactly feasible on the chosen cells; check every cell
        loads = np.matmul(x[:, None, :], B)[:, 0, :]
        if np.all(loads.max(axis=1) <= 1.0 + tol):
            break
        # add the most loaded cells not yet chosen (the same count for every problem)
        add = np.argsort(-np.where(chosen, -np.inf, loads), axis=1)[:, :max(8, k // 2)]
        np.put_along_axis(chosen, add, True, axis=1)
        columns = np.concatenate([columns, add], axis=1)
        if columns.shape[1] >= n // 2:
            return solve_batch_ipm(c, B, p, tol, max_iter, progress)
    x = x / np.maximum(np.matmul(x[:, None, :], B)[:, 0, :].max(axis=1, keepdims=True), 1e-300)
    value = (c * x ** (-p)).sum(axis=1)
    return x, value, np.minimum(lower, value), iterations


def _solve_ipm(c: np.ndarray, B: np.ndarray, p: float, tol: float, max_iter: int,
               progress: Progress | None) -> Program1Result:
    start = time.perf_counter()
    x, val, lower, it = solve_batch_active(c[None, :], np.asarray(B, float)[None], p, tol,
                                           progress, max_iter=min(max_iter,
                                                                  IPM_MAX_ITERATIONS))
    return Program1Result(x[0], float(val[0]), float(lower[0]), it, "ipm",
                          time.perf_counter() - start)


# ----- cvxpy (independent cross-check) -----------------------------------------------------
def _solve_cvxpy(c: np.ndarray, B: np.ndarray, p: float) -> Program1Result:
    import cvxpy as cp

    start = time.perf_counter()
    x = cp.Variable(c.shape[0])
    objective = (cp.sum(cp.multiply(c, cp.inv_pos(x))) if p == 1
                 else cp.sum(cp.multiply(c, cp.power(x, -p))))
    prob = cp.Problem(cp.Minimize(objective), [np.asarray(B).T @ x <= 1, x >= 0])
    prob.solve(solver=cp.CLARABEL)
    xv = rescale(np.maximum(np.asarray(x.value, float), 1e-300), B)
    val = primal_value(c, xv, p)
    # Clarabel's optimum is not a certificate of ours; its objective is reported as the bound
    return Program1Result(xv, val, min(val, float(prob.value)), int(
        prob.solver_stats.num_iters or 0), "cvxpy", time.perf_counter() - start)


# ----- the public entry point ---------------------------------------------------------------
def _separable_row_max(B: Operator) -> np.ndarray | None:
    """Row maxima of B when every column has at most one non-zero (else None).

    Explicit B, or a Kronecker product of explicit factors (separable iff every factor is;
    the row maxima are then the Kronecker product of the factors' row maxima).
    """
    if isinstance(B, np.ndarray):
        return B.max(axis=1) if np.all((B > 0).sum(axis=0) <= 1) else None
    if isinstance(B, Kron) and all(isinstance(f, Dense) for f in B.factors):
        out = np.ones(1)
        for f in B.factors:
            F = f.array
            if not np.all((F > 0).sum(axis=0) <= 1):
                return None
            out = np.kron(out, F.max(axis=1))
        return out
    return None


def cauchy_schwarz_start(c: np.ndarray, B: Operator, p: float = 1.0
                         ) -> tuple[np.ndarray, float, float]:
    """The closed-form candidate ``x ~ c**(1/(p+1))`` and the dual bound along ``mu ~ 1``.

    For p = 1 and an orthonormal square design these are the SVD-bound strategy ``A_l`` (spec
    section 2) and the SVD bound itself; when the two values agree the candidate is optimal
    (all marginal workloads, all predicates, any workload with constant ``diag(G^(1/2))``).

    Returns:
        ``(x, value, lower)`` with x exactly feasible.
    """
    x = rescale(c ** (1.0 / (p + 1.0)), B)
    n = _bt_mul(B, np.zeros(c.shape[0])).shape[0]
    q = p / (p + 1.0)
    h = _kappa(p) * float((c ** (1 / (p + 1)) * np.maximum(_b_mul(B, np.ones(n)), 0.0) ** q
                           ).sum())
    mu = np.full(n, (q * h / n) ** (p + 1.0))
    return x, primal_value(c, x, p), dual_value(c, B, mu, p)


def solve_program1(c: np.ndarray, B: Operator, *, power: float = 1.0, method: str = "auto",
                   tol: float = GAP_TOL, max_iter: int = 5000,
                   progress: Progress | None = None) -> Program1Result:
    """Optimal weights ``x`` for ``min sum c_i x_i**-power s.t. B^T x <= 1, x >= 0``.

    Variables with ``c_i <= ZERO_COST * max(c)`` do not affect the objective; they get weight
    0 (keeping them would spend sensitivity on nothing, spec pitfall 4).

    Args:
        c: per-design-query costs (k,), e.g. eigenvalues.
        B: (k x n) non-negative matrix, explicit or an implicit operator with matvec/rmatvec.
        power: 1 for Gram weights under L2 sensitivity, 2 for row weights under L1.
        method: ``auto``, ``dual``, ``ipm`` or ``cvxpy``. ``auto`` first tries the closed-form
            Cauchy-Schwarz weights (optimal when they meet the dual bound), then uses the
            interior point for an explicit B with few variables (at most IPM_MAX_VARIABLES
            and at most a quarter of the cells) and the dual otherwise; a dual solution with a
            gap above POLISH_GAP is polished by the interior point when that is affordable.
        tol: target relative duality gap.
        max_iter: iteration cap of the chosen solver.
        progress: receives (iteration, dual bound or gap) and can cancel the solve.

    Returns:
        The weights (full length k, exactly feasible), objective, certified lower bound.
    """
    start = time.perf_counter()
    c = np.asarray(c, dtype=float)
    if c.ndim != 1 or np.any(c < 0) or not np.all(np.isfinite(c)):
        raise ValueError("Program 1: c must be a finite non-negative vector")
    if method not in ("auto", "dual", "ipm", "cvxpy"):
        raise ValueError(f"Program 1: unknown method {method!r}; allowed: auto, dual, ipm, "
                         "cvxpy")
    live = c > ZERO_COST * max(float(c.max(initial=0.0)), 1e-300)
    if not live.any():
        raise ValueError("Program 1: every cost is zero (the workload is empty)")
    c = np.where(live, c, 0.0)
    explicit = isinstance(B, np.ndarray)
    if method in ("ipm", "cvxpy") or (method == "auto" and explicit):
        if not explicit:
            B = B.dense()
        if not live.all():  # the interior point and cvxpy need every variable to matter
            sub = solve_program1(c[live], B[live], power=power, method=method, tol=tol,
                                 max_iter=max_iter, progress=progress)
            x = np.zeros(c.shape[0])
            x[live] = sub.x
            return Program1Result(x, sub.value, sub.lower, sub.iterations, sub.method,
                                  sub.seconds)
    if method == "cvxpy":
        return _solve_cvxpy(c, B, power)
    if method == "auto":
        row_max = _separable_row_max(B)
        if row_max is not None:
            # every cell constrains one variable only (e.g. the identity design): the problem
            # separates and each weight takes its largest feasible value
            with np.errstate(divide="ignore"):
                x = np.where(live, 1.0 / row_max, 0.0)
            value = primal_value(c, x, power)
            return Program1Result(x, value, value, 0, "closed form",
                                  time.perf_counter() - start)
        x, value, lower = cauchy_schwarz_start(c, B, power)
        if value - lower <= tol * value:
            return Program1Result(x, value, lower, 0, "closed form",
                                  time.perf_counter() - start)
    k, n = c.shape[0], _bt_mul(B, np.zeros(c.shape[0])).shape[0]
    if method == "ipm" or (method == "auto" and explicit and k <= IPM_MAX_VARIABLES
                           and 4 * k <= n):
        result = _solve_ipm(c, B, power, tol, max_iter, progress)
        if method == "ipm" or result.gap <= POLISH_GAP:
            return result
        # the interior point stalled: the dual decides, and the better certificate is kept
        other = _solve_dual(c, B, power, tol, max_iter, progress, None)
        best = other if other.value < result.value else result
        return Program1Result(best.x, best.value, max(result.lower, other.lower),
                              result.iterations + other.iterations, "ipm+dual",
                              time.perf_counter() - start)
    result = _solve_dual(c, B, power, tol, max_iter, progress, None)
    if method == "auto" and result.gap > POLISH_GAP and explicit and k <= IPM_MAX_VARIABLES:
        polished = _solve_ipm(c, B, power, tol, 200, progress)
        if polished.value < result.value:
            return Program1Result(polished.x, polished.value,
                                  max(polished.lower, result.lower),
                                  result.iterations + polished.iterations, "dual+ipm",
                                  time.perf_counter() - start)
    return result
