"""Non-negative least squares over an implicit strategy, and rounding that keeps a total.

The census TopDown route to publishable counts: fit one non-negative estimate ``x`` of the
data vector to the noisy measurements ``y = A x + noise`` by variance-weighted least squares,

    minimise  sum_i (A x - y)_i**2 / v_i   subject to  x >= 0  (and  sum(x) = total),

then round it to whole counts that keep the total. Every published table derived from the one
integer vector agrees with every other (post-processing: no privacy cost).

The solver is a projected Newton method (Bertsekas 1982) on the quadratic: each step fixes the
cells that sit at zero with a gradient pushing them below it, solves the Newton system on the
other cells by conjugate gradients (one ``A`` and one ``A^T`` product per iteration, so
Kronecker and marginal strategies are never materialised), and moves along the projection arc
with an Armijo line search. On a quadratic the step is exact once the zero set is right, so a
few outer steps reach machine precision. With a total, the set is the scaled simplex and the
Newton system is solved on the sum-zero subspace.

Projected Newton needs many steps when most cells end at zero on a large domain (tens of steps,
each dozens of products: minutes on 1e6 cells). Where ``A^T A + rho I`` can be inverted
exactly and cheaply -- a Kronecker strategy with one noise level, through the eigenvectors of
its small factor Grams -- an ADMM stage first (Boyd et al. 2011, section 5; splitting
``x = z`` with z in the feasible set) reaches the fit's accuracy in tens of iterations of two
Kronecker products each; projected Newton then polishes to machine precision if the budget
allows.

Example:
    >>> from engine.linalg.matrix import Identity
    >>> nonnegative_least_squares(Identity(3), np.array([4.0, -1.0, 2.0]), 1.0)
    array([4., 0., 2.])
    >>> round_preserving_total(np.array([0.4, 0.4, 1.2]), 2)
    array([1, 0, 1])
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.errors import SpecError
from engine.linalg.matrix import Matrix

#: Armijo sufficient-decrease constant of the line search.
ARMIJO = 1e-4
#: Halvings of the step before the line search gives up on a direction.
MAX_HALVINGS = 40
#: ADMM over-relaxation (Boyd et al. 2011 recommend 1.5-1.8): on 1e6 sparse cells it reaches
#: the fit's accuracy in about 30 iterations instead of 50.
OVER_RELAXATION = 1.6
#: ADMM checks its residuals (to stop, and to rebalance its shift) every this many iterations.
CHECK_EVERY = 5
#: Domains from this many cells run the ADMM stage in single precision: it moves half the
#: bytes per pass over the cells; the polish and the reported stationarity stay double.
SINGLE_PRECISION_CELLS = 2**17


@dataclass(frozen=True)
class NonnegativeFit:
    """The result of :func:`nonnegative_fit`.

    Attributes:
        x: the estimate (>= 0, one entry per cell; summing to the total when one was given).
        converged: True when the projected gradient reached the tolerance (x is the optimum).
        iterations: Newton steps taken.
        products: products with ``A^T A`` (or its pseudo-inverse) spent.
        stationarity: the projected gradient's norm relative to the gradient at zero (0 at
            the optimum; NaN when the budget was 0 and it was not computed).
    """

    x: np.ndarray
    converged: bool
    iterations: int
    products: int
    stationarity: float


def nonnegative_least_squares(strategy: Matrix, measurements: np.ndarray,
                              noise_variances: float | np.ndarray, *,
                              total: float | None = None, **options: Any) -> np.ndarray:
    """The non-negative data vector closest to the measurements in variance-weighted L2.

    ``nonnegative_fit(...).x``; see :func:`nonnegative_fit` for the arguments and options.
    """
    return nonnegative_fit(strategy, measurements, noise_variances, total=total,
                           **options).x


def nonnegative_fit(strategy: Matrix, measurements: np.ndarray,
                    noise_variances: float | np.ndarray, *, total: float | None = None,
                    start: np.ndarray | None = None, tol: float = 1e-10,
                    max_iter: int = 100, cg_iter: int = 500,
                    max_products: int | None = None, admm_tol: float = 1e-6,
                    admm_iter: int = 300, gram_solver: ShiftedGramSolver | None = None
                    ) -> NonnegativeFit:
    """The non-negative data vector closest to the measurements in variance-weighted L2,
    with how far the solver got.

    Args:
        strategy: the measurement matrix A (implicit; only ``matvec``/``rmatvec``, and
            ``gram``/``pinv`` where A has structured ones, are used).
        measurements: the noisy answers y (one per row of A), in counts.
        noise_variances: the noise variance of every measurement (squared counts), or one
            variance for all.
        total: when given, the estimate also sums exactly to it (a public total, in counts).
        start: a starting estimate (default: the least-squares ``A^+ y`` where A has a
            structured pseudo-inverse, else the uniform one), projected onto the feasible set.
        tol: stop when the projected gradient is below ``tol`` times the gradient at zero.
        max_iter: largest number of Newton steps.
        cg_iter: largest number of conjugate-gradient iterations per Newton step.
        max_products: a work budget in products with ``A^T A`` or its factors (None: none).
            Every iterate is feasible, so a budgeted fit is a valid estimate; 0 keeps the
            projected start.
        admm_tol: relative primal and dual residual at which the ADMM stage stops (Kronecker
            strategies with one noise level; see :class:`ShiftedGramSolver`).
        admm_iter: largest number of ADMM iterations.
        gram_solver: the shifted Gram solver of ``w A^T A`` when the caller knows one that
            :meth:`ShiftedGramSolver.of` cannot see (e.g.
            :meth:`ShiftedGramSolver.of_marginals` for a weighted union of marginals); it
            also gives the default start, the least-squares ``H^+ A^T w y``.

    Returns:
        The fit (see :class:`NonnegativeFit`).

    Raises:
        SpecError: a measurement count that does not match A, a non-positive variance or a
            negative total.
    """
    y = np.asarray(measurements, dtype=float).reshape(-1)
    rows, cells = strategy.shape
    if y.size != rows:
        raise SpecError(f"measurements: expected {rows:,} values (one per strategy row), got "
                        f"{y.size:,}")
    weights = _weights(noise_variances, rows)
    if total is not None and not (math.isfinite(total) and total >= 0):
        raise SpecError(f"total: must be a finite count >= 0, got {total!r}")
    if total == 0:
        return NonnegativeFit(np.zeros(cells), True, 0, 0, 0.0)
    problem = _Problem(strategy, y, weights, total, gram_solver)
    budget = math.inf if max_products is None else max_products
    if start is None and gram_solver is not None:
        start = gram_solver.least_squares(strategy.rmatvec(weights * y))
        problem.products += 2
    x = problem.project(problem.initial(start))
    if strategy.is_identity() and problem.gram is not None:
        # measured cells with one noise level: the projection is the fit itself
        return NonnegativeFit(x, True, 0, 0, 0.0)
    if budget <= 0:
        return NonnegativeFit(x, False, 0, 0, math.nan)
    target = strategy.rmatvec(weights * y)
    scale = float(np.linalg.norm(target)) or 1.0
    shifted = gram_solver or ShiftedGramSolver.of(strategy, weights)
    if shifted is not None:
        # one product of the budget is kept for the gradient below
        x = _admm(problem, shifted, target, x, budget - 1, admm_tol, admm_iter)
    gradient = problem.hessian(x) - target
    stationarity = problem.projected_gradient(x, gradient)
    converged, iterations = False, 0
    for iteration in range(1, max_iter + 1):
        if np.linalg.norm(stationarity) <= tol * scale:
            gradient = problem.hessian(x) - target  # confirm on the exact gradient
            stationarity = problem.projected_gradient(x, gradient)
            if np.linalg.norm(stationarity) <= tol * scale:
                converged = True
                break
        room = int(min(cg_iter, (budget - problem.products - 2) // 2))
        if room < 1:
            break
        # Bertsekas' epsilon: cells this close to zero with a gradient pushing them down are
        # held at zero, so a step cannot stall on a cell that the projection keeps clipping.
        epsilon = min(1e-3, float(np.abs(stationarity).max()))
        # inexact Newton: a loose solve while the zero set is still moving, tighter near the end
        forcing = min(0.1, math.sqrt(float(np.linalg.norm(stationarity)) / scale))
        step = problem.newton_direction(x, gradient, epsilon, room, forcing)
        moved = problem.line_search(x, step, gradient)
        if moved is None:
            moved = problem.line_search(x, -stationarity, gradient)
            if moved is None:
                break
        x, curvature = moved
        iterations = iteration
        # the gradient is updated by H times the step; recomputed now and then against drift
        gradient = (gradient + curvature if iteration % 20
                    else problem.hessian(x) - target)
        stationarity = problem.projected_gradient(x, gradient)
    else:
        converged = bool(np.linalg.norm(stationarity) <= tol * scale)
    return NonnegativeFit(x, converged, iterations, problem.products,
                          float(np.linalg.norm(stationarity)) / scale)


def _weights(noise_variances: float | np.ndarray, rows: int) -> np.ndarray:
    """The inverse variances, one per row (read-only; one variance for all is broadcast,
    not copied)."""
    v = np.asarray(noise_variances, dtype=float)
    if v.ndim == 0:
        v = v.reshape(1)
    else:
        v = v.reshape(-1)
        if v.size != rows:
            raise SpecError(f"noise_variances: expected one variance or {rows:,}, got "
                            f"{v.size:,}")
    if not np.all(np.isfinite(v)) or np.any(v <= 0):
        raise SpecError("noise_variances: every variance must be a finite number > 0")
    return np.broadcast_to(1.0 / v, (rows,)) if v.size == 1 else 1.0 / v


class _Problem:
    """The weighted quadratic, its feasible set (orthant or scaled simplex) and the steps."""

    def __init__(self, A: Matrix, y: np.ndarray, weights: np.ndarray,
                 total: float | None, eigen: ShiftedGramSolver | None = None) -> None:
        self.A, self.y, self.w, self.total = A, y, weights, total
        #: ``w A^T A`` in its eigenbasis, when known: products through it are cheaper
        self.eigen = eigen
        self.gram, self.gram_pinv = _structured_gram(A, weights)
        #: products with the Gram, its pseudo-inverse or its eigenvectors so far (the work)
        self.products = 0
        #: the simplex threshold of the last projection (with a total)
        self.threshold = math.nan

    def initial(self, start: np.ndarray | None) -> np.ndarray:
        cells = self.A.shape[1]
        if start is not None:
            x = np.asarray(start, dtype=float).reshape(-1)
            if x.size != cells:
                raise SpecError(f"start: expected {cells:,} values, got {x.size:,}")
            return x
        if self.A.is_identity():  # the measurements are the cells (projecting copies them)
            return self.y
        try:
            return np.asarray(self.A.pinv().matvec(self.y), dtype=float).reshape(-1)
        except (ValueError, NotImplementedError):
            # no structured pseudo-inverse above the size guard: start from the uniform guess
            return np.full(cells, (self.total or 0.0) / cells)

    def hessian(self, p: np.ndarray) -> np.ndarray:
        self.products += 1
        if self.eigen is not None:
            return self.eigen.apply(p)
        if self.gram is not None:
            return self.w[0] * self.gram.matvec(p)
        return self.A.rmatvec(self.w * self.A.matvec(p))

    def precondition(self, p: np.ndarray) -> np.ndarray:
        """``H^+ p`` where the strategy has a structured pseudo-inverse, else p."""
        if self.gram_pinv is None:
            return p
        self.products += 1
        return self.gram_pinv.matvec(p) / self.w[0]

    def project(self, v: np.ndarray, below: float | None = None) -> np.ndarray:
        """The feasible point nearest v; with a total, ``below`` guesses a lower bound on the
        simplex threshold (:func:`simplex_threshold`), which is kept in ``threshold``."""
        if self.total is None:
            return np.maximum(v, 0.0)
        if self.total == 0:
            return np.zeros_like(v)
        self.threshold = simplex_threshold(v, self.total, below)
        out = v - self.threshold
        return np.maximum(out, 0.0, out=out)

    def multiplier(self, x: np.ndarray, gradient: np.ndarray, epsilon: float) -> float:
        """The Lagrange multiplier of the total: the mean gradient over positive cells."""
        if self.total is None:
            return 0.0
        positive = x > epsilon
        if not positive.any():
            positive = x > 0
        return float(gradient[positive].mean())

    def projected_gradient(self, x: np.ndarray, gradient: np.ndarray) -> np.ndarray:
        """Zero exactly at the optimum: the reduced gradient on positive cells, its negative
        part on cells at zero."""
        reduced = gradient - self.multiplier(x, gradient, 0.0)
        return np.where(x > 0, reduced, np.minimum(reduced, 0.0))

    def newton_direction(self, x: np.ndarray, gradient: np.ndarray, epsilon: float,
                         iterations: int, forcing: float) -> np.ndarray:
        reduced = gradient - self.multiplier(x, gradient, epsilon)
        held = (x <= epsilon) & (reduced > 0)
        free = ~held
        step = np.where(held, -x, 0.0)
        if free.any():
            step[free] = self.conjugate_gradients(free, -reduced, iterations, forcing)
        return step

    def conjugate_gradients(self, free: np.ndarray, rhs: np.ndarray, iterations: int,
                            forcing: float) -> np.ndarray:
        """Solve ``H_FF d = rhs_F`` to a relative residual of ``forcing`` (on the sum-zero
        subspace when there is a total) by
        conjugate gradients preconditioned with the restriction of ``H^+`` to the free cells
        (exact when no cell is held; its projection onto the subspace is in the ``H^+``
        metric)."""
        full = np.zeros(free.size)

        def on_free(v: np.ndarray, apply) -> np.ndarray:
            full[free] = v
            full[~free] = 0.0
            return apply(full)[free]

        def restrict(v: np.ndarray) -> np.ndarray:
            return v - v.mean() if self.total is not None else v

        ones = on_free(np.ones(int(free.sum())), self.precondition)

        def preconditioned(v: np.ndarray) -> np.ndarray:
            z = on_free(v, self.precondition)
            if self.total is not None:
                z = z - ones * (z.sum() / ones.sum())
            return z

        r = restrict(rhs[free])
        d = np.zeros_like(r)
        z = preconditioned(r)
        rz = float(r @ z)
        if rz <= 0.0:  # the preconditioner is singular here: plain CG
            preconditioned, z = restrict, r.copy()
            rz = float(r @ r)
        p = z.copy()
        stop = forcing**2 * float(r @ r)
        for _ in range(iterations):
            if float(r @ r) <= stop or rz <= 0.0:
                break
            hp = restrict(on_free(p, self.hessian))
            curvature = float(p @ hp)
            if curvature <= 0.0:  # a flat direction: the step so far is a descent step
                break
            alpha = rz / curvature
            d += alpha * p
            r -= alpha * hp
            z = preconditioned(r)
            rz_next = float(r @ z)
            p = z + (rz_next / rz) * p
            rz = rz_next
        return d

    def line_search(self, x: np.ndarray, direction: np.ndarray, gradient: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray] | None:
        """The first halving of the step along the projection arc with Armijo decrease, as
        (new x, H times the move); None when no halving decreases the objective."""
        alpha = 1.0
        for _ in range(MAX_HALVINGS):
            candidate = self.project(x + alpha * direction)
            move = candidate - x
            slope = float(gradient @ move)
            if slope < 0.0:
                curvature = self.hessian(move)
                # the exact change of the quadratic, free of cancellation near the optimum
                decrease = slope + 0.5 * float(move @ curvature)
                if decrease <= ARMIJO * slope:
                    return candidate, curvature
            alpha *= 0.5
        return None


class ShiftedGramSolver:
    """``(H + rho I)^{-1} v`` for ``H = w A^T A`` with A a Kronecker product of small factors:
    ``H = (U_1 kron ... kron U_d) diag(lam) (...)^T`` from the factor Grams' eigenvectors, so
    every shift rho costs two Kronecker products with the eigenvector factors."""

    #: Largest factor (columns) whose Gram is eigendecomposed.
    MAX_FACTOR = 4096

    def __init__(self, vectors: list[np.ndarray], eigenvalues: np.ndarray) -> None:
        self.vectors = _grouped(vectors)
        self.transposed = [u.T.copy() for u in self.vectors]
        self.eigenvalues = eigenvalues
        #: single-precision copies for the ADMM stage on large domains
        self.single = ([u.astype(np.float32) for u in self.vectors],
                       [u.astype(np.float32) for u in self.transposed])
        #: ``1 / (eigenvalues + rho)`` of the last shift (and precision) solved with
        self.inverses: dict[tuple[float, bool], np.ndarray] = {}

    @classmethod
    def of(cls, A: Matrix, weights: np.ndarray) -> ShiftedGramSolver | None:
        """The solver for a Kronecker strategy with one noise level, else None."""
        factors = getattr(A, "factors", None)
        if (factors is None or not weights.size or not np.all(weights == weights[0])
                or any(f.shape[1] > cls.MAX_FACTOR for f in factors)):
            return None
        try:
            grams = [np.asarray(f.gram().dense(), dtype=float) for f in factors]
        except (ValueError, NotImplementedError):
            return None
        vectors, eigenvalues = [], np.ones(1)
        for g in grams:
            lam, u = np.linalg.eigh((g + g.T) / 2.0)
            vectors.append(u)
            eigenvalues = np.kron(eigenvalues, np.maximum(lam, 0.0))
        return cls(vectors, weights[0] * eigenvalues)

    @classmethod
    def of_marginals(cls, shape: Sequence[int], weights: Mapping[tuple[int, ...], float]
                     ) -> ShiftedGramSolver:
        """The solver for ``H = sum_g w_g Q_g^T Q_g``, ``Q_g`` the marginal over the axes g of
        a domain of ``shape`` (weights: g -> w_g, e.g. 1 / the marginal's cell variance).

        Every ``Q_g^T Q_g`` is a Kronecker product of identities (on g) and all-ones matrices,
        so one basis diagonalises them all: per attribute the constant vector and its
        orthogonal complement; a basis vector that is non-constant exactly on the axes S has
        eigenvalue ``sum_{g contains S} w_g prod_{i not in g} n_i``.
        """
        vectors = [np.linalg.qr(np.column_stack([np.ones(n), np.eye(n)[:, :n - 1]]))[0]
                   for n in shape]
        eigenvalues = np.zeros(tuple(shape))
        for axes, w in weights.items():
            index = tuple(slice(None) if i in axes else 0 for i in range(len(shape)))
            eigenvalues[index] += w * math.prod(n for i, n in enumerate(shape)
                                                if i not in axes)
        return cls(vectors, eigenvalues.reshape(-1))

    def apply(self, v: np.ndarray) -> np.ndarray:
        """``H v`` through the eigenbasis."""
        return _kron(self.vectors, _kron(self.transposed, v) * self.eigenvalues)

    def least_squares(self, v: np.ndarray) -> np.ndarray:
        """``H^+ v``: the minimum-norm least-squares solution when v is ``A^T w y``."""
        lam = self.eigenvalues
        top = float(lam.max()) if lam.size else 0.0
        inverse = np.divide(1.0, lam, out=np.zeros_like(lam), where=lam > 1e-12 * top)
        return _kron(self.vectors, _kron(self.transposed, v) * inverse)

    def rho(self) -> float:
        """A shift balancing the spectrum: the geometric mean of its extreme eigenvalues."""
        lam = self.eigenvalues
        top = float(lam.max())
        low = float(lam[lam > 1e-12 * top].min()) if top > 0 else 1.0
        return math.sqrt(low * top) if top > 0 else 1.0

    def solve(self, v: np.ndarray, rho: float) -> np.ndarray:
        """``(H + rho I)^{-1} v``, in single precision when v is single precision."""
        single = v.dtype == np.float32
        vectors, transposed = self.single if single else (self.vectors, self.transposed)
        key = (rho, single)
        if key not in self.inverses:  # ADMM keeps its shift for several iterations
            self.inverses = {key: (1.0 / (self.eigenvalues + rho)).astype(v.dtype)}
        spectral = _kron(transposed, v)
        spectral *= self.inverses[key]
        return _kron(vectors, spectral)


#: Consecutive eigenvector factors are merged (their Kronecker product formed) while the
#: merged factor has at most this many columns: one pass over the cells instead of two for
#: tiny factors (2 x 5). Larger merges cost more arithmetic than the pass they save (on 1e6
#: cells, single precision: six 10 x 10 products 5.3 ms, three 100 x 100 ones 9.3 ms).
GROUPED_COLUMNS = 16


def _grouped(factors: list[np.ndarray]) -> list[np.ndarray]:
    """The same Kronecker product with consecutive small factors multiplied out."""
    grouped: list[np.ndarray] = []
    for u in factors:
        if grouped and grouped[-1].shape[1] * u.shape[1] <= GROUPED_COLUMNS:
            grouped[-1] = np.kron(grouped[-1], u)
        else:
            grouped.append(np.asarray(u, dtype=float))
    return grouped


def _kron(factors: list[np.ndarray], v: np.ndarray) -> np.ndarray:
    """``(F_1 kron ... kron F_d) v`` for dense square factors, in v's precision
    (:func:`engine.linalg.matrix.kmatvec` computes in double precision)."""
    f = v
    for u in reversed(factors):
        f = (u @ f.reshape(-1, u.shape[1]).T).reshape(-1)
    return f


def _admm(problem: _Problem, shifted: ShiftedGramSolver, target: np.ndarray,
          start: np.ndarray, budget: float, tol: float, iterations: int) -> np.ndarray:
    """ADMM on ``min 0.5 x^T H x - target^T x`` with ``x = z``, z feasible; returns the last
    feasible z (double precision). Two products per iteration; over-relaxed (section 3.4.3);
    every ``CHECK_EVERY`` iterations it stops at ``tol`` and the shift is rebalanced when the
    primal and dual residuals drift apart by more than tenfold (Boyd et al. 2011, section
    3.4.1). From ``SINGLE_PRECISION_CELLS`` cells the iterates are single precision (half the
    memory traffic per pass) and the result is put back on the total in double precision."""
    rho = shifted.rho()
    dtype = np.float32 if start.size >= SINGLE_PRECISION_CELLS else np.float64
    target = target.astype(dtype)
    z = start.astype(dtype)
    u = np.zeros_like(z)
    thresholds: list[float] = []
    for iteration in range(1, iterations + 1):
        if problem.products + 2 > budget:
            break
        v = z - u
        v *= rho
        v += target
        x = shifted.solve(v, rho)
        problem.products += 2
        check = iteration % CHECK_EVERY == 0
        solved = x.copy() if check else None
        # over-relaxation: a x + (1 - a) z, then the scaled dual u is added before projecting
        x *= OVER_RELAXATION
        v = z * (1.0 - OVER_RELAXATION)
        x += v
        x += u
        # the threshold moves little between iterations: start Michelot near the last one
        below = (None if len(thresholds) < 2
                 else thresholds[-1] - 2.0 * abs(thresholds[-1] - thresholds[-2]))
        previous, z = z, problem.project(x, below)
        thresholds.append(problem.threshold)
        np.subtract(x, z, out=u)  # u + relaxed - z
        if solved is not None:
            primal = float(np.linalg.norm(solved - z))
            dual = rho * float(np.linalg.norm(z - previous))
            size = max(float(np.linalg.norm(z)), 1e-300)
            if primal <= tol * size and dual <= tol * max(rho * float(np.linalg.norm(u)),
                                                          1e-300):
                break
            if primal > 10.0 * dual:
                rho, u = 2.0 * rho, u / 2.0
            elif dual > 10.0 * primal:
                rho, u = rho / 2.0, u * 2.0
    if z.dtype == np.float64:
        return z
    # back to double precision; the total is restored on the occupied cells only (projecting
    # the whole vector would lift every empty cell by the round-off deficit)
    z = z.astype(float)
    if problem.total is not None:
        occupied = np.flatnonzero(z)
        z[occupied] = simplex_projection(z[occupied], problem.total)
    return z


def _structured_gram(A: Matrix, weights: np.ndarray) -> tuple[Matrix | None, Matrix | None]:
    """``A^T A`` and its pseudo-inverse when the noise is uniform and A has structured ones
    (Kronecker: factor by factor; marginals: closed form); (None, None) otherwise."""
    if weights.size == 0 or not np.all(weights == weights[0]):
        return None, None
    try:
        gram = A.gram()
        return gram, gram.pinv()
    except (ValueError, NotImplementedError):
        return None, None


def simplex_projection(v: np.ndarray, total: float) -> np.ndarray:
    """The Euclidean projection of v onto ``{x >= 0, sum(x) = total}`` (Michelot's algorithm:
    a threshold raised until it is consistent with the cells it keeps; linear passes, no
    sort).

    Example:
        >>> simplex_projection(np.array([2.0, 0.0, 1.0]), 2.0)
        array([1.5, 0. , 0.5])
    """
    v = np.asarray(v)
    v = v.astype(np.result_type(v.dtype, np.float32), copy=False)  # single stays single
    if total == 0:
        return np.zeros_like(v)
    out = v - simplex_threshold(v, total)
    return np.maximum(out, 0.0, out=out)


def simplex_threshold(v: np.ndarray, total: float, below: float | None = None) -> float:
    """The threshold t of the projection ``max(v - t, 0)`` onto ``{x >= 0, sum(x) = total}``
    (total > 0), a Python float (it keeps a single-precision v single).

    Args:
        v: the vector projected.
        total: the sum of the projection.
        below: a guess of a lower bound on t (e.g. the threshold of the previous one of a
            sequence of close projections): Michelot's passes start from the entries above
            it, and from all of them when the result shows the guess was wrong (exact either
            way).
    """
    if below is not None:
        kept = v[v > below]
        if kept.size:
            threshold = _michelot(kept, total)
            # every entry left out is <= below <= threshold: zero in the projection too
            if threshold >= below:
                return threshold
    return _michelot(v, total)


def _michelot(kept: np.ndarray, total: float) -> float:
    """Michelot's threshold over the entries of ``kept`` (the sums accumulate in double)."""
    threshold = (float(kept.sum(dtype=np.float64)) - total) / kept.size
    while True:
        above = kept[kept > threshold]
        if above.size == kept.size:
            return threshold
        kept = above
        threshold = (float(kept.sum(dtype=np.float64)) - total) / kept.size


def round_preserving_total(x: np.ndarray, total: int) -> np.ndarray:
    """Whole non-negative counts within 1 of x that sum exactly to ``total``.

    Largest remainders: every cell gets ``floor(x)``, and the cells with the largest fractional
    parts (ties: the first cell) one more, until the total is reached.

    Args:
        x: non-negative estimates (tiny negative round-off, above -1e-9, counts as zero).
        total: the whole count the result sums to, between ``sum(floor(x))`` and
            ``sum(floor(x)) + len(x)``.

    Returns:
        int64 counts, each ``floor(x)`` or ``floor(x) + 1``.

    Raises:
        SpecError: a negative estimate, or a total that cannot be reached within 1 of x.
    """
    x = np.asarray(x, dtype=float).reshape(-1)
    if x.size and not (float(x.min()) >= -1e-9 and math.isfinite(float(x.max()))):
        raise SpecError("estimate: rounding needs finite non-negative values")
    # only the positive cells have a floor or a fraction: on a sparse estimate the work is
    # on them, not on the whole domain
    support = np.flatnonzero(x > 0.0)
    values = x[support]
    floors = np.floor(values)
    fractions = values - floors
    counts = np.zeros(x.size, dtype=np.int64)
    counts[support] = floors.astype(np.int64)
    floor_sum = int(counts[support].sum())
    missing = int(total) - floor_sum
    if missing < 0 or missing > x.size:
        raise SpecError(f"total: {int(total):,} cannot be reached by rounding each value "
                        f"within 1 (the floors sum to {floor_sum:,} over "
                        f"{x.size:,} cells)")
    if missing:
        # the largest fractions (ties: the first cell); only cells with a fraction compete,
        # which keeps the sort small on sparse estimates
        with_fraction = fractions > 0.0
        candidates = support[with_fraction]
        if missing >= candidates.size:
            counts[candidates] += 1
            whole = np.ones(x.size, dtype=bool)  # cells without a fraction, in cell order
            whole[candidates] = False
            counts[np.flatnonzero(whole)[:missing - candidates.size]] += 1
        else:
            competing = fractions[with_fraction]
            keep = competing.size - missing
            cut = np.partition(competing, keep)[keep]  # the smallest fraction rounded up
            above = candidates[competing > cut]
            counts[above] += 1
            counts[candidates[competing == cut][:missing - above.size]] += 1
    return counts


def largest_remainder_rows(x: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Whole counts row by row: every cell of row ``g`` of ``x`` (a 2-D array) gets its floor,
    and the cells with the largest fractional parts (ties: the first cell) one more, until the
    row reaches ``targets[g]`` (no cell gets more than one: a row that needs more than its
    width, or less than its floors, is left short or over).

    Returns:
        int64 array of ``x``'s shape.

    Example:
        >>> largest_remainder_rows(np.array([[0.4, 1.6], [2.5, 0.5]]), np.array([2, 3])).tolist()
        [[0, 2], [3, 0]]
    """
    x = np.asarray(x, dtype=float)
    floors = np.floor(x)
    missing = np.asarray(targets, dtype=np.int64).reshape(-1) - floors.sum(axis=1).astype(np.int64)
    order = np.argsort(-(x - floors), axis=1, kind="stable")
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.broadcast_to(np.arange(x.shape[1]), order.shape), axis=1)
    return floors.astype(np.int64) + (rank < missing[:, None])
