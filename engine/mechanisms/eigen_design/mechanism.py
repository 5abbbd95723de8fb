"""The registered ``eigen-design`` mechanism (Li & Miklau, PVLDB 2012).

Routes a workload to one of four computations (``plan.fact("structure")`` says which):

* ``dense`` (n <= ``max_dense_cells``): eigendecomposition of the dense Gram, Program 1 on the
  eigen-queries (or a reduction of it, or a Wavelet/Fourier design set), diagonal completion,
  exact error;
* ``partial`` (principal vectors or eigen-separation above ``max_dense_cells``, L2 only):
  randomized dominant subspace of the implicit Gram, no full eigendecomposition;
* ``closed-form`` (separation on one all-range block above ``max_dense_cells``, L2): the
  all-range Gram's eigen-queries are the sine basis (``sines``), so neither a full nor an
  iterative eigensolver is needed;
* ``kronecker`` (product-union workloads on several attributes above ``max_dense_cells``, or
  when asked for): per-attribute eigenbases, Program 1 through Kronecker mat-vecs, no
  completion (see ``structured`` for where it stops).

Noise: ``noise_handling = auto`` optimises the weights for the plan's noise: L2 column norms
(Gram weights, the paper's main algorithm) for Gaussian and zCDP, L1 column sums (row weights,
section 3.5) for Laplace. The paper's Gaussian calibration ``sqrt(2 ln(2/delta)) / eps`` is
``Privacy(calibration="li-miklau")``; it changes absolute errors only, never the strategy.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace
from typing import Any

import numpy as np
import param

from engine.analysis.cost_model import FLOAT, OVERHEAD, Cost, estimate_model
from engine.analysis.expected_error import per_query_variances
from engine.errors import NotApplicable
from engine.linalg.matrix import DENSE_GUARD, Kron
from engine.mechanisms.base import Mechanism, Plan, register, registered_name
from engine.mechanisms.eigen_design.design import (
    GRAM_LIMIT,
    ZERO_TOL,
    EigenQueries,
    WeightedDesign,
    basis_design,
    dense_gram,
    eigen_design,
    eigen_queries,
)
from engine.mechanisms.eigen_design.designsets import (
    DESIGN_SETS,
    L1_CANDIDATES,
    basis,
    kron_dense,
)
from engine.mechanisms.eigen_design.display import eigen_views
from engine.mechanisms.eigen_design.gram import GramOperator
from engine.mechanisms.eigen_design.program1 import GAP_TOL
from engine.mechanisms.eigen_design.reductions import (
    default_group_size,
    eigen_separation,
    principal_vectors,
    principal_vectors_partial,
    separation_partial,
)
from engine.mechanisms.eigen_design.sines import all_range_separation
from engine.mechanisms.eigen_design.structured import (
    MAX_CELLS,
    kron_design,
    kron_query_variances,
)
from engine.privacy import Privacy
from engine.progress import Progress, report
from engine.workloads.blocks import AllRangeBlock
from engine.workloads.workload import Workload

#: Per-query variances are computed for at most this many (query x cell) products.
VARIANCE_WORK = 2_000_000_000


@register
class EigenDesignMechanism(Mechanism):
    """Optimally weighted eigen-queries of the workload (Li & Miklau's Eigen-Design)."""

    name = registered_name("eigen-design")
    title = "Eigen-Design"
    family = "adaptive"
    description = ("weights the eigenvectors of the workload's Gram matrix optimally and "
                   "measures them; within a few percent of the SVD lower bound on most "
                   "workloads")

    reduction = param.Selector(default="none", objects=["none", "separation", "principal"],
                               doc="Workload reduction for large n: none (full Program 1), "
                                   "separation (groups of eigen-queries, then one scale per "
                                   "group) or principal (top eigen-queries + one shared "
                                   "weight). Faster, slightly less accurate.")
    fraction = param.Number(default=0.1, bounds=(0.0, 1.0), inclusive_bounds=(False, True),
                            doc="principal: fraction of the non-zero eigen-queries weighted "
                                "individually (6 % costs ~14 %, 25 % ~2.6 % on all ranges).")
    group_size = param.Integer(default=0, bounds=(0, None),
                               doc="separation: eigen-queries per group; 0 = the power of two "
                                   "nearest n**(1/3) (the paper's choice).")
    separation_fraction = param.Number(default=0.25, bounds=(0.0, 1.0),
                                       inclusive_bounds=(False, True),
                                       doc="separation with the partial eigensolver: fraction "
                                           "of the n eigen-queries computed; the rest share "
                                           "one weight (all ranges: 20 % costs ~1.7 %, 25 % "
                                           "~1 % over the full algorithm).")
    noise_handling = param.Selector(default="auto", objects=["auto", "l2", "l1"],
                                    doc="Which sensitivity the weights are optimised for: "
                                        "auto (L1 for Laplace, L2 otherwise), l2 (the "
                                        "paper's (eps, delta) algorithm) or l1 (section 3.5).")
    design_set = param.Selector(default="auto", objects=["auto", *DESIGN_SETS],
                                doc="Design queries weighted by Program 1: auto (the "
                                    "eigen-queries under L2, or the identity if exactly as "
                                    "good; under L1, where no design set is universally good, "
                                    "the best of eigen, wavelet, fourier and identity), or "
                                    "one of them (Figure 5).")
    completion = param.Boolean(default=True,
                               doc="Add single-cell queries so every column reaches the "
                                   "sensitivity (never increases error; dense path only).")
    structure = param.Selector(default="auto", objects=["auto", "dense", "kronecker"],
                               doc="auto: dense up to max_dense_cells, then the Kronecker "
                                   "structure of product workloads; or force one.")
    eigensolver = param.Selector(default="auto", objects=["auto", "full", "partial"],
                                 doc="principal and separation: full eigendecomposition, or "
                                     "a randomized dominant subspace of the implicit Gram "
                                     "(partial; auto above max_dense_cells).")
    max_dense_cells = param.Integer(default=4096, bounds=(1, GRAM_LIMIT),
                                    doc="Largest domain for a dense n x n "
                                        "eigendecomposition (O(n**3) time, 8 n**2 bytes).")
    max_cells = param.Integer(default=MAX_CELLS, bounds=(1, None),
                              doc="Largest domain of the Kronecker path (vectors of n "
                                  "entries).")
    solver = param.Selector(default="auto", objects=["auto", "dual", "ipm", "cvxpy"],
                            doc="Program 1 solver: auto, our dual (L-BFGS-B), our interior "
                                "point, or cvxpy/Clarabel.")
    gap_tolerance = param.Number(default=GAP_TOL, bounds=(1e-14, 0.1),
                                 doc="Program 1 stops at this certified relative duality gap "
                                     "(the gap reached is in the plan's program1 view).")
    max_iterations = param.Integer(default=3000, bounds=(10, None),
                                   doc="Iteration cap of Program 1's dual solver; large "
                                       "Kronecker problems with approximate bases can need "
                                       "thousands (SF1, grouped by twin values: 1,350 "
                                       "iterations to a gap of 6e-7).")
    zero_tol = param.Number(default=ZERO_TOL, bounds=(0.0, 1e-3),
                            doc="Eigenvalues below zero_tol * max are dropped.")
    seed = param.Integer(default=0, doc="Seed of the randomized subspace / basis choices.")

    # ----- routing ------------------------------------------------------------------------
    def _norm(self, privacy: Privacy) -> int:
        if self.noise_handling == "auto":
            return privacy.norm
        return 1 if self.noise_handling == "l1" else 2

    def _route(self, workload: Workload, privacy: Privacy) -> str:
        n = workload.domain.size
        norm = self._norm(privacy)
        eigen_only = self.design_set == "eigen" or (self.design_set == "auto" and (
            norm == 2 or self.reduction != "none"))
        partial_ok = (self.reduction in ("principal", "separation") and eigen_only
                      and norm == 2 and n <= GRAM_LIMIT)
        if self.reduction != "none" and not eigen_only:
            raise NotApplicable("eigen-design: reductions apply to the eigen-query design "
                                "set only")
        if self.structure == "kronecker":
            if self.reduction != "none":
                raise NotApplicable("eigen-design: the Kronecker path needs no reduction "
                                    "(its Program 1 is already linear in n); set "
                                    "reduction=none")
            return "kronecker"
        if self.eigensolver == "partial":
            if not partial_ok:
                raise NotApplicable("eigen-design: eigensolver=partial needs reduction="
                                    "principal or separation, the eigen design set, L2 noise "
                                    f"and n <= {GRAM_LIMIT:,}")
            return "partial"
        if n <= self.max_dense_cells:
            return "dense"
        if (self.reduction == "separation" and eigen_only and norm == 2
                and self.eigensolver == "auto" and _all_range_weight(workload) is not None):
            return "closed-form"
        if self.structure == "dense" or self.eigensolver == "full":
            raise NotApplicable(f"eigen-design: {n:,} cells exceed max_dense_cells = "
                                f"{self.max_dense_cells:,} for a dense eigendecomposition")
        if partial_ok:
            return "partial"
        if workload.is_product_union and len(workload.domain) > 1 and self.reduction == "none":
            return "kronecker"
        raise NotApplicable(
            f"eigen-design: {n:,} cells exceed max_dense_cells = {self.max_dense_cells:,}; "
            "beyond it use reduction=principal or separation (L2 noise, up to "
            f"{GRAM_LIMIT:,} cells) or a product workload on several attributes (Kronecker "
            "path)")

    def check(self, workload: Workload, privacy: Privacy) -> None:
        """Refuse what the chosen route cannot serve (with the reason)."""
        super().check(workload, privacy)
        route = self._route(workload, privacy)
        if route == "kronecker":
            if not workload.is_product_union:
                raise NotApplicable("eigen-design: the Kronecker path needs a union of "
                                    "Kronecker products")
            if workload.domain.size > self.max_cells:
                raise NotApplicable(f"eigen-design: {workload.domain.size:,} cells exceed "
                                    f"max_cells = {self.max_cells:,}")

    def estimate(self, workload: Workload, privacy: Privacy) -> Cost:
        """Per-attribute designs on the Kronecker route, the dense Gram on the dense route.

        The closed-form and partial routes never form the Gram's eigendecomposition; their
        planning cost was measured on all-range workloads at n = 4,096-8,192 (2026-11-25, one
        BLAS thread): closed-form peaks at 1.03 n x n float arrays and takes time growing as
        n**2 (4.8 s at 8,192); partial (separation, fraction 0.25) peaks at 1.63 of them and
        grows as n**3 (21 s at 8,192). The constants below keep a margin over those.
        """
        route = self._route(workload, privacy)
        if route == "kronecker":
            return estimate_model("factors", workload)
        cost = estimate_model("dense", workload)
        n = float(workload.domain.size)
        square = FLOAT * n * n
        if route == "closed-form":
            return replace(cost, plan_bytes=1.25 * square + OVERHEAD,
                           plan_operations=800.0 * n * n,
                           plan_what=f"one {n:,.0f} x {n:,.0f} array (closed-form eigen-queries)")
        if route == "partial":
            fraction = (self.separation_fraction if self.reduction == "separation"
                        else self.fraction)
            return replace(cost, plan_bytes=2.0 * square + OVERHEAD,
                           plan_operations=2.0 * max(fraction, 0.05) * n**3,
                           plan_what=f"{n:,.0f} x {n:,.0f} arrays (partial eigensolver)")
        return cost

    # ----- planning -----------------------------------------------------------------------
    def _plan(self, workload: Workload, privacy: Privacy, progress: Progress | None) -> Plan:
        route = self._route(workload, privacy)
        norm = self._norm(privacy)
        timings: dict[str, float] = {}
        settings: dict[str, Any] = {"kind": "eigen-design", "structure": route, "norm": norm,
                                    "noise_handling": self.noise_handling,
                                    "design_set": self.design_set, "reduction": self.reduction}
        if privacy.noise == "gaussian":
            settings["calibration"] = privacy.calibration
        bound = None
        eig = None
        candidates: dict[str, float] = {}
        if route == "kronecker":
            start = time.perf_counter()
            design, candidates = _best([
                (name, lambda name=name: kron_design(
                    workload, norm, design_set=name, max_cells=self.max_cells,
                    method=self.solver, tol=self.gap_tolerance,
                    max_iter=self.max_iterations, seed=self.seed, progress=progress))
                for name in self._design_sets(norm)], norm)
            timings["program1"] = time.perf_counter() - start
            bound = design.info.get("svd_bound")
        elif route == "closed-form":
            start = time.perf_counter()
            design = all_range_separation(workload.domain.size, self.group_size or None,
                                          weight=_all_range_weight(workload),
                                          complete=self.completion, progress=progress)
            timings["design"] = time.perf_counter() - start
            bound = design.info["svd_bound"]
        elif route == "partial":
            # fast products with the Gram; the dense one only for non-product terms
            G = (GramOperator(workload) if workload.is_product_union
                 else dense_gram(workload))
            start = time.perf_counter()
            if self.reduction == "separation":
                design = separation_partial(G, self.separation_fraction,
                                            self.group_size or None,
                                            complete=self.completion, seed=self.seed,
                                            progress=progress)
            else:
                design = principal_vectors_partial(G, self.fraction,
                                                   complete=self.completion,
                                                   seed=self.seed, progress=progress)
            timings["design"] = time.perf_counter() - start
        else:
            start = time.perf_counter()
            report(progress, 0, math.nan, "workload Gram")
            G = dense_gram(workload)
            timings["gram"] = time.perf_counter() - start
            report(progress, 0, math.nan, "eigendecomposition")
            eig = eigen_queries(G, self.zero_tol)
            del G
            timings["eigh"] = eig.seconds
            bound = eig.svd_bound
            start = time.perf_counter()
            design, candidates = self._dense_design(eig, workload, norm, progress)
            timings["design"] = time.perf_counter() - start
        A = design.strategy
        unit = design.sensitivity[2] ** 2 * design.trace
        if bound is not None and unit < bound * (1.0 - 1e-9):
            raise ArithmeticError(f"eigen-design: computed error {unit:.10g} is below the SVD "
                                  f"lower bound {bound:.10g} (numerical failure)")
        views = eigen_views(settings, design, eig, bound, workload.domain.names,
                            workload.domain.shape, timings, candidates)
        return Plan(mechanism=self.name, workload=workload, privacy=privacy, strategy=A,
                    trace=design.trace, sensitivity=design.sensitivity,
                    shown=views, reconstructor=_reconstructor(design),
                    query_variances=_variances(design, route))

    def _design_sets(self, norm: int) -> list[str]:
        if self.design_set != "auto":
            return [self.design_set]
        if self.reduction != "none":
            return ["eigen"]
        # under L2 the identity is inside the eigen family (u = 1), up to the solver's gap;
        # keeping it as a candidate makes "never worse than the identity" exact
        return ["eigen", "identity"] if norm == 2 else list(L1_CANDIDATES)

    def _dense_design(self, eig: EigenQueries, workload: Workload, norm: int,
                      progress: Progress | None) -> tuple[WeightedDesign, dict[str, float]]:
        if self.reduction == "separation":
            return eigen_separation(eig, self.group_size or default_group_size(eig.n), norm,
                                    complete=self.completion, progress=progress), {}
        if self.reduction == "principal":
            return principal_vectors(eig, self.fraction, norm, complete=self.completion,
                                     progress=progress), {}

        def build(name: str) -> WeightedDesign:
            if name == "eigen":
                return eigen_design(eig, norm, complete=self.completion, method=self.solver,
                                    tol=self.gap_tolerance, max_iter=self.max_iterations,
                                    progress=progress)
            Q = kron_dense([basis(name, m) for m in workload.domain.shape])
            return basis_design(Q, eig, norm, complete=self.completion, method=self.solver,
                                tol=self.gap_tolerance, max_iter=self.max_iterations,
                                name=name, progress=progress)

        return _best([(name, lambda name=name: build(name))
                      for name in self._design_sets(norm)], norm)


def _all_range_weight(workload: Workload) -> float | None:
    """The weight of a workload made of one all-range block, else None."""
    if len(workload.domain) != 1 or len(workload.terms) != 1:
        return None
    term = workload.terms[0]
    if not term.is_product or not isinstance(term.full_factors()[0], AllRangeBlock):
        return None
    return float(term.weight)


def _best(builders, norm: int) -> tuple[WeightedDesign, dict[str, float]]:
    """The design with the smallest error among ``(name, build)`` candidates, and all errors."""
    best, errors = None, {}
    for name, build in builders:
        design = build()
        errors[name] = design.unit_error(norm)
        if best is None or errors[name] < best.unit_error(norm):
            best = design
    return best, errors


def _reconstructor(design: WeightedDesign):
    solver = design.solver

    def reconstruct(plan: Plan, y: np.ndarray) -> np.ndarray:
        # least squares through the strategy's structure: x = (A^T A)^+ A^T y
        return plan.workload.answer(solver.apply(plan.strategy.rmatvec(y)))

    return reconstruct


def _variances(design: WeightedDesign, route: str):
    if route == "kronecker":
        return lambda plan: kron_query_variances(plan.workload, design)

    def variances(plan: Plan) -> np.ndarray:
        workload = plan.workload
        if len(workload.domain) == 1:
            # a one-factor Kronecker product: the interval formulas of
            # engine.analysis.expected_error apply
            return per_query_variances(workload, Kron([plan.strategy]))
        return _generic_variances(workload, design)

    return variances


def _generic_variances(workload: Workload, design: WeightedDesign) -> np.ndarray:
    """``w^T (A^T A)^+ w`` for every workload row, a chunk of rows at a time."""
    n = workload.domain.size
    if workload.num_queries * n > VARIANCE_WORK:
        raise NotApplicable(f"per-query variances of {workload.num_queries:,} queries over "
                            f"{n:,} cells are not listed (limit {VARIANCE_WORK:,} products)")
    solver = design.solver
    parts = []
    for t in workload.terms:
        M = t.full_matrix()
        m = M.shape[0]
        # identity columns (m x chunk) and the rows they pick (n x chunk) stay ~100 MB
        chunk = max(1, min(DENSE_GUARD // (4 * n), DENSE_GUARD // (4 * m)))
        out = np.empty(m)
        for lo in range(0, m, chunk):
            hi = min(m, lo + chunk)
            E = np.zeros((m, hi - lo))
            E[np.arange(lo, hi), np.arange(hi - lo)] = 1.0
            rows = M.rmatvec(E)  # (n x chunk): the workload rows as columns
            out[lo:hi] = (rows * solver.apply(rows)).sum(axis=0)
        parts.append(t.weight**2 * out)
    return np.concatenate(parts)
