"""OPT_0: the best strategy for an explicit workload Gram ``V = W^T W`` (HDMM section 4).

The objective is the unit-noise expected error ``C_K(A) = ||A||_K**2 tr[(A^T A)^+ V]``
(K = 1 for Laplace, 2 for Gaussian/zCDP noise). Two strategy families, one per norm:

* **Laplace, p-Identity** ``A(Theta) = [I; Theta] D`` with ``Theta >= 0`` (p x n) and D
  scaling every column to L1 norm 1. The objective and its exact gradient cost O(p n**2):
  the only product with an n x n matrix is ``(Theta S) V`` (spec section 3.3, with the
  Woodbury algebra rearranged so that ``K C K`` is never formed), and that product is
  O(p n) when V is semiseparable (prefixes, all ranges: :class:`WorkloadGram`). A
  bound-constrained L-BFGS (:mod:`~engine.mechanisms.hdmm.nonneg_lbfgs`) from seeded starts
  smoothed through the workload (:func:`pidentity_start`), screened at a moderate tolerance
  while they fit a work budget and until the best two agree, then the best one polished.
* **Gaussian, convex** ``min tr[X^-1 V]`` over ``diag X = 1`` (``X = A^T A``). It is solved
  through its Lagrange dual ``max_lambda 2 tr[(F^T Lambda F)^(1/2)] - sum lambda`` (``V =
  F F^T``), started from the multipliers that satisfy the optimality condition
  ``Lambda = X^-1 V X^-1`` at the SVD-bound strategy ``X0 ~ V^(1/2)``. Every dual iterate
  gives a primal X with unit diagonal whose error is an upper bound, the dual value a lower
  bound; the loop stops on a certified relative gap (default 1e-7), usually after 5-10
  eigendecompositions. The strategy is the Cholesky factor ``A = L^T`` of the best X.
  Rank-deficient V (e.g. width-k ranges) is handled exactly: multipliers may reach 0 (the
  unit-diagonal constraint becomes ``diag X <= 1`` there) and the primal point is padded on
  the diagonal, which never increases ``tr[X^-1 V]``; when the optimum itself is singular the
  strategy is a rank(V) x n factor whose rows span exactly the range of V.

As in the authors' code the candidate set also holds Identity, Total (only when it supports
V, i.e. V is a multiple of the all-ones matrix) and, for Laplace, the one-parameter
``[I; theta T] / (1 + theta)``; the best candidate by ``C_K`` is returned.
"""

from __future__ import annotations

import contextlib
import math
from concurrent.futures import Executor
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import param
import scipy.linalg as sla
import scipy.optimize as so

from engine.errors import NotApplicable
from engine.executor import SerialExecutor, map_ordered
from engine.linalg.marginals import is_marginal_like
from engine.linalg.matrix import (
    Dense,
    Identity,
    Matrix,
    Ones,
    PsdDense,
    UpperTriangular,
)
from engine.linalg.pinv import RCOND, supports
from engine.mechanisms.base import Plan, register, registered_name
from engine.mechanisms.hdmm.display import factor_views, operator_facts
from engine.mechanisms.hdmm.knobs import HdmmBase
from engine.mechanisms.hdmm.nonneg_lbfgs import minimize_nonneg
from engine.mechanisms.hdmm.structure import ProductUnion
from engine.mechanisms.hdmm.tracking import Reporter, minimize_reported, reporter
from engine.privacy import Privacy
from engine.progress import Progress
from engine.workloads.workload import Workload

#: Relative eigenvalue cutoff under which V is treated as rank deficient.
RANK_RTOL = 1e-10
#: The Gaussian dual forms its primal point once every |diag X(lambda) - 1| is below this.
PRIMAL_TRIGGER = 0.05
#: Scales of the p-Identity starts, used in turn (see :func:`pidentity_start`).
START_SCALES = (1.0, 0.5, 0.25)
#: Work (multiply-adds of the objective's ``Theta V`` product, ``p n**2`` per evaluation)
#: that the p-Identity starts share: 800 evaluations on 256 cells (p = 16), about eight
#: starts there. Where one start costs more than the rest of it, no further start runs.
SCREEN_WORK = 300 * 16 * 256**2
#: Work under which every start the budget admits runs (100 evaluations on 256 cells): small
#: problems are rugged and their starts nearly free. Beyond it starts stop once the best two
#: agree to ``AGREE_RTOL``.
FREE_WORK = 100 * 16 * 256**2
#: Two screened losses "agree" within this relative gap (0.1 % of RMSE, which is printed to
#: about that precision: 8.07, 7.35 in HDMM Table 4).
AGREE_RTOL = 2e-3
#: Work cap of a whole p-Identity optimisation (starts and polish): 200 evaluations on
#: 4,096 cells (p = 256, 0.21 s each on one core), so that OPT_0 plans there within a
#: minute; below 2,048 cells it never binds.
MAX_WORK = 200 * 256 * 4096**2
#: Relative reduction of the loss per iteration under which a screened start stops. At
#: 1e-4 screened starts on 256 cells stopped 0.2-0.4 % of RMSE above where they converge,
#: more than ``AGREE_RTOL`` itself, so whether two agreed was decided by where they happened
#: to stop; at 3e-5 all ranges agree after 2-3 starts (seeds 0-2) instead of 3-8.
SCREEN_FTOL = 3e-5
#: Most p-Identity weights (p n) optimised by :func:`minimize_nonneg`; larger problems use
#: scipy's L-BFGS-B. Ours costs half as much per iteration and gets about as far per
#: iteration on 256 cells (4,096 weights), but from a dense start on more cells, where most
#: weights must reach 0, it is slower at first (L-BFGS-B's Cauchy point moves many weights
#: onto the bound at once): after the default 300 + 200 iterations prefixes on 1,024 cells
#: ended at 9.695 RMSE (L-BFGS-B: 9.575, Table 4: 9.58) and all ranges on 2,048 cells at
#: 12.95 (L-BFGS-B: 12.67).
NONNEG_WEIGHTS = 16 * 1024
#: After several starts the polish runs at most this share of the iterations the best one's
#: screening took.
POLISH_SHARE = 0.5


# --------------------------------------------------------------------------------------
# the p-Identity strategy
# --------------------------------------------------------------------------------------
class PIdentity(Matrix):
    """``A(Theta) = [I; Theta] D`` with ``D = diag(1 / (1 + colsum Theta))`` (HDMM Def. 13).

    Every column has L1 norm 1. The Gram ``D (I + Theta^T Theta) D`` is always invertible,
    and least squares uses Woodbury with a p x p Cholesky factor: O(p n) per vector.

    Args:
        theta: non-negative p x n array of extra-query weights.
    """

    def __init__(self, theta: np.ndarray) -> None:
        t = np.asarray(theta, dtype=float)
        if t.ndim == 1:
            t = t[None, :]
        if t.ndim != 2 or t.shape[1] < 1:
            raise ValueError(f"PIdentity: theta must be a p x n array, got shape {t.shape}")
        if np.any(t < 0) or not np.all(np.isfinite(t)):
            raise ValueError("PIdentity: theta must be finite and non-negative")
        self.theta = t
        self.p, self.n = (int(v) for v in t.shape)
        self.scale = 1.0 / (1.0 + t.sum(axis=0))

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n + self.p, self.n)

    def _col(self, x: np.ndarray) -> np.ndarray:
        return self.scale[:, None] if x.ndim == 2 else self.scale

    def matvec(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        z = x * self._col(x)
        return np.concatenate([z, self.theta @ z])

    def rmatvec(self, y: np.ndarray) -> np.ndarray:
        y = np.asarray(y, dtype=float)
        out = y[:self.n] + self.theta.T @ y[self.n:]
        return out * self._col(out)

    def dense(self) -> np.ndarray:
        return np.vstack([np.eye(self.n), self.theta]) * self.scale

    def gram_array(self) -> np.ndarray:
        """``D (I + Theta^T Theta) D``."""
        G = self.theta.T @ self.theta
        G[np.diag_indices(self.n)] += 1.0
        return G * np.outer(self.scale, self.scale)

    def gram(self) -> Matrix:
        return PsdDense(self.gram_array(), self.gram_pinv)

    def pinv(self) -> Matrix:
        return PIdentityPinv(self)

    def column_norms(self, p: int) -> np.ndarray:
        if p == 1:
            return self.scale * (1.0 + self.theta.sum(axis=0))
        return self.scale * np.sqrt(1.0 + (self.theta**2).sum(axis=0))

    def fro2(self) -> float:
        return float((self.scale**2 * (1.0 + (self.theta**2).sum(axis=0))).sum())

    @cached_property
    def _small(self) -> tuple[np.ndarray, bool]:
        # Cholesky factor of I + Theta Theta^T (p x p): Woodbury's only inverse
        return sla.cho_factor(np.eye(self.p) + self.theta @ self.theta.T, lower=True,
                              check_finite=False)

    def _k_apply(self, z: np.ndarray) -> np.ndarray:
        """``(I + Theta^T Theta)^-1 z = z - Theta^T (I + Theta Theta^T)^-1 Theta z``."""
        return z - self.theta.T @ sla.cho_solve(self._small, self.theta @ z, check_finite=False)

    def gram_pinv(self) -> np.ndarray:
        """``(A^T A)^-1 = S K S`` with ``S = D^-1``."""
        s = 1.0 / self.scale
        return self._k_apply(np.eye(self.n)) * np.outer(s, s)

    def pinv_apply(self, y: np.ndarray) -> np.ndarray:
        """Least squares ``A^+ y = S K (y_top + Theta^T y_bottom)``."""
        y = np.asarray(y, dtype=float)
        z = self._k_apply(y[:self.n] + self.theta.T @ y[self.n:])
        return z / self._col(z)

    def pinv_matrix(self) -> np.ndarray:
        """The explicit n x (n + p) pseudo-inverse ``S K [I, Theta^T]``."""
        K = self._k_apply(np.eye(self.n))
        return np.hstack([K, K @ self.theta.T]) / self.scale[:, None]

    def __repr__(self) -> str:
        return f"PIdentity(p={self.p}, n={self.n})"


class PIdentityPinv(Matrix):
    """``A(Theta)^+ = S K [I, Theta^T]`` applied in O(p n) per vector (Woodbury)."""

    def __init__(self, strategy: PIdentity) -> None:
        self.strategy = strategy

    @property
    def shape(self) -> tuple[int, int]:
        m, n = self.strategy.shape
        return (n, m)

    def matvec(self, x: np.ndarray) -> np.ndarray:
        return self.strategy.pinv_apply(x)

    def rmatvec(self, y: np.ndarray) -> np.ndarray:
        # (A^+)^T y = [I; Theta] K S y
        A = self.strategy
        y = np.asarray(y, dtype=float)
        z = A._k_apply(y / A._col(y))
        return np.concatenate([z, A.theta @ z])

    def dense(self) -> np.ndarray:
        return self.strategy.pinv_matrix()

    def pinv(self) -> Matrix:
        return self.strategy


class WorkloadGram:
    """The workload Gram V as the p-Identity objective uses it: its diagonal and ``X V``.

    ``X V`` (X: p x n) is a dense product, O(p n**2), unless V has one of two structures:

    * *semiseparable*: its lower triangle has rank one, ``V_ij = a_i b_j`` for ``i >= j``.
      Prefixes (``V_ij = n - max(i, j)``) and all ranges (``V_ij = (min(i, j) + 1) (n -
      max(i, j))``) are, and so is any sum of them with weights; there row k of ``X V`` is
      ``a_i sum_{j < i} b_j x_j + b_i sum_{j >= i} a_j x_j``: two running sums, O(p n);
    * a weighted sum of Kronecker products ``sum_t w_t G_t1 x ... x G_td`` (a union of
      product workloads): each term is applied one attribute at a time, O(p n sum_i n_i).

    Either way the numbers are the dense product's up to round-off.

    Args:
        V: the n x n workload Gram (symmetric).
        generators: ``(a, b)`` of a semiseparable V.
        kronecker: ``[(w_t, [G_t1, ..., G_td])]`` with ``V = sum_t w_t kron(G_t1, ...)``.
    """

    def __init__(self, V: np.ndarray,
                 generators: tuple[np.ndarray, np.ndarray] | None = None,
                 kronecker: list[tuple[float, list[np.ndarray]]] | None = None) -> None:
        self.dense = V
        self.n = int(V.shape[0])
        self.diag = np.diag(V).copy()
        self.generators = generators
        self.kronecker = kronecker

    @classmethod
    def of(cls, V: np.ndarray) -> WorkloadGram:
        """V with its semiseparable generators when it has them (checked exactly, O(n**2))."""
        return cls(V, semiseparable_generators(V))

    @classmethod
    def of_union(cls, V: np.ndarray, union: ProductUnion) -> WorkloadGram:
        """V of a union of products, with its Kronecker terms where they are cheaper than a
        dense product (more than one attribute, fewer summed factor sizes than cells)."""
        sizes = sum(sum(g.shape[0] for g in union.product_grams(j)) for j in range(union.k))
        if union.d < 2 or sizes >= V.shape[0]:
            return cls.of(V)
        terms = [(float(union.weights2[j]), union.product_grams(j)) for j in range(union.k)]
        return cls(V, kronecker=terms)

    def right_multiply(self, X: np.ndarray) -> np.ndarray:
        """``X V`` for a p x n array X."""
        if self.kronecker is not None:
            return sum((w * _kron_right(X, factors) for w, factors in self.kronecker),
                       np.zeros_like(X))
        if self.generators is None:
            return X @ self.dense
        a, b = self.generators
        below = np.zeros_like(X)  # sum_{j < i} b_j x_j
        np.cumsum((X * b)[:, :-1], axis=1, out=below[:, 1:])
        above = np.cumsum((X * a)[:, ::-1], axis=1)[:, ::-1]  # sum_{j >= i} a_j x_j
        return a * below + b * above


def _kron_right(X: np.ndarray, factors: list[np.ndarray]) -> np.ndarray:
    """``X kron(G_1, ..., G_d)`` (symmetric factors), one attribute axis at a time."""
    p = X.shape[0]
    T = X.reshape((p, *(g.shape[0] for g in factors)))
    for axis, g in enumerate(factors, start=1):
        T = np.moveaxis(np.tensordot(T, g, axes=([axis], [0])), -1, axis)
    return T.reshape(p, -1)


def semiseparable_generators(V: np.ndarray, rtol: float = 1e-12
                             ) -> tuple[np.ndarray, np.ndarray] | None:
    """``(a, b)`` with ``V_ij = a_i b_j`` for every ``i >= j`` (to ``rtol`` of max |V|), or None.

    With ``b_0 = 1`` the generators are fixed by the first column and the diagonal:
    ``a = V[:, 0]``, ``b = diag V / a``; every lower-triangle entry is then compared, in
    blocks of rows so that no second n x n array is formed.
    """
    n = V.shape[0]
    a = V[:, 0].astype(float)
    if n < 2 or np.any(a == 0.0) or not np.all(np.isfinite(a)):
        return None
    b = np.diag(V) / a
    tol = rtol * float(np.abs(V).max())
    rows = max(1, 2**20 // n)
    for start in range(0, n, rows):
        stop = min(n, start + rows)
        block = V[start:stop, :stop] - a[start:stop, None] * b[None, :stop]
        # only j <= i counts: entries right of the diagonal belong to V's upper triangle
        block[np.triu_indices(stop - start, k=start + 1, m=stop)] = 0.0
        if float(np.abs(block).max()) > tol:
            return None
    return a, b


def pidentity_loss_grad(theta: np.ndarray, V: np.ndarray | WorkloadGram, p: int,
                        diag_v: np.ndarray | None = None) -> tuple[float, np.ndarray]:
    """``f(Theta) = tr[(A(Theta)^T A(Theta))^-1 V]`` and its gradient, in O(p n**2).

    With ``s = 1 + colsum Theta``, ``C = S V S``, ``R = (I + Theta Theta^T)^-1``:
    ``f = tr C - tr(R Theta C Theta^T)``; the gradient is the spec's
    ``Y / s - g / s**2`` (section 3.3) with ``Theta K = R Theta`` used so that only p x n
    products follow the single ``(Theta S) V`` product (O(p n) instead of O(p n**2) when V
    is a :class:`WorkloadGram` with a semiseparable structure).

    Args:
        theta: flattened p x n parameters (non-negative).
        V: the n x n workload Gram (an array, or a :class:`WorkloadGram` that knows its
            diagonal and a fast product).
        p: number of extra queries.
        diag_v: ``diag(V)`` (passed in to avoid recomputing it every call; ignored for a
            :class:`WorkloadGram`).

    Returns:
        ``(f, gradient)``; ``(inf, 0)`` when ``I + Theta Theta^T`` is not numerically
        positive definite or round-off makes f negative (the authors' guard).
    """
    gram = V if isinstance(V, WorkloadGram) else None
    if gram is not None:
        n, dv = gram.n, gram.diag
    else:
        n = V.shape[0]
        dv = np.diag(V) if diag_v is None else diag_v
    Th = np.asarray(theta, dtype=float).reshape(p, n)
    s = 1.0 + Th.sum(axis=0)
    TS = Th * s
    B = (gram.right_multiply(TS) if gram is not None else TS @ V) * s  # Theta C
    M = Th @ Th.T
    M.flat[::p + 1] += 1.0
    # R = (I + Theta Theta^T)^-1 explicitly (p x p, p <= n/16) through LAPACK's Cholesky and
    # triangular inverse: three products with it cost less than triangular solves through
    # scipy's checking wrappers, which dominate at n <= 256
    L, info = sla.lapack.dpotrf(M, lower=1)
    if info != 0:
        return math.inf, np.zeros(p * n)
    Linv, info = sla.lapack.dtrtri(L, lower=1)
    R = Linv.T @ Linv
    RT = R @ Th  # R Theta
    ERT = (B @ Th.T) @ RT  # Theta C Theta^T R Theta
    cross = (RT * B).sum(axis=0)  # diag(Theta^T R Theta C)
    ssd = s * s * dv
    f = float(ssd.sum() - cross.sum())
    if not f >= 0.0 or not math.isfinite(f):
        return math.inf, np.zeros(p * n)
    Y = (-2.0 * s) * (R @ (B - ERT))
    diag_kck = ssd - 2.0 * cross + (RT * ERT).sum(axis=0)
    g = -2.0 * s * diag_kck + (Th * Y).sum(axis=0)  # 2 Z_jj / s_j + sum_i Theta_ij Y_ij
    grad = Y / s - g / (s * s)
    return f, grad.ravel()


def pidentity_start(V: np.ndarray | WorkloadGram, p: int, rng: np.random.Generator,
                    k: int) -> np.ndarray:
    """The k-th p-Identity start: Uniform[0, 1) weights half smoothed through the workload.

    Every row is ``c (U + G / mean G) / 2`` with U uniform and ``G = U R``, R the workload's
    correlation matrix (``V`` scaled to unit diagonal), so the extra queries start as broad
    bumps over cells the workload asks about together instead of independent noise. Pure
    uniform starts on 64 cells land on the identity point (theta = 0) in 4 of 8 seeds for
    all-range: their cell-to-cell jumps give gradients that push whole columns onto the
    bound; the smoothed half removes that, and the uniform half keeps the starts diverse.
    The scale c cycles through ``START_SCALES`` (smaller starts keep more weight on the
    identity rows and reach other local optima, e.g. width-32 ranges on 64 cells).

    Args:
        V: workload Gram (n x n, or a :class:`WorkloadGram`).
        p: number of extra queries.
        rng: source of the uniform part.
        k: index of the start (picks the scale).

    Returns:
        A non-negative p x n start.
    """
    gram = V if isinstance(V, WorkloadGram) else WorkloadGram(V)
    n = gram.n
    U = rng.random((p, n))
    d = np.sqrt(np.clip(gram.diag, 0.0, None))
    inv = np.divide(1.0, d, out=np.zeros(n), where=d > 0)
    G = gram.right_multiply(U * inv) * inv  # U R without forming R
    mean = float(G.mean())
    smooth = G / mean if mean > 0.0 else U
    return START_SCALES[k % len(START_SCALES)] * 0.5 * (U + np.clip(smooth, 0.0, None))


def optimize_pidentity(V: np.ndarray | WorkloadGram, p: int, *, restarts: int = 8, seed: int = 0,
                       maxiter: int = 300, polish_iterations: int = 200,
                       screen_ftol: float = SCREEN_FTOL, max_work: int = MAX_WORK,
                       init: np.ndarray | None = None,
                       progress: Progress | Reporter | None = None,
                       executor: Executor | None = None
                       ) -> tuple[np.ndarray, float, list[float]]:
    """Best p-Identity ``Theta`` for V: seeded starts screened, the best one polished.

    Restart rule (a work budget, then agreement): starts run one after another, and another
    one is launched only while one more start as long as the first still fits in
    ``SCREEN_WORK`` (work is counted in units of the dense objective, ``p n**2``
    multiply-adds per evaluation, whatever V's structure), and, once the starts have spent
    ``FREE_WORK``, only while the two best screened losses differ by more than
    ``AGREE_RTOL``. Extra starts run where they are cheap, which is where the landscape is
    measured to be rugged: up to 256 cells single starts end up to 1.6 % apart (prefixes on
    256 cells: 7.33-7.47 RMSE) and the best of several is needed to reach the printed
    optima. Below ``FREE_WORK`` (up to about 128 cells) every admitted start runs: there two
    starts can agree on a worse optimum (all ranges of 32 cells, p = 2: two agree on 5391.4,
    the fifth reaches 5343.4). At 256 cells agreement stops all ranges after 2-6 starts
    instead of 8 (seeds 0-2: 2, 6, 4; the optima within 0.1 % of the eight-start ones),
    while prefixes, whose starts scatter more, mostly run the budget. From 512 cells on one
    start costs more than the budget, exactly one runs and the polish continues it.

    On an ``executor`` the same rule gives the same starts: the warm start and the first
    random start run here, then as many further starts as fit if each is as long as the
    first run at once on the executor; their lengths are replayed through the rule (the
    ones it would not have launched are dropped, and where they were shorter than the
    first another batch runs). The starts are independent and seeded, so the result is the
    serial one.

    Args:
        V: workload Gram (n x n, or a :class:`WorkloadGram` with its fast product).
        p: number of extra queries.
        restarts: most starts (:func:`pidentity_start`, seeded by ``seed``).
        seed: seed of the starts.
        maxiter: iterations of one start.
        polish_iterations: most iterations refining the best start at a tight tolerance (no
            more than ``POLISH_SHARE`` of that start's screening iterations when several
            starts ran).
        screen_ftol: relative loss reduction per iteration under which a screened start
            stops.
        max_work: multiply-adds the whole optimisation may spend (caps the iterations of the
            starts and the polish on very large domains).
        init: an extra warm start (p x n), tried before the random ones.
        progress: receives one step per objective evaluation (of the starts run here;
            a cancel also stops the starts running on ``executor``).
        executor: runs batches of further starts (None: every start in this process).

    Returns:
        ``(Theta, f, losses)``: the best parameters (p x n), their ``tr[(A^T A)^-1 V]`` and
        the loss reached by every start run (warm start first).
    """
    gram = V if isinstance(V, WorkloadGram) else WorkloadGram.of(V)
    n = gram.n
    if restarts < 1 and init is None:
        raise ValueError("optimize_pidentity: needs at least one start")
    rng = np.random.default_rng(seed)
    warm = [] if init is None else [np.asarray(init, float).reshape(p, n)]
    total = len(warm) + restarts
    budget = SCREEN_WORK // (p * n * n)  # in evaluations
    free = FREE_WORK // (p * n * n)
    cap = max(1, max_work // (p * n * n))
    # every start the rule admits has at most budget evaluations before it, so with this
    # margin it runs its full maxiter wherever it runs: a batch needs no running total
    batches = (executor is not None and not isinstance(executor, SerialExecutor)
               and cap - budget >= maxiter)

    def start(k: int) -> np.ndarray:  # in order: the random ones draw from rng in turn
        return warm[k] if k < len(warm) else pidentity_start(gram, p, rng, k - len(warm))

    results: list[tuple[float, np.ndarray]] = []
    lengths: list[int] = []  # evaluations of every start

    def admitted() -> int:
        if len(results) >= 2 and sum(lengths) >= free and _agree([f for f, _ in results]):
            return 0
        return _admitted_starts(lengths, len(warm), total, budget, cap)

    while len(results) < total:
        further = admitted()
        if further == 0:
            break
        if not batches or further == 1:
            k = len(results)
            rep = reporter(progress, f"OPT_0 p-identity (p={p}) start {k + 1}/{total}")
            f, x, used = _screen(gram, p, start(k), rep, screen_ftol,
                                 min(maxiter, cap - sum(lengths)))
            results.append((f, x))
            lengths.append(used)
            continue
        tasks = [(gram, p, start(len(results) + j), screen_ftol, maxiter)
                 for j in range(further)]
        cancel = progress.progress if isinstance(progress, Reporter) else progress
        for f, x, used in map_ordered(executor, _screen_task, tasks, progress=cancel):
            if admitted() == 0:
                break  # the serial rule stops before this start
            results.append((f, x))
            lengths.append(used)
    losses = [f for f, _ in results]
    best = int(np.argmin(losses))
    f, x = results[best]
    # after several starts the polish runs at most POLISH_SHARE of the best one's screening
    # (short on small or easy problems, longer where the screening itself needed many
    # iterations); a lone start, which had no others to be compared with, continues for up
    # to polish_iterations
    polish = min(polish_iterations, cap - sum(lengths))
    if len(results) > 1:
        polish = min(polish, int(POLISH_SHARE * lengths[best]))
    if polish > 0 and math.isfinite(f):
        rep = reporter(progress, f"OPT_0 p-identity (p={p}) polish")
        f2, x2, _ = _screen(gram, p, x, rep, 1e-12, polish)
        if f2 < f:
            f, x = f2, x2
    return x.reshape(p, n), f, losses


def _admitted_starts(lengths: list[int], warm: int, total: int, budget: int, cap: int) -> int:
    """How many further starts the restart rule launches after the starts of ``lengths``
    (evaluations each) if every one is as long as the first random start (0: stop)."""
    spent = sum(lengths)
    if spent >= cap and lengths:
        return 0
    if len(lengths) <= warm:  # the warm start and the first random start run alone
        return 1
    first = lengths[warm]
    if spent + first > budget:
        return 0
    return min(total - len(lengths), (budget - spent) // first)


def _agree(losses: list[float]) -> bool:
    """True when the two lowest losses are within ``AGREE_RTOL`` of each other."""
    first, second = sorted(losses)[:2]
    return math.isfinite(second) and second - first <= AGREE_RTOL * second


def _screen(gram: WorkloadGram, p: int, x0: np.ndarray, rep: Reporter,
            ftol: float, maxiter: int) -> tuple[float, np.ndarray, int]:
    """A bound-constrained L-BFGS on the p-Identity loss from ``x0``, reporting every
    evaluation: ``(loss, Theta flat, evaluations)``. Up to ``NONNEG_WEIGHTS`` weights it is
    :func:`minimize_nonneg`, beyond them scipy's L-BFGS-B."""
    evaluations = [0]

    def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
        evaluations[0] += 1
        f, g = pidentity_loss_grad(x, gram, p)
        rep.step(f)
        return f, g

    x0 = np.asarray(x0, float).ravel()
    if x0.size <= NONNEG_WEIGHTS:
        return minimize_nonneg(fun, x0, ftol=ftol, maxiter=maxiter)
    f, x = minimize_reported(fun, x0, Reporter(), ftol=ftol, maxiter=maxiter)
    return f, x, evaluations[0]


def _screen_task(task: tuple[WorkloadGram, int, np.ndarray, float, int]
                 ) -> tuple[float, np.ndarray, int]:
    """One start screened on an executor (no progress crosses processes)."""
    gram, p, x0, ftol, maxiter = task
    return _screen(gram, p, x0, Reporter(), ftol, maxiter)


def optimize_idtotal(V: np.ndarray | WorkloadGram,
                     progress: Progress | Reporter | None = None) -> tuple[float, float]:
    """Best ``[I; theta T] / (1 + theta)`` (one shared weight): ``(theta, loss)``."""
    gram = V if isinstance(V, WorkloadGram) else WorkloadGram(V)
    n = gram.n

    def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
        f, g = pidentity_loss_grad(np.full(n, x[0]), gram, 1)
        return f, np.array([g.sum()])

    rep = reporter(progress, "OPT_0 id-total")
    f, x = minimize_reported(fun, np.array([1.0]), rep, ftol=1e-12, maxiter=200)
    return float(x[0]), f


# --------------------------------------------------------------------------------------
# the Gaussian convex problem
# --------------------------------------------------------------------------------------
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


# --------------------------------------------------------------------------------------
# candidates and the best-of
# --------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class Factor:
    """A strategy chosen for one explicit Gram, with what the error formulas need.

    Attributes:
        kind: ``identity``, ``total``, ``p-identity``, ``id-total`` or ``gaussian``.
        matrix: the strategy A (columns = cells).
        loss: ``||A||_K**2 tr[(A^T A)^+ V]`` on the Gram it was chosen for.
        norm: K (1 Laplace, 2 Gaussian).
        info: the optimiser's results (restart losses, duality gap, candidates...).
    """

    kind: str
    matrix: Matrix
    loss: float
    norm: int
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def n(self) -> int:
        """Number of cells."""
        return self.matrix.shape[1]

    @cached_property
    def gram_matrix(self) -> Matrix:
        """``A^T A`` with its structure (its ``pinv()`` takes the cheapest exact route)."""
        return self.matrix.gram()

    @cached_property
    def gram(self) -> np.ndarray:
        """``A^T A``."""
        return self.gram_matrix.dense()

    @cached_property
    def gram_pinv(self) -> np.ndarray:
        """``(A^T A)^+``."""
        return self.gram_matrix.pinv().dense()

    @cached_property
    def pinv(self) -> Matrix:
        """``A^+`` (implicit for p-Identity, explicit for the other families)."""
        return self.matrix.pinv()

    @property
    def triangular(self) -> bool:
        """True for the square upper-triangular Cholesky strategy."""
        return self.info.get("factorization") == "cholesky"

    @property
    def full_rank(self) -> bool:
        """True when A has full column rank (then it supports every query)."""
        if self.kind == "total":
            return self.n == 1
        if self.kind == "gaussian":
            return self.triangular
        return True

    @cached_property
    def sensitivity(self) -> dict[int, float]:
        """``{1: L1, 2: L2}`` sensitivities (largest column norms)."""
        return {1: self.matrix.sensitivity(1), 2: self.matrix.sensitivity(2)}

    def trace(self, V: np.ndarray) -> float:
        """``tr[(A^T A)^+ V]``; inf when A does not support V."""
        if not self.full_rank and not supports(V, self.gram):
            return math.inf
        return float((self.gram_pinv * V).sum())

    def error(self, V: np.ndarray, norm: int | None = None) -> float:
        """``||A||_K**2 tr[(A^T A)^+ V]`` in norm K (default: the one it was chosen for)."""
        k = self.norm if norm is None else norm
        return self.sensitivity[k] ** 2 * self.trace(V)

    def pinv_matrix(self) -> np.ndarray:
        """The explicit pseudo-inverse ``A^+`` (n x rows) for Kronecker reconstruction."""
        return self.pinv.dense()

    def pinv_apply(self, y: np.ndarray) -> np.ndarray:
        """Least squares ``A^+ y`` (O(p n) for p-Identity)."""
        return self.pinv.matvec(np.asarray(y, dtype=float))


def _is_scaled_identity(V: np.ndarray) -> bool:
    d = np.diag(V)
    off = V - np.diag(d)
    scale = max(float(np.abs(d).max()), 1e-300)
    return float(np.abs(off).max()) <= 1e-12 * scale and float(np.ptp(d)) <= 1e-12 * scale


def default_p(V: np.ndarray) -> int:
    """Spec section 3.3: ``max(n // 16, 1)``, and 1 for identity/total-like Grams."""
    n = V.shape[0]
    return 1 if is_marginal_like(V) else max(n // 16, 1)


def identity_factor(n: int, V: np.ndarray, norm: int) -> Factor:
    """The Identity strategy (error ``tr V``)."""
    return Factor("identity", Identity(n), float(np.trace(V)), norm)


def total_factor(n: int, V: np.ndarray, norm: int) -> Factor:
    """The Total strategy (supports V only when V is a multiple of the all-ones matrix)."""
    scale = max(float(np.abs(V).max()), 1e-300)
    ok = float(np.ptp(V)) <= 1e-12 * scale
    return Factor("total", Ones(1, n), float(V.mean()) if ok else math.inf, norm)


def opt0(V: np.ndarray, norm: int, *, p: int | None = None, restarts: int = 8, seed: int = 0,
         maxiter: int = 300, polish_iterations: int = 200, tol: float = 1e-7,
         max_work: int = MAX_WORK, init: Factor | None = None,
         progress: Progress | Reporter | None = None,
         executor: Executor | None = None, gram: WorkloadGram | None = None) -> Factor:
    """OPT_0: the best strategy for the explicit Gram V in sensitivity norm ``norm``.

    Args:
        V: workload Gram ``W^T W`` (n x n).
        norm: 1 (Laplace: p-Identity family) or 2 (Gaussian: convex family).
        p: p-Identity rows (default :func:`default_p`).
        restarts: p-Identity random starts.
        seed: seed of the random starts.
        maxiter: p-Identity iterations per start (Laplace) / dual iterations (Gaussian).
        polish_iterations: extra iterations on the best p-Identity start.
        tol: certified relative optimality gap of the Gaussian problem.
        max_work: multiply-adds one p-Identity optimisation may spend.
        init: a previous p-Identity factor to warm-start from (same p and n).
        progress: receives (iteration, loss) from every optimiser loop.
        executor: runs batches of p-Identity restarts (see :func:`optimize_pidentity`).
        gram: V with a known fast product (default: :meth:`WorkloadGram.of` detects a
            semiseparable V).

    Returns:
        The best :class:`Factor` by ``C_K``; ``info["candidates"]`` lists every candidate's
        loss.
    """
    V = np.asarray(V, dtype=float)
    n = V.shape[0]
    if V.shape != (n, n):
        raise ValueError(f"opt0: V must be square, got shape {V.shape}")
    candidates = [identity_factor(n, V, norm), total_factor(n, V, norm)]
    # Total (V a multiple of 1 1^T) and Identity (V a multiple of I) attain the SVD bound
    # there, so nothing can beat them in either norm
    exact = math.isfinite(candidates[1].loss) or _is_scaled_identity(V)
    if n > 1 and float(np.abs(V).max()) > 0.0 and not exact:
        if norm == 1:
            p = default_p(V) if p is None else int(p)
            warm = (init.matrix.theta if init is not None and isinstance(init.matrix, PIdentity)
                    and init.matrix.theta.shape == (p, n) else None)
            gram = WorkloadGram.of(V) if gram is None else gram
            theta, f, losses = optimize_pidentity(
                gram, p, restarts=restarts, seed=seed, maxiter=maxiter,
                polish_iterations=polish_iterations, max_work=max_work, init=warm,
                progress=progress, executor=executor)
            candidates.append(Factor("p-identity", PIdentity(theta), f, norm,
                                     {"p": p, "start_losses": losses}))
            t, f = optimize_idtotal(gram, progress)
            candidates.append(Factor("id-total", PIdentity(np.full((1, n), t)), f, norm,
                                     {"theta_total": t}))
        else:
            A, f, info = gaussian_opt0(V, tol=tol, maxiter=maxiter, progress=progress)
            matrix = UpperTriangular(A) if info["factorization"] == "cholesky" else Dense(A)
            candidates.append(Factor("gaussian", matrix, f, norm, info))
    best = min(candidates, key=lambda c: c.loss)
    best.info["candidates"] = {c.kind: c.loss for c in candidates}
    return best


# --------------------------------------------------------------------------------------
# OPT_0 on a whole (small) domain
# --------------------------------------------------------------------------------------
#: Largest domain OPT_0 runs on (an explicit n x n Gram; the paper reaches n = 8192).
MAX_CELLS = 8192


def check_explicit(workload: Workload, max_cells: int, what: str) -> None:
    """NotApplicable when the domain is too large for an explicit n x n Gram."""
    n = workload.domain.size
    if n > max_cells:
        raise NotApplicable(f"{what} optimises over the explicit n x n Gram; the domain has "
                            f"{n:,} cells (limit {max_cells:,}): use hdmm-kron, hdmm-union or "
                            "hdmm-marginals")


def explicit_gram(workload: Workload, union: ProductUnion | None = None) -> np.ndarray:
    """``W^T W`` as an n x n array (Kronecker products of the factor Grams for products)."""
    if union is None and workload.is_product_union:
        union = ProductUnion.of(workload)
    if union is None:
        return np.asarray(workload.gram().dense(), dtype=float)
    n = union.cells
    V = np.zeros((n, n))
    for j in range(union.k):
        G = np.ones((1, 1))
        for g in union.product_grams(j):
            G = np.kron(G, g)
        V += union.weights2[j] * G
    return V


def explicit_plan(name: str, workload: Workload, privacy: Privacy,
                  union: ProductUnion | None = None, *, p: int | None = None,
                  restarts: int = 8, seed: int = 0, maxiter: int = 300,
                  polish_iterations: int = 200, tol: float = 1e-7,
                  progress: Progress | Reporter | None = None,
                  executor: Executor | None = None) -> Plan:
    """A Plan for OPT_0 on the workload's explicit Gram over the whole domain."""
    if union is None and workload.is_product_union:
        union = ProductUnion.of(workload)
    V = explicit_gram(workload, union)
    gram = (WorkloadGram.of_union(V, union)
            if union is not None and privacy.norm == 1 else None)
    factor = opt0(V, privacy.norm, p=p, restarts=restarts, seed=seed, maxiter=maxiter,
                  polish_iterations=polish_iterations, tol=tol, progress=progress,
                  executor=executor, gram=gram)

    def reconstructor(plan: Plan, y: np.ndarray) -> np.ndarray:
        return workload.answer(factor.pinv_apply(np.asarray(y, dtype=float)))

    views = (operator_facts("explicit", "OPT_0", factor.loss), *factor_views(factor))
    return Plan(mechanism=name, workload=workload, privacy=privacy, strategy=factor.matrix,
                trace=factor.trace(V), sensitivity=dict(factor.sensitivity), shown=views,
                reconstructor=reconstructor)


@register
class Opt0Mechanism(HdmmBase):
    """HDMM's OPT_0: the best explicit strategy for a small domain."""

    name = registered_name("hdmm-opt0")
    cost_model = "dense"
    title = "HDMM OPT_0"
    description = ("an explicit strategy optimised for the whole workload: p-Identity for "
                   "Laplace noise, the convex optimum (Cholesky factor) for Gaussian noise")
    restarts = param.Integer(default=8, bounds=(1, None), doc=(
        "Most random starts of the (non-convex) p-Identity optimisation; extra starts run "
        "only while they fit a fixed work budget (small domains) and, past the nearly free "
        "problems, until the best two agree within 0.2 % of the loss."))
    polish_iterations = param.Integer(default=200, bounds=(0, None), doc=(
        "Most extra iterations refining the best p-Identity start at a tight tolerance (no "
        "more than half of what that start took)."))
    p = param.Integer(default=None, bounds=(1, None), allow_None=True, doc=(
        "p-Identity rows (default n/16, or 1 when the workload only holds identity and total "
        "queries)."))
    tol = param.Number(default=1e-7, bounds=(0, None), inclusive_bounds=(False, True), doc=(
        "Certified relative optimality gap of the Gaussian convex problem."))
    max_domain = param.Integer(default=MAX_CELLS, bounds=(1, None), doc=(
        "Largest domain (cells) on which OPT_0 runs."))

    def check(self, workload: Workload, privacy: Privacy) -> None:
        super().check(workload, privacy)
        check_explicit(workload, self.max_domain, "hdmm-opt0")

    def _plan(self, workload: Workload, privacy: Privacy, progress: Progress | None) -> Plan:
        return explicit_plan(self.name, workload, privacy, p=self.p, restarts=self.restarts,
                             seed=self.seed, maxiter=self.maxiter,
                             polish_iterations=self.polish_iterations, tol=self.tol,
                             progress=progress, executor=self.executor)
