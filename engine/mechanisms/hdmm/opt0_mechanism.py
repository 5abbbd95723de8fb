"""``hdmm-opt0``: OPT_0 on the explicit n x n Gram of a whole (small) domain, as a registered
mechanism (the plan, its least-squares reconstruction and its views).
"""

from __future__ import annotations

from concurrent.futures import Executor

import numpy as np
import param

from engine.errors import NotApplicable
from engine.mechanisms.base import Plan, register, registered_name
from engine.mechanisms.hdmm.display import factor_views, operator_facts
from engine.mechanisms.hdmm.knobs import HdmmBase
from engine.mechanisms.hdmm.opt0 import opt0
from engine.mechanisms.hdmm.structure import ProductUnion
from engine.mechanisms.hdmm.tracking import Reporter
from engine.mechanisms.hdmm.workload_gram import WorkloadGram, workload_gram
from engine.privacy import Privacy
from engine.progress import Progress
from engine.workloads.workload import Workload

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
    gram = None
    if privacy.norm == 1:  # the p-Identity search's products with V, structured if they can be
        gram = workload_gram(workload)
        if gram is None and union is not None:
            gram = WorkloadGram.of_union(V, union)
    factor = opt0(V, privacy.norm, p=p, restarts=restarts, seed=seed, maxiter=maxiter,
                  polish_iterations=polish_iterations, tol=tol, progress=progress,
                  executor=executor, gram=gram, hierarchy=True)

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
        "p-Identity rows (default n/16 up to 128, or 1 when the workload only holds identity "
        "and total queries)."))
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

