"""OPT_0 for Laplace noise: the p-Identity search (HDMM section 4, Defs. 13-14; spec section 3.3).

The strategy family is ``A(Theta) = [I; Theta] D`` with ``Theta >= 0`` (p x n) and D scaling
every column to L1 norm 1 (:class:`~engine.mechanisms.hdmm.pidentity.PIdentity`). The
objective ``tr[(A^T A)^-1 V]`` and its exact gradient cost O(p n**2): the only product with an
n x n matrix is ``(Theta S) V`` (the Woodbury algebra is rearranged so that ``K C K`` is never
formed), and that product is cheaper when V has structure
(:class:`~engine.mechanisms.hdmm.workload_gram.WorkloadGram`). A bound-constrained L-BFGS
(:mod:`~engine.mechanisms.hdmm.nonneg_lbfgs`) runs from seeded starts smoothed through the
workload (:func:`pidentity_start`), screened at a moderate tolerance while they fit a work
budget and until the best two agree, then the best one is polished. Where the budget admits
one start only and the cells have a one-dimensional order, that start is a hierarchy of
blocks (:func:`hierarchical_start`), the shape of the optima on ranges. The one-parameter
``[I; theta T] / (1 + theta)`` candidate is optimised here too (:func:`optimize_idtotal`).

The same search runs with the columns scaled to L2 norm 1 (``norm=2``): the Gaussian
p-Identity family, a subset of the Gaussian convex problem's strategies
(:mod:`~engine.mechanisms.hdmm.gaussian_opt0`) whose loss and gradient take the structured
products; that problem's dual needs ``(Lambda^(1/2) V Lambda^(1/2))^(1/2)``, a function of a
full-rank n x n matrix whose eigendecomposition no Gram structure avoids.
"""

from __future__ import annotations

import math
from concurrent.futures import Executor

import numpy as np
import scipy.linalg as sla
from scipy.optimize import minimize_scalar

from engine.executor import SerialExecutor, map_ordered
from engine.mechanisms.hdmm.nonneg_lbfgs import minimize_nonneg
from engine.mechanisms.hdmm.pidentity import column_scale
from engine.mechanisms.hdmm.tracking import Reporter, minimize_reported, reporter
from engine.mechanisms.hdmm.workload_gram import WorkloadGram
from engine.progress import Progress

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
#: Work cap of a whole p-Identity optimisation (starts and polish), in multiply-adds of the
#: evaluations (:meth:`~engine.mechanisms.hdmm.workload_gram.WorkloadGram.evaluation_work`):
#: 200 evaluations on 4,096 cells with a dense Gram (p = 256, 0.21 s each on one core), so
#: that OPT_0 plans there within a minute, and about 700 with a structured one (the
#: products with V cost O(p n), the Woodbury products O(p**2 n)); below 2,048 cells it
#: never binds.
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
#: Above this many weights :func:`minimize_nonneg` runs again: scipy's L-BFGS-B sets up its
#: bounds with Python loops over every weight (seconds per call at half a million weights)
#: and its own bookkeeping costs more than a structured objective. On all ranges of 4,096
#: cells, p = 128 (524,288 weights), one start reached 14.44 RMSE (Table 4: 14.38) after
#: 908 evaluations in 38.5 CPU s with it, 14.42 after 800 in 62 s with L-BFGS-B; prefixes
#: 12.25 (Table 4: 12.20) after 1,000 in 54 s. It gets less far per evaluation, but from the
#: hierarchical start the default 300 + 200 iterations end at 14.37 and 12.15 there.
SCIPY_MAX_WEIGHTS = 512 * 1024 - 1
#: After several starts the polish runs at most this share of the iterations the best one's
#: screening took.
POLISH_SHARE = 0.5

#: Arrays of p x n floats one p-Identity optimisation holds at its peak: 20 for the ten
#: curvature pairs of :func:`minimize_nonneg`, as many for their copy on the free weights,
#: and about 12 for the point, the gradients, the trial step and the loss's temporaries.
PEAK_ARRAYS = 52


def pidentity_peak_bytes(p: int, n: int) -> float:
    """Estimated peak memory (bytes) of :func:`optimize_pidentity` on a structured Gram with
    p extra queries on n cells (a float: no overflow): ``PEAK_ARRAYS`` p x n arrays."""
    return 8.0 * PEAK_ARRAYS * p * n


def pidentity_loss_grad(theta: np.ndarray, V: np.ndarray | WorkloadGram, p: int,
                        diag_v: np.ndarray | None = None, norm: int = 1
                        ) -> tuple[float, np.ndarray]:
    """``f(Theta) = tr[(A(Theta)^T A(Theta))^-1 V]`` and its gradient, in O(p n**2), or
    O(p n + p**2 n) when V is a structured :class:`WorkloadGram`.

    With s the column norms of ``[I; Theta]`` (``1 + colsum Theta`` for ``norm`` 1,
    ``sqrt(1 + colsum Theta**2)`` for 2; ``A = [I; Theta] S^-1`` has unit column norms, so f
    is the unit-noise error ``C_K``), ``C = S V S``, ``R = (I + Theta Theta^T)^-1``
    (Woodbury's p x p inverse), ``B = Theta C`` and ``Q = R (B Theta^T) R``:
    ``f = tr C - sum_j c_j`` with ``c = colsum(Theta * R B)``. ``df/ds_j = 2 (s_j**2 V_jj -
    c_j) / s_j`` and ``ds_j / dTheta_ij`` is 1 (L1) or ``Theta_ij / s_j`` (L2), so the
    gradient (the spec's ``Y / s - g / s**2``, section 3.3, for L1) is ``2 (s**2 diag V - c)
    / s - 2 (R B - Q Theta)`` for L1 and ``2 Theta (s**2 diag V - c) / s**2 - 2 (R B - Q
    Theta)`` for L2, column by column. The only product with an n x n matrix is ``(Theta S)
    V``; the rest are three p x n by p products and one p x p Gram. (The Gaussian
    sensitivity of A, its largest column L2 norm, is 1 by construction: the L2 family needs
    no max in the loss.)

    Args:
        theta: flattened p x n parameters (non-negative).
        V: the n x n workload Gram (an array, or a :class:`WorkloadGram` that knows its
            diagonal and a fast product).
        p: number of extra queries.
        diag_v: ``diag(V)`` (passed in to avoid recomputing it every call; ignored for a
            :class:`WorkloadGram`).
        norm: sensitivity norm of the columns, 1 (Laplace) or 2 (Gaussian).

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
    s = column_scale(Th, norm)
    TS = Th * s
    B = gram.right_multiply(TS) if gram is not None else TS @ V
    B *= s  # Theta C
    M = Th @ Th.T
    M.flat[::p + 1] += 1.0
    # R = (I + Theta Theta^T)^-1 explicitly (p x p, p <= n/16) through LAPACK's Cholesky and
    # triangular inverse: products with it cost less than triangular solves through
    # scipy's checking wrappers, which dominate at n <= 256
    L, info = sla.lapack.dpotrf(M, lower=1)
    if info != 0:
        return math.inf, np.zeros(p * n)
    Linv, info = sla.lapack.dtrtri(L, lower=1)
    R = Linv.T @ Linv
    Q = R @ (B @ Th.T) @ R  # R Theta C Theta^T R
    Z = R @ B
    cross = np.einsum("ij,ij->j", Th, Z)  # diag(Theta^T R Theta C)
    Z -= Q @ Th  # R Theta C (I - Theta^T R Theta) = R Theta C K
    ssd = s * s * dv
    f = float(ssd.sum() - cross.sum())
    if not f >= 0.0 or not math.isfinite(f):
        return math.inf, np.zeros(p * n)
    if norm == 1:
        Z -= (ssd - cross) / s
    else:
        Z -= Th * ((ssd - cross) / (s * s))
    Z *= -2.0
    return f, Z.ravel()


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


def hierarchy_blocks(n: int, p: int) -> list[tuple[int, int]]:
    """The blocks ``[start, stop)`` of a dyadic hierarchy over n ordered cells with at most p
    of them: widths ``w, 2w, 4w, ...`` up to the whole domain (the last block of a level may
    be shorter), w the smallest power of two whose levels fit in p rows."""
    width = 1
    while True:
        levels = []
        w = width
        while True:
            levels.append(w)
            if w >= n:
                break
            w *= 2
        if sum(-(-n // w) for w in levels) <= p or width >= n:
            break
        width *= 2
    return [(start, min(start + w, n)) for w in levels for start in range(0, n, w)][:p]


def hierarchical_start(gram: WorkloadGram, p: int, order: np.ndarray, norm: int = 1
                       ) -> np.ndarray:
    """A p-Identity start shaped like a hierarchical strategy (H2/HB): one extra query per
    block of :func:`hierarchy_blocks` along ``order`` (the Gram's
    :meth:`~engine.mechanisms.hdmm.workload_gram.WorkloadGram.cell_order`), all with one
    weight c, the c that minimises the loss (a bounded search on ``log c``, about 20
    evaluations).

    On the ranges of Table 4 the p-Identity optima are such blocks: on all ranges of 1,024
    cells (p = 64) the optimum's rows are contiguous runs of 20-100 cells with nearly equal
    weights. From this start one start of 500 iterations reaches all ranges of 4,096 cells at
    14.36 RMSE and prefixes at 12.14 (Table 4: 14.38, 12.20), where the smoothed random start
    of :func:`pidentity_start` ends at 14.66 and 12.82 after as many.

    Args:
        gram: workload Gram.
        p: number of extra queries (rows beyond the hierarchy's blocks start at 0).
        order: the cells in their one-dimensional order.
        norm: sensitivity norm of the loss (1: Laplace, 2: Gaussian).

    Returns:
        A non-negative p x n start.
    """
    n = gram.n
    T = np.zeros((p, n))
    for row, (start, stop) in enumerate(hierarchy_blocks(n, p)):
        T[row, order[start:stop]] = 1.0

    def loss(log_c: float) -> float:
        f, _ = pidentity_loss_grad(math.exp(log_c) * T, gram, p, norm=norm)
        return f if math.isfinite(f) else float(np.finfo(float).max)

    best = minimize_scalar(loss, bounds=(math.log(1e-3), math.log(10.0)), method="bounded",
                           options={"xatol": 0.02, "maxiter": 25})
    return math.exp(float(best.x)) * T


def optimize_pidentity(V: np.ndarray | WorkloadGram, p: int, *, restarts: int = 8, seed: int = 0,
                       maxiter: int = 300, polish_iterations: int = 200,
                       screen_ftol: float = SCREEN_FTOL, max_work: int = MAX_WORK,
                       init: np.ndarray | None = None,
                       progress: Progress | Reporter | None = None,
                       executor: Executor | None = None, norm: int = 1
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
    start costs more than the budget, exactly one runs and the polish continues it; when
    the Gram knows its cells' one-dimensional order (and no ``init`` is given) that start is
    :func:`hierarchical_start` instead of a random one.

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
        norm: sensitivity norm the columns are scaled in, 1 (Laplace, the paper's family) or
            2 (Gaussian: ``[I; Theta]`` with unit L2 columns, see :func:`pidentity_loss_grad`).

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
    order = gram.cell_order()
    if init is None and order is not None and budget < maxiter:
        # one start is all the budget admits: on one-dimensional cells it is the hierarchy
        warm, total = [hierarchical_start(gram, p, order, norm)], 1
    free = FREE_WORK // (p * n * n)
    cap = max(1, int(max_work // gram.evaluation_work(p)))
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
                                 min(maxiter, cap - sum(lengths)), norm)
            results.append((f, x))
            lengths.append(used)
            continue
        tasks = [(gram, p, start(len(results) + j), screen_ftol, maxiter, norm)
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
        f2, x2, _ = _screen(gram, p, x, rep, 1e-12, polish, norm)
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
            ftol: float, maxiter: int, norm: int) -> tuple[float, np.ndarray, int]:
    """A bound-constrained L-BFGS on the p-Identity loss from ``x0``, reporting every
    evaluation: ``(loss, Theta flat, evaluations)``. Up to ``NONNEG_WEIGHTS`` weights and over
    ``SCIPY_MAX_WEIGHTS`` it is :func:`minimize_nonneg`, in between scipy's L-BFGS-B."""
    evaluations = [0]

    def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
        evaluations[0] += 1
        f, g = pidentity_loss_grad(x, gram, p, norm=norm)
        rep.step(f)
        return f, g

    x0 = np.asarray(x0, float).ravel()
    if x0.size <= NONNEG_WEIGHTS or x0.size > SCIPY_MAX_WEIGHTS:
        return minimize_nonneg(fun, x0, ftol=ftol, maxiter=maxiter)
    f, x = minimize_reported(fun, x0, Reporter(), ftol=ftol, maxiter=maxiter)
    return f, x, evaluations[0]


def _screen_task(task: tuple[WorkloadGram, int, np.ndarray, float, int, int]
                 ) -> tuple[float, np.ndarray, int]:
    """One start screened on an executor (no progress crosses processes)."""
    gram, p, x0, ftol, maxiter, norm = task
    return _screen(gram, p, x0, Reporter(), ftol, maxiter, norm)


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

