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

Large single residuals (issue 19.3: affine / abs_diff over two attributes of 128-256 values,
16k-65k cells, rank 2n - 3) use their structure three ways, none of which changes the
optimum: (1) the Newton phase starts on the nearly active cells (for affine the grid's
boundary) rather than on every cell still carrying weight; (2) the grid's reflections and
axis swaps that leave G unchanged are detected, and the Newton variables are one weight per
orbit (the concave dual is invariant, so a symmetric optimum exists), with Hessian pairs of
different symmetry types skipped; (3) a Gram in class form (``ClassFactor``: the cells see
the queries only through a statistic such as ``a + b``) is evaluated through its sparse
incidence, O(c + m' r^2) per dual evaluation instead of O(c r^2).

Example (spec R6, the centred prefix workload on 8 cells):
    >>> import numpy as np
    >>> n = 8
    >>> C = np.eye(n) - 1.0 / n
    >>> P = np.tril(np.ones((n, n)))
    >>> round(solve_optimal(C @ P.T @ P @ C).loss, 8)
    6.76607344
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.linalg as sla
from scipy import sparse
from scipy.sparse import csgraph

from engine.progress import Progress, report

#: Relative eigenvalue below which a direction of G counts as outside its range.
RANGE_RCOND = 1e-12
#: Exponent of the multiplicative update (1 is the classical fixed point; 1.5 is faster).
RHO = 1.5
#: The Newton phase starts once the gap is below this or after this many fixed-point steps.
NEWTON_GAP, NEWTON_AFTER = 1e-3, 100
#: Budget of one Newton step in Hessian multiply-adds, ``(orbits**2 + support) * r(r+1)/2``
#: (orbits: of the support under the symmetries of G); larger supports keep to the fixed point.
NEWTON_FLOPS = 2e10
#: Floor (times the uniform weight 1/c) of a support weight entering the Newton phase.
SUPPORT_CUTOFF = 1e-6
#: The Newton phase starts on the cells whose d is within this fraction of the current slack
#: ``max d / trm - 1`` below the largest.
SUPPORT_SLACK = 0.1
#: A Newton-phase orbit leaves the face when its d is this fraction below ``sum sqrt e`` and
#: its weight below ``LEAVE_WEIGHT / c`` (it rejoins once active again).
LEAVE_SLACK, LEAVE_WEIGHT = 1e-3, 1e-3
#: Grid symmetries tried per solve (axis swaps times reflections).
SYMMETRY_CANDIDATES = 48
#: Entries of one chunk of eigenvector-pair products in the Hessian.
HESSIAN_CHUNK = 4e6
#: Newton steps before giving the fixed point another go.
NEWTON_STEPS = 200
#: Fixed-point steps between two looks for an affordable Newton support.
NEWTON_RECHECK = 50
#: Smallest Gram (cells) whose dual is split into blocks by commuting grid symmetries.
ADAPTED_MIN_CELLS = 256
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
    """Evaluates the dual at lambda for ``G = A A^T`` (A: c x r, orthogonal columns whose
    squared norms are ``w``)."""

    def __init__(self, A: np.ndarray, w: np.ndarray) -> None:
        self.A, self.w = A, w

    @property
    def shape(self) -> tuple[int, int]:
        """``(c, r)``: cells and rank."""
        return self.A.shape

    def weighted_gram(self, lam: np.ndarray) -> np.ndarray:
        """``K = A^T diag(lambda) A`` (r x r)."""
        return (self.A.T * lam) @ self.A

    def row_norms(self, T: np.ndarray) -> np.ndarray:
        """``d_i = ||a_i T||^2`` for every row a_i of A (T: r x r)."""
        Bu = self.A @ T
        return np.einsum("ij,ij->i", Bu, Bu)

    def rows(self, idx: np.ndarray) -> np.ndarray:
        """Rows ``A[idx]``."""
        return self.A[idx]

    def matrix(self) -> np.ndarray:
        """A itself (c x r)."""
        return self.A

    def apply_gram(self, z: np.ndarray) -> np.ndarray:
        """``G z``."""
        return self.matrix() @ (self.matrix().T @ z)

    def evaluate(self, lam: np.ndarray) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
        """``(sum sqrt e, d, e, Q)`` at lambda."""
        K = self.weighted_gram(lam)
        e, Q = sla.eigh((K + K.T) / 2.0, driver="evd")
        e = np.maximum(e, 1e-300)
        d = self.row_norms(Q * e**-0.25)
        return float(np.sqrt(e).sum()), d, e, Q

    def hessian(self, cells: np.ndarray, orbit: np.ndarray, orbits: int, e: np.ndarray,
                Q: np.ndarray) -> np.ndarray:
        """Hessian of ``tr(K^{1/2})`` in the orbit weights (negative semi-definite).

        ``cells`` are the support's cells and ``orbit[j]`` the (0-based) orbit of
        ``cells[j]``; lambda is constant on orbits. With ``b_i = Q^T a_i``,
        ``X_o = sum_{i in o} b_i b_i^T`` and ``Gamma`` the divided differences of ``x^{-1/2}``
        at the eigenvalues, ``H_op = 1/2 sum_kl Gamma_kl (X_o)_kl (X_p)_kl``. Eigenvector
        pairs (k, l) with ``(X_o)_kl = 0`` on every orbit (pairs of different symmetry
        types) are found by one random orbit combination and skipped.
        """
        B = self.rows(cells) @ Q
        r = B.shape[1]
        s = np.sqrt(e)
        gamma = -1.0 / (s[:, None] * s[None, :] * (s[:, None] + s[None, :]))
        row, col = np.triu_indices(r)
        weight = np.where(row == col, gamma[row, col], 2.0 * gamma[row, col])
        probe = (B.T * np.random.default_rng(0).uniform(0.5, 1.5, orbits)[orbit]) @ B
        mass = np.abs(probe[row, col])
        live = mass > 1e-12 * float(mass.max())
        flat, weight = row[live] * r + col[live], weight[live]
        # members of each orbit side by side (zero rows pad the smaller orbits)
        order = np.argsort(orbit, kind="stable")
        count = np.bincount(orbit, minlength=orbits)
        starts = np.concatenate(([0], np.cumsum(count)[:-1]))
        slot = np.arange(len(cells)) - starts[orbit[order]]
        padded = np.zeros((orbits, int(count.max()), r))
        padded[orbit[order], slot] = B[order]
        Y = np.empty((orbits, len(flat)))
        step = max(1, int(HESSIAN_CHUNK // (r * r)))
        for lo in range(0, orbits, step):
            part = padded[lo:lo + step]
            Y[lo:lo + step] = np.matmul(part.transpose(0, 2, 1), part).reshape(
                len(part), r * r)[:, flat]
        return 0.5 * ((Y * weight) @ Y.T)


class _AdaptedDual(_Dual):
    """The dual when commuting grid symmetries leave G unchanged (see ``_adapted_dual``):
    A's columns are grouped by symmetry type, so for weights constant on the orbits
    ``K = A^T diag(lambda) A`` is block diagonal and one evaluation is one eigh per block
    (four blocks of c / 4 for the swap and the joint reflection of a two-attribute residual:
    about 16 times less work than one eigh of c). The weights are averaged over the orbits
    first: the dual is invariant under the symmetries and concave, so this never lowers it,
    and the evaluation stays exact."""

    def __init__(self, A: np.ndarray, w: np.ndarray, blocks: list[slice],
                 orbit: np.ndarray) -> None:
        super().__init__(A, w)
        self.blocks, self.orbit = blocks, orbit
        self.count = np.bincount(orbit)

    def evaluate(self, lam: np.ndarray) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
        lam = (np.bincount(self.orbit, lam) / self.count)[self.orbit]
        r = self.A.shape[1]
        Q = np.zeros((r, r))
        d = np.zeros(self.A.shape[0])
        parts = []
        for block in self.blocks:
            Ab = self.A[:, block]
            K = (Ab.T * lam) @ Ab
            e, q = sla.eigh((K + K.T) / 2.0, driver="evd")
            e = np.maximum(e, 1e-300)
            Q[block, block] = q
            Bu = Ab @ (q * e**-0.25)
            d += np.einsum("ij,ij->i", Bu, Bu)
            parts.append(e)
        e = np.concatenate(parts)
        return float(np.sqrt(e).sum()), d, e, Q


class _GridDual(_Dual):
    """The dual for a residual factor with few distinct cell classes (affine, abs_diff).

    ``A = sum_j coef_j F[index_j]``: every row of A is a signed sum of a few rows of a small
    matrix F (m' x r), e.g. for a two-attribute residual of queries that depend on a
    statistic of the cell (``a + b``), ``A_ab = f_{s(a,b)} - u_a - v_b + w`` (the class row
    and the centring means). The weighted Gram is ``F^T (P^T diag(lambda) P) F`` with the
    sparse c x m' incidence P, and ``d`` needs only the m' x m' matrix ``F T T^T F^T``, so a
    dual evaluation costs O(c + m' r^2) instead of O(c r^2).
    """

    def __init__(self, incidence: sparse.csr_matrix, index: np.ndarray, coef: np.ndarray,
                 F: np.ndarray) -> None:
        self.P, self.index, self.coef = incidence, index, coef
        PtP = (incidence.T @ incidence).tocsr()
        K = F.T @ (PtP @ F)
        w, V = np.linalg.eigh((K + K.T) / 2.0)
        keep = w > RANGE_RCOND * w.max()
        self.F, self.w = F @ V[:, keep], w[keep]
        self._A: np.ndarray | None = None

    @property
    def shape(self) -> tuple[int, int]:
        return self.P.shape[0], self.F.shape[1]

    def weighted_gram(self, lam: np.ndarray) -> np.ndarray:
        N = (self.P.T @ sparse.diags(lam) @ self.P).tocsr()
        return self.F.T @ (N @ self.F)

    def row_norms(self, T: np.ndarray) -> np.ndarray:
        W = self.F @ T
        H = W @ W.T
        d = np.zeros(self.P.shape[0])
        slots = len(self.coef)
        for j in range(slots):
            for k in range(j, slots):
                factor = self.coef[j] * self.coef[k] * (1.0 if j == k else 2.0)
                d += factor * H[self.index[j], self.index[k]]
        return d

    def rows(self, idx: np.ndarray) -> np.ndarray:
        return self.P[idx] @ self.F

    def matrix(self) -> np.ndarray:
        if self._A is None:
            self._A = self.P @ self.F
        return self._A

    def apply_gram(self, z: np.ndarray) -> np.ndarray:
        return self.P @ (self.F @ (self.F.T @ (self.P.T @ z)))


@dataclass(frozen=True)
class ClassFactor:
    """A residual Gram ``G = sum_p A_p A_p^T`` whose pieces have few distinct cell classes.

    Piece p is ``A_p = (kron_i C_{n_i}) P_p R_p``: every cell x of the residual's grid (C
    order, axis sizes ``sizes``) carries the row ``R_p[labels_p[x]]`` of a small matrix
    before centring, e.g. the affine queries ``a + b <= t`` see a cell only through ``a + b``
    (2n - 1 classes for n^2 cells). Centring adds, for every proper subset T of the axes, the
    means of those rows over the cells that agree on T, so each row of ``A_p`` is a signed
    sum of ``2**len(sizes)`` rows of a matrix with ``classes + sum_T prod_{i in T} n_i`` rows
    (two axes: ``classes + n_a + n_b + 1``).

    Attributes:
        sizes: the residual's axis sizes.
        pieces: per piece ``(labels, rows)``: ``labels`` (c,) ints in ``[0, m)`` and
            ``rows`` (m x k), already scaled so that the pieces' Grams add up to G.
    """

    sizes: tuple[int, ...]
    pieces: tuple[tuple[np.ndarray, np.ndarray], ...]

    def incidence(self) -> tuple[sparse.csr_matrix, np.ndarray, np.ndarray, np.ndarray]:
        """``(P, index, coef, F)`` with ``A = P F`` and ``A_x = sum_j coef_j F[index_j[x]]``
        (``index``: slots x c; P: c x m' sparse; F: m' x k)."""
        c = math.prod(self.sizes)
        grid = np.indices(self.sizes).reshape(len(self.sizes), c)
        blocks, index, coef = [], [], []
        offset = col = 0
        widths = [rows.shape[1] for _, rows in self.pieces]
        for (labels, rows), width in zip(self.pieces, widths, strict=True):
            m = rows.shape[0]
            for keep in _subsets(len(self.sizes)):
                if len(keep) == len(self.sizes):
                    slot, feats = labels, rows
                else:
                    shape = tuple(self.sizes[a] for a in keep)
                    slot = (np.ravel_multi_index(grid[list(keep)], shape) if keep
                            else np.zeros(c, dtype=np.int64))
                    groups = math.prod(shape)
                    counts = np.bincount(slot * m + labels, minlength=groups * m)
                    means = counts.reshape(groups, m) / (c // groups)
                    feats = means @ rows
                block = np.zeros((feats.shape[0], sum(widths)))
                block[:, col:col + width] = feats
                blocks.append(block)
                index.append(slot + offset)
                coef.append((-1.0) ** (len(self.sizes) - len(keep)))
                offset += feats.shape[0]
            col += width
        index_arr, coef_arr = np.array(index), np.array(coef)
        slots = len(coef_arr)
        P = sparse.csr_matrix((np.repeat(coef_arr, c), (np.tile(np.arange(c), slots),
                                                         index_arr.ravel())),
                              shape=(c, offset))
        return P, index_arr, coef_arr, np.vstack(blocks)


def _subsets(k: int) -> list[tuple[int, ...]]:
    """Every subset of ``range(k)`` (as sorted tuples)."""
    return [tuple(a for a in range(k) if mask >> a & 1) for mask in range(2**k)]


class BestSeen:
    """The best feasible primal point and the best dual bound seen while solving Eq. 4.

    Every dual evaluation at weights ``lam`` gives ``trm = sum sqrt(e)`` (its square is a
    lower bound on the loss) and the per-cell slack ``d``; the primal point built from it is
    feasible after scaling by ``max d``, with loss ``trm * max d`` (an upper bound). Both the
    fixed point and the Newton phases (here and in :mod:`.symmetry`) report each evaluation
    to :meth:`record`.
    """

    def __init__(self) -> None:
        self.upper = math.inf  #: the best (lowest) primal loss, in units of the scaled Gram
        self.lower = 0.0  #: the best (highest) dual bound
        self.best: tuple[Any, Any, float] | None = None  #: ``(e, Q, max d)`` of the best point

    @property
    def width(self) -> float:
        """``upper - lower``: how far apart the two bounds still are."""
        return self.upper - self.lower

    def record(self, trm: float, d: np.ndarray, e: Any, Q: Any) -> float:
        """Take one evaluation into account; returns the relative gap ``width / upper``."""
        self.lower = max(self.lower, trm**2)
        upper = trm * float(d.max())
        if upper < self.upper:
            self.upper, self.best = upper, (e, Q, float(d.max()))
        return self.width / self.upper


class FixedPoint:
    """The multiplicative fixed point on Eq. 4's dual weights, ``w <- w (d / trm)**RHO``
    renormalised to the simplex, with the bounds it has seen (:class:`BestSeen`).

    ``evaluate(weights)`` returns ``(trm, d, e, Q)`` (see :meth:`BestSeen.record`). Both Eq. 4
    solvers (here and in :mod:`.symmetry`) run these steps before their Newton phases.
    """

    def __init__(self, evaluate: Callable[[np.ndarray], tuple[float, np.ndarray, Any, Any]],
                 weights: np.ndarray) -> None:
        self.evaluate = evaluate
        self.seen = BestSeen()
        self.iterations = 0  #: fixed-point steps taken
        self.stalled = 0  #: consecutive steps without a 0.1 % narrower gap
        self.at(weights)

    def at(self, weights: np.ndarray) -> None:
        """Evaluate the dual at ``weights`` (the start, or where a Newton phase ended)."""
        self.weights = weights
        self.trm, self.d, e, Q = self.evaluate(weights)
        self.gap = self.seen.record(self.trm, self.d, e, Q)  #: relative gap, best so far

    def step(self) -> None:
        """One multiplicative update and its evaluation."""
        previous = self.seen.width
        weights = self.weights * (self.d / self.trm) ** RHO
        self.at(weights / weights.sum())
        self.iterations += 1
        self.stalled = self.stalled + 1 if self.seen.width >= previous * (1.0 - 1e-3) else 0

    def running(self, tol: float, steps_left: int) -> bool:
        """Whether to go on: gap above ``tol``, steps left, and not stalled."""
        return self.gap > tol and steps_left > 0 and self.stalled < STALL_STEPS


def solve_optimal(G: np.ndarray | None, tol: float = 1e-10, max_iter: int = 20_000,
                  progress: Progress | None = None, label: str = "",
                  factor: np.ndarray | None = None, grid: Sequence[int] | None = None,
                  classes: ClassFactor | None = None) -> OptimalSolution:
    """Certified optimum of Eq. 4 for a PSD Gram ``G`` (explicit, as ``factor`` or as
    ``classes``).

    Args:
        G: the sub-workload Gram ``W^T D W`` (c x c, symmetric PSD, not all zero); None when
            ``factor`` or ``classes`` is given.
        tol: stop when the certified relative gap is below this.
        max_iter: cap on multiplicative iterations plus Newton steps.
        progress: receives ``(iteration, current loss, label)`` every few iterations; its
            cancel() stops the solve with ``Cancelled``.
        label: message passed to progress.
        factor: a c x k matrix F with ``G = F F^T`` instead of G (e.g. the transposed
            sub-queries): low-rank Grams never need their c x c form (spec App. D, 1).
        grid: the axis sizes of the residual (C order, product = c). With it the solver
            looks for the grid's reflections and axis swaps that leave G unchanged and
            solves the Newton phase on their orbits (the dual is concave and invariant
            under them, so some optimal weights are constant on orbits).
        classes: G in the class form of ``ClassFactor`` (its ``sizes`` serve as ``grid``):
            every dual evaluation then costs O(c + m' r^2) instead of O(c r^2).

    Returns:
        The best feasible strategy found, its loss and the dual lower bound.
    """
    dual: _Dual
    adapted: _AdaptedDual | None = None
    if classes is not None:
        P, index, coef, F = classes.incidence()
        dual = _GridDual(P, index, coef, F)
        scale = float(dual.w.sum())
        if not scale > 0:
            raise ValueError("solve_optimal: the Gram matrix is zero")
        dual.F, dual.w = dual.F / math.sqrt(scale), dual.w / scale
        grid = classes.sizes
    else:
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
            G = G / scale
            perms = (_symmetries(lambda z: G @ z, G.shape[0], tuple(grid))
                     if grid is not None and G.shape[0] >= ADAPTED_MIN_CELLS else [])
            adapted = _adapted_dual(G, perms)
            if adapted is None:
                w, U = np.linalg.eigh(G)
        if adapted is not None:
            dual = adapted
        else:
            keep = w > RANGE_RCOND * w.max()
            dual = _Dual(U[:, keep] * np.sqrt(w[keep]), w[keep])
    c, r = dual.shape
    if isinstance(dual, _AdaptedDual):
        orbit = dual.orbit
    else:
        orbit = _orbits(dual, tuple(grid)) if grid is not None else np.arange(c)
    solve = FixedPoint(dual.evaluate, np.full(c, 1.0 / c))
    seen = solve.seen
    newton_steps = 0
    pairs = r * (r + 1) / 2
    # a support spans range(G), so it has at least r cells in at least r / (largest orbit)
    # orbits: when even that is over budget, the Newton phase is never affordable
    largest = int(np.bincount(orbit).max())
    newton_tried = ((r / largest) ** 2 + r) * pairs > NEWTON_FLOPS
    next_look = 0
    while solve.running(tol, max_iter - solve.iterations - newton_steps):
        if not newton_tried and solve.iterations >= next_look and (
                solve.gap < NEWTON_GAP or solve.iterations >= NEWTON_AFTER):
            support = _support(dual, solve.d, solve.trm)
            orbits = len(np.unique(orbit[support]))
            next_look = solve.iterations + NEWTON_RECHECK
            if (orbits * orbits + len(support)) * pairs <= NEWTON_FLOPS:
                newton_tried = True
                lam, steps = _barrier_newton(dual, solve.weights, support, orbit, seen.record,
                                             tol, min(NEWTON_STEPS, max_iter), progress, label)
                newton_steps += steps
                solve.at(lam)
                continue
        solve.step()
        if solve.iterations % 10 == 0:
            report(progress, solve.iterations + newton_steps, seen.upper * scale, label)
    assert seen.best is not None
    e, Q, dmax = seen.best
    # B = e^{-1/4} Q^T A^T / sqrt(dmax) and its pseudo-inverse A w^{-1} Q e^{1/4} sqrt(dmax)
    A = dual.matrix()
    basis = ((A @ (Q * e**-0.25)) / math.sqrt(dmax)).T
    pinv_half = (A / dual.w) @ (Q * e**0.25)
    # V does not depend on the scale of G; only the loss does.
    return OptimalSolution(basis=basis, basis_pinv=pinv_half * math.sqrt(dmax),
                           loss=seen.upper * scale,
                           lower=seen.lower * scale, iterations=solve.iterations,
                           newton_steps=newton_steps)


def _orbits(dual: _Dual, sizes: tuple[int, ...]) -> np.ndarray:
    """Orbit label of every cell under the grid symmetries that leave G unchanged.

    Compositions of symmetries are symmetries, so the orbits of the group they generate are
    the connected components of the graph ``x -- pi(x)``.
    """
    return _orbit_labels(dual.shape[0], _symmetries(dual.apply_gram, dual.shape[0], sizes))


def _orbit_labels(c: int, perms: list[np.ndarray]) -> np.ndarray:
    """Connected components of ``x -- pi(x)`` over the permutations (one label per cell)."""
    if not perms:
        return np.arange(c)
    src = np.tile(np.arange(c), len(perms))
    graph = sparse.csr_matrix((np.ones(len(src)), (src, np.concatenate(perms))), shape=(c, c))
    return csgraph.connected_components(graph, directed=False)[1]


def _symmetries(apply_gram: Callable[[np.ndarray], np.ndarray], c: int,
                sizes: tuple[int, ...]) -> list[np.ndarray]:
    """The grid symmetries (cell permutations) that leave G unchanged.

    Candidates are the axis permutations among equal sizes combined with reflections of any
    axes (at most ``SYMMETRY_CANDIDATES`` of them); each is tested on random vectors
    (``G P z = P G z``).
    """
    if math.prod(sizes) != c or len(sizes) == 0:
        return []
    cells = np.arange(c).reshape(sizes)
    k = len(sizes)
    perms = [p for p in itertools.permutations(range(k))
             if all(sizes[p[a]] == sizes[a] for a in range(k))]
    candidates = []
    for p in perms:
        for flips in itertools.product((False, True), repeat=k):
            if p == tuple(range(k)) and not any(flips):
                continue
            t = np.transpose(cells, p)
            for a in range(k):
                if flips[a]:
                    t = np.flip(t, axis=a)
            candidates.append(t.ravel())
            if len(candidates) >= SYMMETRY_CANDIDATES:
                break
    z = np.random.default_rng(0).standard_normal((c, 2))
    Gz = apply_gram(z)
    tol = 1e-9 * float(np.abs(Gz).max())
    return [pi for pi in candidates if np.abs(apply_gram(z[pi]) - Gz[pi]).max() <= tol]


def _adapted_dual(G: np.ndarray, perms: list[np.ndarray]) -> _AdaptedDual | None:
    """The dual of G in a basis of joint eigenvectors of commuting involutive symmetries.

    For commuting involutions ``g_1..g_m`` and signs ``s``, ``v = sum_T (prod_{k in T} s_k)
    e_{g_T(x)}`` (T over the subsets, ``g_T`` their composition) is a joint eigenvector with
    eigenvalues s, or zero; one per orbit representative x and sign vector gives an
    orthonormal basis, block by sign vector. G commutes with every g, so it is block
    diagonal there, and ``A = S_s U_s w_s^(1/2)`` per block (``S_s^T G S_s = U_s w U_s^T``)
    has orthogonal columns with ``A A^T = G``. None without such symmetries (or when they do
    not commute: the dihedral group of a square grid).
    """
    c = G.shape[0]
    identity = np.arange(c)
    if not perms or len(perms) > 4 or any(not np.array_equal(p[p], identity) for p in perms):
        return None
    if any(not np.array_equal(p[q], q[p]) for p, q in itertools.combinations(perms, 2)):
        return None
    orbit = _orbit_labels(c, perms)
    reps = np.unique(orbit, return_index=True)[1]
    elements = []
    for subset in _subsets(len(perms)):
        g = identity
        for k in subset:
            g = perms[k][g]
        elements.append((subset, g[reps]))
    columns, weights, blocks = [], [], []
    rows = np.concatenate([cells for _, cells in elements])
    cols = np.tile(np.arange(len(reps)), len(elements))
    for signs in itertools.product((1.0, -1.0), repeat=len(perms)):
        vals = np.repeat([math.prod(signs[k] for k in subset) for subset, _ in elements],
                         len(reps))
        S = sparse.csc_matrix((vals, (rows, cols)), shape=(c, len(reps)))
        S.eliminate_zeros()
        norms = np.sqrt(np.asarray(S.multiply(S).sum(axis=0))).ravel()
        live = np.flatnonzero(norms > 0.5)
        if len(live) == 0:
            continue
        S = S[:, live] @ sparse.diags(1.0 / norms[live])
        GS = (S.T @ G).T  # G S (G symmetric), dense c x k
        w, U = np.linalg.eigh(S.T @ GS)
        columns.append(S @ (U * np.sqrt(np.maximum(w, 0.0))))
        weights.append(w)
    w = np.concatenate(weights)
    keep = w > RANGE_RCOND * w.max()
    start = 0
    kept_columns = []
    for block_w, A in zip(weights, columns, strict=True):
        mask = block_w > RANGE_RCOND * w.max()
        if mask.any():
            blocks.append(slice(start, start + int(mask.sum())))
            start += int(mask.sum())
            kept_columns.append(A[:, mask])
    return _AdaptedDual(np.hstack(kept_columns), w[keep], blocks, orbit)


def _support(dual: _Dual, d: np.ndarray, trm: float) -> np.ndarray:
    """Cells that are nearly active, where the Newton phase starts.

    At the optimum ``d_i = sum sqrt e`` wherever ``lambda_i > 0`` and ``d_i <= sum sqrt e``
    elsewhere, and ``sum_i lambda_i (max d - d_i) = max d - sum sqrt e``, so cells whose d lies
    well below the others carry little weight. The support is the cells within
    ``SUPPORT_SLACK`` times the current slack ``max d / trm - 1`` of the top, widened fourfold
    until their rows span range(G) (an optimal K has full rank); cells left out rejoin the
    Newton phase once they become active.
    """
    c, r = dual.shape
    slack = max(float(d.max()) / trm - 1.0, 1e-12)
    width = SUPPORT_SLACK
    while True:
        support = np.flatnonzero(d >= trm * (1.0 - width * slack))
        if len(support) >= r:
            inside = np.zeros(c)
            inside[support] = 1.0
            e = np.linalg.eigvalsh(dual.weighted_gram(inside))
            if e[0] > 1e-10 * e[-1]:
                return support
        if len(support) == c:
            return support
        width *= 4.0


def _barrier_newton(dual: _Dual, lam: np.ndarray, support: np.ndarray, orbit: np.ndarray,
                    record: Callable[[float, np.ndarray, np.ndarray, np.ndarray], float],
                    tol: float, max_steps: int, progress: Progress | None, label: str
                    ) -> tuple[np.ndarray, int]:
    """Newton's method for the dual on the simplex face S, with a log barrier when needed.

    The weights are kept constant on the orbits of ``orbit`` (symmetries of G), so the
    variables are one weight per orbit of S. Each step first tries the plain Newton step
    (quadratic convergence at non-degenerate optima, such as the centred prefix of R6) and
    keeps it when it halves the primal-dual gap ``max(d) / sum(sqrt e) - 1``; otherwise it
    takes a damped Newton step on ``f(lambda) + tau sum_S log(lambda_i)``, whose barrier keeps
    the weights positive and regularises the flat directions of degenerate optima. ``tau``
    shrinks tenfold whenever the iterate is centred. Orbits outside S that become active
    join S. Stops at the tolerance, or after ten steps without a 0.1 % better certificate
    (rounding floor).

    Returns:
        The last weights and the number of Newton steps.
    """
    c = len(lam)
    orbit = np.unique(orbit, return_inverse=True)[1].ravel()
    count = np.bincount(orbit).astype(float)
    orbits = len(count)

    def spread(theta: np.ndarray) -> np.ndarray:
        return theta[orbit]

    def per_orbit(x: np.ndarray) -> np.ndarray:
        return np.bincount(orbit, weights=x, minlength=orbits) / count

    inside = np.zeros(orbits, dtype=bool)
    inside[orbit[support]] = True
    theta = np.where(inside, np.maximum(per_orbit(lam), SUPPORT_CUTOFF * 1e-3 / c), 0.0)
    theta /= float(theta @ count)
    lam = spread(theta)
    trm, d, e, Q = dual.evaluate(lam)
    best = record(trm, d, e, Q)
    tau = max(float(d.max()) / trm - 1.0, 1e-8) * trm / (2.0 * float(count[inside].sum()))
    since_best = 0
    step_count = 0
    for step_count in range(1, max_steps + 1):  # noqa: B007 -- returned below
        S = np.flatnonzero(inside)
        theta_s, size = theta[S], count[S]
        local = np.full(orbits, -1)
        local[S] = np.arange(len(S))
        cells = np.flatnonzero(inside[orbit])
        gap_here = float(d.max()) / trm - 1.0
        M = -dual.hessian(cells, local[orbit[cells]], len(S), e, Q)
        g = per_orbit(d)[S] * size / 2.0
        accepted = None
        plain = _kkt_step(M, g, size, 1e-12 * float(np.diag(M).max(initial=1.0)) + 1e-300)
        if plain is not None:
            new = theta.copy()
            new[S] = np.maximum(theta_s + plain, 0.0)
            new /= float(new @ count)
            out = dual.evaluate(spread(new))
            if out[0] > trm * (1.0 - 1e-12) and float(out[1].max()) / out[0] - 1.0 \
                    < 0.5 * gap_here:
                accepted = (new, out, True)
                inside &= new > 0  # weights the step zeroed leave the face (may rejoin)
        if accepted is None:
            M[np.diag_indices_from(M)] += tau * size / theta_s**2
            delta = _kkt_step(M, g + tau * size / theta_s, size, 0.0)
            if delta is None:
                break
            decrement = float(delta @ (M @ delta))
            shrinking = delta < 0
            t_max = min(1.0, 0.99 * float(np.min(-theta_s[shrinking] / delta[shrinking]))) \
                if shrinking.any() else 1.0
            merit = trm + tau * float(size @ np.log(theta_s))
            slope = float((g + tau * size / theta_s) @ delta)
            t = t_max
            while True:
                new = theta.copy()
                new[S] = theta_s + t * delta
                out = dual.evaluate(spread(new))
                if out[0] + tau * float(size @ np.log(new[S])) >= merit + 1e-4 * t * slope \
                        or t < 1e-12:
                    break
                t /= 2.0
            accepted = (new, out, decrement < 0.25 * tau * len(S) or t == t_max == 1.0)
        theta, (trm, d, e, Q), centred = accepted
        d_orbit = np.full(orbits, -np.inf)
        np.maximum.at(d_orbit, orbit, d)
        joining = np.flatnonzero(~inside & (d_orbit > trm * (1.0 + 1e-12)))
        leaving = np.flatnonzero(inside & (d_orbit < trm * (1.0 - LEAVE_SLACK))
                                 & (theta * c < LEAVE_WEIGHT))
        if len(joining) or len(leaving):
            inside[joining] = True
            theta[joining] = tau / trm
            inside[leaving] = False
            theta[leaving] = 0.0
            theta /= float(theta @ count)
            trm, d, e, Q = dual.evaluate(spread(theta))
        gap = record(trm, d, e, Q)
        report(progress, step_count, float("nan"), label)
        since_best = 0 if gap < best * (1.0 - 1e-3) else since_best + 1
        best = min(best, gap)
        if gap <= tol or since_best >= 10:
            break
        if centred:
            tau *= 0.1
    return spread(theta), step_count


def _kkt_step(M: np.ndarray, g: np.ndarray, a: np.ndarray, ridge: float) -> np.ndarray | None:
    """The step D maximising ``g.D - D.M.D / 2`` subject to ``a.D = 0``
    (``D = M^-1 (g - nu a)``), or None when ``M + ridge I`` is not positive definite."""
    M = M.copy()
    M[np.diag_indices_from(M)] += ridge
    try:
        factor = sla.cho_factor(M, lower=True, check_finite=False)
    except np.linalg.LinAlgError:
        return None
    Mg = sla.cho_solve(factor, g, check_finite=False)
    Ma = sla.cho_solve(factor, a, check_finite=False)
    return Mg - (float(a @ Mg) / float(a @ Ma)) * Ma
