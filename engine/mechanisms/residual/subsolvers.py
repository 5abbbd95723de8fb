"""Sub-solvers (spec 2.5, 3.3) and solving every residual sub-workload once.

A sub-solver turns a residual's sub-workload into a unit-cost Gaussian mechanism on that
residual. The four of the spec differ only here:

=============  =====================================================  ==========================
name           strategy on residual A'                                per-residual loss
=============  =====================================================  ==========================
``optimal``    the certified optimum of Eq. 4 (QuerySmasher)          OPT(G)
``residual``   ``V ~ kron C_d`` (ResidualPlanner)                     prod((d-1)/d) tr G
``kron_basis`` ``V ~ kron_i V_i``, per-attribute bases (RP+)         tr(G V^+) max diag V
``fourier``    diagonal in the DFT basis (WFF)                        (sum_j sqrt g_j)**2
=============  =====================================================  ==========================

When a residual's Gram is one Kronecker product ``c kron_i G_i`` (every product workload with
one block per attribute) the optimum is the Kronecker product of 1-D optima (spec R7): each
distinct 1-D Gram is solved once and shared by every residual that uses it. Other residuals
are grouped by their normalised Gram (residuals with proportional Grams share one strategy)
and each group is solved once; the optimal SDPs of different groups run through
any ``concurrent.futures.Executor`` (:func:`~engine.executor.map_ordered`).
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from engine.errors import NotApplicable
from engine.executor import SerialExecutor, default_executor, map_ordered
from engine.linalg.residuals import AttrSet
from engine.mechanisms.residual.decomposition import (
    Decomposition,
    GramStore,
    ResidualWorkload,
    centre_gram,
)
from engine.mechanisms.residual.optimal import ClassFactor, OptimalSolution, solve_optimal
from engine.mechanisms.residual.submechanisms import (
    DenseSub,
    FactorSolution,
    FourierSub,
    KronSub,
    SubMechanism,
    fourier_diag_1d,
    fourier_diag_rows,
)
from engine.mechanisms.residual.symmetry import SymmetricProblem, solve_symmetric
from engine.progress import Progress, report
from engine.workloads.blocks import Block
from engine.workloads.workload import Workload

SUB_SOLVERS = ("optimal", "residual", "kron_basis", "fourier")
#: Residual sub-problems with at least this many cells count as heavy (worth a process).
HEAVY_CELLS = 256
#: Residuals with at least this many cells are solved in class form when they have one
#: (below it the c x r factor is as cheap).
CLASS_MIN_CELLS = 1024


class SubSolver:
    """Builds unit-cost mechanisms: 1-D factors (Kronecker residuals) and joint residuals."""

    name: ClassVar[str] = ""
    #: True when the joint mechanism is a Kronecker product of per-attribute factors that do
    #: not depend on the residual's Gram (RP, RP+): nothing to solve per residual.
    fixed_factors: ClassVar[bool] = False

    def factor_key(self, gram_key: str | None, size: int, attr: int) -> Hashable:
        """Cache key of the 1-D factor for attribute ``attr`` with centred Gram ``gram_key``."""
        raise NotImplementedError

    def factor(self, gram: np.ndarray | None, size: int, attr: int) -> FactorSolution:
        """The 1-D unit-cost strategy for a (trace-1, centred) Gram on one attribute."""
        raise NotImplementedError


class OptimalSolver(SubSolver):
    """QuerySmasher's optimal sub-solver (certified dual algorithm of ``optimal.py``)."""

    name = "optimal"

    def __init__(self, tol: float = 1e-10, max_iter: int = 20_000,
                 dense_limit: int = 4096) -> None:
        self.tol, self.max_iter, self.dense_limit = tol, max_iter, dense_limit

    def factor_key(self, gram_key: str | None, size: int, attr: int) -> Hashable:
        return ("optimal", gram_key)

    def factor(self, gram: np.ndarray | None, size: int, attr: int) -> FactorSolution:
        assert gram is not None
        sol = solve_optimal(gram, self.tol, self.max_iter)
        return FactorSolution(sol.vdag, sol.basis, sol.basis_pinv,
                              sol.iterations + sol.newton_steps, sol.gap)


class ResidualSolver(SubSolver):
    """ResidualPlanner: the isotropic strategy ``V = kron_i C_d d / (d - 1)``."""

    name = "residual"
    fixed_factors = True

    def factor_key(self, gram_key: str | None, size: int, attr: int) -> Hashable:
        return ("residual", size)

    def factor(self, gram: np.ndarray | None, size: int, attr: int) -> FactorSolution:
        return rp_factor(size)


@functools.lru_cache(maxsize=256)
def rp_factor(size: int) -> FactorSolution:
    """ResidualPlanner's 1-D factor ``V = C_d d/(d-1)`` (unit diagonal, range = 1-perp)."""
    return FactorSolution.from_v(np.eye(size) - 1.0 / size)


class KronBasisSolver(SubSolver):
    """ResidualPlanner+: a fixed per-attribute basis ``V_a`` in 1-perp (unit max diagonal)."""

    name = "kron_basis"
    fixed_factors = True

    def __init__(self, bases: dict[int, np.ndarray]) -> None:
        self.bases = bases

    def factor_key(self, gram_key: str | None, size: int, attr: int) -> Hashable:
        return ("kron_basis", attr)

    def factor(self, gram: np.ndarray | None, size: int, attr: int) -> FactorSolution:
        return FactorSolution.from_v(self.bases[attr])


class FourierSolver(SubSolver):
    """Weighted Fourier factorisation: the best strategy diagonal in the DFT basis."""

    name = "fourier"

    def factor_key(self, gram_key: str | None, size: int, attr: int) -> Hashable:
        return ("fourier", gram_key)

    def factor(self, gram: np.ndarray | None, size: int, attr: int) -> FactorSolution:
        assert gram is not None
        return fourier_factor(gram)


def fourier_factor(gram: np.ndarray) -> FactorSolution:
    """The 1-D WFF strategy: ``V = sum_t (sqrt(g_t) / gamma) f_t f_t^H`` (unit diagonal)."""
    d = gram.shape[0]
    g = fourier_diag_1d(gram) / d**2
    g[0] = 0.0
    g = np.where(g > 1e-12 * g.max(), g, 0.0)
    F = np.exp(2j * np.pi * np.outer(np.arange(d), np.arange(d)) / d)  # row t = f_t
    V = np.real((F.T * (np.sqrt(g) / np.sqrt(g).sum())) @ F.conj())
    return FactorSolution.from_v(V)


def kron_basis_bases(workload: Workload, tol: float = 1e-10) -> dict[int, np.ndarray]:
    """RP+ bases: per attribute, the certified optimum ``V_a`` of the *centred* 1-D design
    problem ``min tr(G_a V^+) max diag V`` over ``V`` with range in 1-perp (spec 2.3, 6.2 (1)).

    The design Gram of attribute a is the sum of the centred, trace-normalised Grams
    ``C W^T W C`` of the distinct 1-D blocks that product terms put on a (RP+ takes one block
    per attribute; with several, each counts once). Centring before optimising is what makes
    the basis optimal for the residual pieces it serves: the optimum of the un-centred
    problem, centred afterwards (RP+'s published route, spec 6.2 (2)), spends privacy on the
    total and is up to 1.5x worse (Table 4, n = 10, prefix: 49.31 against 33.69). With one
    block per attribute the Kronecker product of these bases is QuerySmasher's own optimum.
    RP+ needs a basis of all of 1-perp (non-product terms may use any residual direction),
    so an attribute whose design does not span it (e.g. only the total) adds its centred
    identity, and an attribute used only by non-product terms (affine, abs_diff, explicit
    matrices) gets the centred identity alone, i.e. ResidualPlanner's basis.
    """
    designs: dict[int, dict[tuple, np.ndarray]] = {}
    keys: dict[int, tuple] = {}  # one content key per block object (a spec's repr is slow)
    for term in workload.terms:
        if not term.is_product:
            continue
        for attr, f in zip(term.attrs, term.factors or (), strict=True):
            if id(f) not in keys:
                keys[id(f)] = ((type(f).__name__, repr(f.spec())) if isinstance(f, Block)
                               else (id(f),))
            key = keys[id(f)]
            if key not in designs.setdefault(attr, {}):
                G = centre_gram(f.gram_array() if isinstance(f, Block) else f.gram().dense())
                if np.trace(G) > 0:
                    designs[attr][key] = G / np.trace(G)
    bases: dict[int, np.ndarray] = {}
    for attr, n in enumerate(workload.domain.shape):
        marginal = centre_gram(np.eye(n)) / (n - 1)
        grams = list(designs.get(attr, {}).values())
        if not grams:
            bases[attr] = marginal
            continue
        design = sum(grams)
        if np.linalg.matrix_rank(design, tol=1e-10 * float(np.trace(design))) < n - 1:
            design = design + marginal
        sol = solve_optimal(design, tol)
        bases[attr] = sol.basis.T @ sol.basis
    return bases


def make_solver(name: str, workload: Workload, tol: float = 1e-10, max_iter: int = 20_000,
                dense_limit: int = 4096) -> SubSolver:
    """The sub-solver registered under ``name`` (one of ``SUB_SOLVERS``)."""
    if name == "optimal":
        return OptimalSolver(tol, max_iter, dense_limit)
    if name == "residual":
        return ResidualSolver()
    if name == "kron_basis":
        return KronBasisSolver(kron_basis_bases(workload, tol))
    if name == "fourier":
        return FourierSolver()
    raise ValueError(f"sub_solver: unknown {name!r}; allowed: {', '.join(SUB_SOLVERS)}")


@dataclass(frozen=True)
class SolvedResidual:
    """One residual's mechanism and losses at privacy cost 1.

    Attributes:
        attrs: the residual's attribute set.
        mechanism: the unit-cost sub-mechanism (shared by residuals of the same group).
        loss: weighted sum of sub-query variances ``L_{A'} = tr(G V^+)``.
        loss_unweighted: the same with every weight 1.
        method: ``kron`` (Kronecker shortcut / per-attribute factors), ``dense`` (optimal
            SDP on the explicit Gram), ``symmetric`` (the optimal SDP reduced by twin
            values, ``symmetry.py``) or ``fourier`` (WFF on the DFT grid).
        group: index of the distinct sub-problem this residual shares.
        iterations: solver iterations (0 for closed forms).
        gap: certified relative optimality gap (optimal sub-solver; 0 for closed forms).
    """

    attrs: AttrSet
    mechanism: SubMechanism
    loss: float
    loss_unweighted: float
    method: str
    group: int
    iterations: int = 0
    gap: float = 0.0


@dataclass(frozen=True)
class SolveReport:
    """Every residual solved, and how many distinct sub-problems that took."""

    residuals: dict[AttrSet, SolvedResidual]
    distinct: int
    seconds: float


def _optimal_task(args: tuple[np.ndarray | ClassFactor, str, tuple[int, ...], float, int, str],
                  progress: Progress | None = None) -> OptimalSolution:
    matrix, form, grid, tol, max_iter, label = args
    if form == "classes":
        assert isinstance(matrix, ClassFactor)
        return solve_optimal(None, tol, max_iter, progress, label, classes=matrix)
    if form == "factor":
        return solve_optimal(None, tol, max_iter, progress, label, factor=matrix, grid=grid)
    return solve_optimal(matrix, tol, max_iter, progress, label, grid=grid)


def _optimal_input(res: ResidualWorkload, store: GramStore, limit: int, label: str
                   ) -> tuple[np.ndarray | ClassFactor, str]:
    """The residual's normalised Gram for the SDP and its form: ``classes`` when its pieces
    have few cell classes (affine, abs_diff: no c x r factor is formed while solving),
    ``factor`` (c x k) when its rank is below the number of cells, else ``gram`` (c x c)."""
    rank = res.factor_rank(store)
    if rank < res.cells and rank <= limit:
        classes = res.class_factor(store) if res.cells >= CLASS_MIN_CELLS else None
        if classes is not None:
            root = math.sqrt(res.trace)
            return ClassFactor(classes.sizes, tuple((labels, rows / root)
                                                    for labels, rows in classes.pieces)), \
                "classes"
        return res.gram_factor(store) / math.sqrt(res.trace), "factor"
    if res.cells > limit:
        raise NotApplicable(
            f"querysmasher (optimal): residual {label} has {res.cells:,} cells, no Kronecker "
            f"structure and rank {rank:,}; the dense SDP is limited to {limit:,} "
            "(dense_limit). Use sub_solver 'fourier', 'kron_basis' or 'residual', or raise "
            "dense_limit")
    return res.dense_gram(store) / res.trace, "gram"


def _joint_fourier(res: ResidualWorkload, store: GramStore) -> FourierSub:
    """WFF on a residual whose Gram is a sum of pieces: ``g = sum coef h / N**2``."""
    h = np.zeros(res.sizes)
    for (kind, keys), (coef, _) in res.pieces.items():
        if kind == "dense":
            h = h + coef * fourier_diag_rows(store[keys[0]], res.sizes)
        else:
            part = np.ones(())
            for key in keys:
                part = np.multiply.outer(part, fourier_diag_1d(store[key]))
            h = h + coef * part
    return FourierSub(res.sizes, h / res.cells**2)


def _solve_joint_optimal(joint: dict[Hashable, list[ResidualWorkload]], store: GramStore,
                         solver: OptimalSolver, executor: Executor | None,
                         workers: int | None, progress: Progress | None,
                         label: Callable[[AttrSet], str], done: int
                         ) -> dict[Hashable, OptimalSolution]:
    """One certified SDP per group of identical non-Kronecker residuals, through the
    executor (a process pool when several are heavy, unless one is given)."""
    signatures = list(joint)
    tasks = []
    for sig in signatures:
        first = joint[sig][0]
        matrix, form = _optimal_input(first, store, solver.dense_limit, label(first.attrs))
        tasks.append((matrix, form, first.sizes, solver.tol, solver.max_iter,
                      f"SDP {label(first.attrs)}"))
    heavy = sum(joint[sig][0].cells >= HEAVY_CELLS for sig in signatures)
    pool = executor if executor is not None else default_executor(heavy, workers)
    # progress objects hold a thread event: only an in-process solve can report per iteration
    fn = (functools.partial(_optimal_task, progress=progress)
          if isinstance(pool, SerialExecutor) else _optimal_task)

    def on_result(index: int, sol: OptimalSolution) -> None:
        report(progress, done + index + 1, sol.loss, f"solved {tasks[index][5]} "
               f"({sol.iterations + sol.newton_steps} iterations, gap {sol.gap:.1e})")

    try:
        # an SDP's cost grows about as cells**3: the largest start first, so that it does not
        # start last and finish alone while the other workers idle
        solutions = map_ordered(pool, fn, tasks, on_result=on_result, progress=progress,
                                costs=[joint[sig][0].cells for sig in signatures])
    finally:
        if executor is None:
            pool.shutdown(wait=True, cancel_futures=True)
    return dict(zip(signatures, solutions, strict=True))


def solve_residuals(decomposition: Decomposition, solver: SubSolver,
                    executor: Executor | None = None, workers: int | None = None,
                    progress: Progress | None = None, names: Sequence[str] | None = None
                    ) -> SolveReport:
    """Build a unit-cost mechanism for every residual, solving each distinct problem once.

    Args:
        decomposition: the residual sub-workloads.
        solver: the sub-solver.
        executor: runs the independent optimal SDPs (default: chosen by ``default_executor``).
        workers: passed to ``default_executor`` when no executor is given.
        progress: one report per solved sub-problem (and per solver iteration when serial).
        names: attribute names for messages.

    Returns:
        The solved residuals with their losses, and the number of distinct sub-problems.
    """
    start = time.perf_counter()
    store = decomposition.store
    names = names or [f"a{i + 1}" for i in range(len(decomposition.shape))]
    label = lambda attrs: "(" + ", ".join(names[i] for i in attrs) + ")"  # noqa: E731
    factors: dict[Hashable, FactorSolution] = {}
    subs: dict[Hashable, SubMechanism] = {}
    solved_info: dict[Hashable, tuple[int, float]] = {}  # joint SDP: (iterations, gap)
    assigned: dict[AttrSet, tuple[Hashable, str]] = {}
    joint: dict[Hashable, list[ResidualWorkload]] = {}

    def factor(gram_key: str | None, size: int, attr: int) -> tuple[Hashable, FactorSolution]:
        key = solver.factor_key(gram_key, size, attr)
        if key not in factors:
            factors[key] = solver.factor(None if gram_key is None else store[gram_key], size,
                                         attr)
        return key, factors[key]

    done = 0
    for res in decomposition:
        single = res.single_kron()
        if single is None and not solver.fixed_factors:
            joint.setdefault(res.signature(), []).append(res)
            continue
        keys = single[0] if single is not None else (None,) * len(res.attrs)
        parts = [factor(k, d, a) for k, d, a in zip(keys, res.sizes, res.attrs, strict=True)]
        sub_key = ("kron",) + tuple(k for k, _ in parts)
        if sub_key not in subs:
            subs[sub_key] = KronSub([f for _, f in parts])
            done += 1
            report(progress, done, float("nan"), f"solved {label(res.attrs)}")
        assigned[res.attrs] = (sub_key, "kron")

    if isinstance(solver, OptimalSolver):
        # residuals whose values have twins: the much smaller block problem (symmetry.py)
        for sig in list(joint):
            first = joint[sig][0]
            problem = SymmetricProblem.build(first, store)
            if problem is None:
                continue
            reduced = solve_symmetric(problem, solver.tol, solver.max_iter, progress,
                                      f"SDP {label(first.attrs)} by symmetry")
            subs[("symmetric", sig)] = reduced.mechanism
            for res in joint.pop(sig):
                assigned[res.attrs] = (("symmetric", sig), "symmetric")
            solved_info[("symmetric", sig)] = (reduced.iterations + reduced.newton_steps,
                                               reduced.gap)
            done += 1
            report(progress, done, reduced.loss, f"solved {label(first.attrs)} by symmetry "
                   f"({problem.constraints:,} class tuples for {first.cells:,} cells, gap "
                   f"{reduced.gap:.1e})")
        solutions = _solve_joint_optimal(joint, store, solver, executor, workers, progress,
                                         label, done)
        done += len(solutions)
        for sig, sol in solutions.items():
            subs[("dense", sig)] = DenseSub(joint[sig][0].sizes, sol.basis, sol.basis_pinv)
            for res in joint[sig]:
                assigned[res.attrs] = (("dense", sig), "dense")
            solved_info[("dense", sig)] = (sol.iterations + sol.newton_steps, sol.gap)
    else:
        for sig, members in joint.items():
            subs[("fourier", sig)] = _joint_fourier(members[0], store)
            for res in members:
                assigned[res.attrs] = (("fourier", sig), "fourier")
            done += 1
            report(progress, done, float("nan"), f"solved {label(members[0].attrs)}")

    group_index = {key: i for i, key in enumerate(subs)}
    traces: dict[tuple, float] = {}
    out: dict[AttrSet, SolvedResidual] = {}
    for res in decomposition:
        sub_key, method = assigned[res.attrs]
        sub = subs[sub_key]
        loss = loss_u = 0.0
        for piece, (coef, coef_u) in res.pieces.items():
            tkey = (sub_key, piece)
            if tkey not in traces:
                kind, keys = piece
                traces[tkey] = (sub.trace_rows(store[keys[0]]) if kind == "dense"
                                else sub.trace_kron([store[k] for k in keys]))
            loss += coef * traces[tkey]
            loss_u += coef_u * traces[tkey]
        if method == "kron":
            its = sum(f.iterations for f in getattr(sub, "factors", ()))
            gap = max((f.gap for f in getattr(sub, "factors", ())), default=0.0)
        elif method in ("dense", "symmetric"):
            its, gap = solved_info[sub_key]
        else:
            its, gap = 0, 0.0
        out[res.attrs] = SolvedResidual(res.attrs, sub, loss, loss_u, method,
                                        group_index[sub_key], its, gap)
    return SolveReport(out, len(subs), time.perf_counter() - start)


def wff_loss_closed_form(res: ResidualWorkload, store: GramStore) -> float:
    """``(sum_j sqrt g_j)**2`` for a residual (spec 2.4): the WFF loss without a mechanism."""
    if not res.attrs:  # the total: a single frequency, measured directly
        return res.trace
    return _joint_fourier(res, store).loss_unit


def rp_loss_closed_form(res: ResidualWorkload) -> float:
    """``prod((d-1)/d) tr G`` for a residual (spec 2.2): the ResidualPlanner loss."""
    return math.prod((d - 1) / d for d in res.sizes) * res.trace
