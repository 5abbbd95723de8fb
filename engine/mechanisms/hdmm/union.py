"""OPT_+: a weighted union of Kronecker strategies, one per group of products
(HDMM Def. 19; spec section 4.3).

Each group j gets its own OPT_kron strategy ``A_j`` with unit-noise error ``E_j``; the blocks
are stacked with weights ``c_j`` and every group is answered from its own block only (local
least squares, spec section 5.3). With the union's sensitivity ``sum_j c_j ||A_j||_1``
(Laplace) or ``(sum_j c_j**2 ||A_j||_2**2)**(1/2)`` (Gaussian) the error is minimised by

* Laplace: ``c_j ||A_j||_1 ∝ E_j**(1/3)``, total ``(sum_j E_j**(1/3))**3``;
* Gaussian: ``c_j ||A_j||_2 ∝ E_j**(1/4)``, total ``(sum_j E_j**(1/2))**2``.

The sensitivity formula is exact because every block has equal column norms in the norm it
was optimised for (identity, total, p-Identity and Cholesky factors all do). The plan's
``trace`` is that of the local least-squares estimator actually run (an upper bound on
least squares over the whole stack, which has no tractable pseudo-inverse).
"""

from __future__ import annotations

import math
import time
from concurrent.futures import Executor
from typing import Any

import numpy as np
import param

from engine.analysis.expected_error import per_query_variances
from engine.errors import NotApplicable
from engine.linalg.matrix import Kron, VStack
from engine.mechanisms.base import Measurement, Plan, register, registered_name
from engine.mechanisms.hdmm.display import union_views
from engine.mechanisms.hdmm.knobs import HdmmBase
from engine.mechanisms.hdmm.kron import (
    check_attributes,
    kron_trace,
    opt_kron,
)
from engine.mechanisms.hdmm.reconstruct import MAX_CELLS, kron_answers, kron_measure
from engine.mechanisms.hdmm.results import UnionResult
from engine.mechanisms.hdmm.structure import ProductUnion
from engine.mechanisms.hdmm.tracking import Reporter, reporter
from engine.privacy import Privacy
from engine.progress import Progress
from engine.workloads.groups import Product
from engine.workloads.workload import Workload

#: Largest domain on which the union's sensitivity in the other norm is computed exactly.
EXACT_SENSITIVITY_CELLS = 1_000_000

GROUPINGS = ("product", "group", "single")


def union_weights(errors: np.ndarray, sens: np.ndarray, norm: int) -> tuple[np.ndarray, float]:
    """Closed-form block weights and the union's unit-noise error.

    Args:
        errors: ``E_j`` of every block (unit noise, its own sensitivity).
        sens: ``||A_j||`` of every block in the noise norm.
        norm: 1 (Laplace) or 2 (Gaussian).

    Returns:
        ``(c, total)``: weights with sensitivity ``sum c_j ||A_j||_1 = 1`` (or
        ``sum c_j**2 ||A_j||_2**2 = 1``) and ``(sum E**(1/3))**3`` (or ``(sum E**(1/2))**2``).
    """
    E = np.asarray(errors, dtype=float)
    s = np.asarray(sens, dtype=float)
    if norm == 1:
        u = np.cbrt(E)
        u = u / u.sum()
        return u / s, float(np.cbrt(E).sum() ** 3)
    u = E**0.25
    u = u / np.sqrt((u * u).sum())
    return u / s, float(np.sqrt(E).sum() ** 2)


def gram_svd_bound(V: np.ndarray) -> float:
    """``(sum_k sqrt(lambda_k))**2 / n`` of a factor Gram ``V = W^T W``: the SVD bound, a
    certified floor on the unit-noise error of any strategy for W in either norm (the L1
    sensitivity is never below the L2 one)."""
    lam = np.linalg.eigvalsh(np.asarray(V, dtype=float))
    n = V.shape[0]
    # round-off "zeros" would add sqrt(eps) each to a *lower* bound: drop them
    tol = 10.0 * n * np.finfo(float).eps * max(float(lam.max(initial=0.0)), 0.0)
    return float(np.sqrt(np.where(lam > tol, lam, 0.0)).sum() ** 2 / n)


def union_floor(union: ProductUnion, norm: int, groups: list[list[int]]) -> float:
    """A certified lower bound on OPT_+'s unit-noise error (Def. 19's formula) for these groups.

    Whatever strategy a group's block uses, its error on product j is at least the SVD bound
    of that product, the product of its factors' bounds (Thm. 5); the error of the weighted
    union is increasing in every block's error, and the closed-form weights are optimal for
    any block errors (Hölder). So ``(sum_g (sum_{j in g} w_j**2 prod_i SVDB(V_ij))**(1/3))**3``
    (Laplace; Gaussian with square roots) bounds every OPT_+ with this grouping, whatever
    its per-group optimiser finds. On identity/total factors the bound is attained
    (marginal workloads: ``E_j`` = the marginal's cells).
    """
    bounds = [[gram_svd_bound(V) for V in grams] for grams in union.grams]
    per = union.weights2.copy()
    for i in range(union.d):
        per = per * np.array(bounds[i])[union.index[:, i]]
    floors = np.array([per[members].sum() for members in groups])
    return union_weights(floors, np.ones(len(groups)), norm)[1]


#: Most OPT_+ groups (see :func:`check_groups`).
MAX_GROUPS = 1000

def check_groups(workload: Workload, grouping: str, what: str) -> None:
    """Refuse more groups than OPT_+ handles in about a minute (its work grows with groups x
    products: 496 two-way marginals of 32 attributes take 5 s, 2,016 of 64 several minutes).
    """
    groups = len(groups_of(workload, grouping))
    if groups > MAX_GROUPS:
        raise NotApplicable(f"{what} optimises one Kronecker strategy per group against every "
                            f"product; {groups:,} groups exceed the limit {MAX_GROUPS:,} (use "
                            "hdmm-kron, hdmm-marginals or residual-planner)")


def groups_of(workload: Workload, grouping: str) -> list[list[int]]:
    """Product indices of each union group: one per product, per spec group, or all."""
    k = len(workload.terms)
    if grouping == "single":
        return [list(range(k))]
    if grouping == "group":
        out: dict[int, list[int]] = {}
        for j, t in enumerate(workload.terms):
            out.setdefault(t.group, []).append(j)
        return list(out.values())
    return [[j] for j in range(k)]


def opt_union(union: ProductUnion, norm: int, groups: list[list[int]], *, restarts: int = 4,
              seed: int = 0, sweeps: int = 10, maxiter: int = 300, polish_iterations: int = 200,
              progress: Progress | Reporter | None = None,
              executor: Executor | None = None) -> UnionResult:
    """OPT_+: OPT_kron per group (p-Identity restarts in batches on ``executor``), then the
    closed-form weights."""
    blocks = []
    for g, members in enumerate(groups):
        rep = reporter(progress, f"OPT_+ group {g + 1}/{len(groups)}")
        blocks.append(opt_kron(union.subset(members), norm, restarts=restarts,
                               seed=seed + g, sweeps=sweeps, maxiter=maxiter,
                               polish_iterations=polish_iterations, progress=rep,
                               executor=executor))
    errors = np.array([b.loss for b in blocks])
    sens = np.array([math.prod(f.sensitivity[norm] for f in b.factors) for b in blocks])
    weights, total = union_weights(errors, sens, norm)
    return UnionResult(tuple(tuple(m) for m in groups), tuple(blocks), weights, errors, total)


def _sub_workload(workload: Workload, members: tuple[int, ...]) -> Workload:
    """The products of one group as a workload of its own (for per-query variances)."""
    names = workload.domain.names
    products = []
    for j in members:
        t = workload.terms[j]
        products.append(Product(tuple((names[i], f) for i, f in zip(t.attrs, t.factors,
                                                                     strict=True)),
                                weight=t.weight))
    return Workload(workload.domain, tuple(products))


def union_plan(name: str, workload: Workload, privacy: Privacy, union: ProductUnion,
               result: UnionResult, max_cells: int = MAX_CELLS) -> Plan:
    """A Plan for a weighted union of Kronecker blocks with local least squares."""
    live = [g for g, c in enumerate(result.weights) if c > 0.0]
    mats = {g: [f.matrix for f in result.blocks[g].factors] for g in live}
    pinvs = {g: [f.pinv_matrix() for f in result.blocks[g].factors] for g in live}
    weights = {g: float(result.weights[g]) for g in live}
    # The closures below keep only the groups, not ``result``: its blocks' factors hold every
    # optimiser's matrices (337 MB on Adult), which a plan pickled between processes carries.
    groups = result.groups
    strategy = VStack([Kron(mats[g]) for g in live], [weights[g] for g in live])
    exact = workload.domain.size <= EXACT_SENSITIVITY_CELLS
    sens = {p: strategy.sensitivity(p) if exact else strategy.sensitivity_bound(p)
            for p in (1, 2)}
    trace = 0.0
    for g in live:
        sub = union.subset(list(result.groups[g]))
        trace += kron_trace(sub, result.blocks[g].traces) / weights[g] ** 2

    def measurer(plan: Plan, data: Any, rng: np.random.Generator) -> Measurement:
        start = time.perf_counter()
        y = np.concatenate([weights[g] * kron_measure(mats[g], data, workload.domain,
                                                      max_cells) for g in live])
        y, noise = plan.add_noise(y, rng)
        return Measurement(y, noise.noise_std, time.perf_counter() - start, noise)

    def reconstructor(plan: Plan, y: np.ndarray) -> np.ndarray:
        pieces = strategy.split(np.asarray(y, dtype=float))
        out: list[np.ndarray | None] = [None] * len(workload.terms)
        for piece, g in zip(pieces, live, strict=True):
            members = groups[g]
            ans = kron_answers(pinvs[g], mats[g], piece, workload, members, weights[g])
            pos = 0
            for j in members:
                size = workload.terms[j].num_queries
                out[j] = ans[pos:pos + size]
                pos += size
        # a group with zero error (zero-weight queries) is not measured: its answers are 0
        return np.concatenate([a if a is not None else np.zeros(workload.terms[j].num_queries)
                               for j, a in enumerate(out)])

    def variances(plan: Plan) -> np.ndarray:
        out = [np.zeros(t.num_queries) for t in workload.terms]
        for g in live:
            members = groups[g]
            v = per_query_variances(_sub_workload(workload, members), Kron(mats[g]))
            v = v / weights[g] ** 2
            pos = 0
            for j in members:
                size = workload.terms[j].num_queries
                out[j] = v[pos:pos + size]
                pos += size
        return np.concatenate(out)

    return Plan(mechanism=name, workload=workload, privacy=privacy, strategy=strategy,
                trace=trace, sensitivity=sens, shown=union_views(workload, result, exact),
                measurer=measurer,
                reconstructor=reconstructor, query_variances=variances)


@register
class UnionMechanism(HdmmBase):
    """HDMM's OPT_+: a weighted union of per-group Kronecker strategies."""

    name = registered_name("hdmm-union")
    cost_model = "factors"
    title = "HDMM OPT_+"
    description = ("one optimised Kronecker strategy per group of queries, stacked with "
                   "closed-form weights; each group is answered from its own measurements")
    grouping = param.Selector(default="product", objects=list(GROUPINGS), doc=(
        "How products are grouped: one group per product, per workload item, or a single "
        "group (= OPT_kron)."))
    sweeps = param.Integer(default=10, bounds=(1, None), doc=(
        "Largest number of OPT_kron sweeps inside each group."))

    def check(self, workload: Workload, privacy: Privacy) -> None:
        super().check(workload, privacy)
        check_attributes(workload, "hdmm-union")
        check_groups(workload, self.grouping, "hdmm-union")

    def _plan(self, workload: Workload, privacy: Privacy, progress: Progress | None) -> Plan:
        union = ProductUnion.of(workload)
        result = opt_union(union, privacy.norm, groups_of(workload, self.grouping),
                           restarts=self.restarts, seed=self.seed, sweeps=self.sweeps,
                           maxiter=self.maxiter, polish_iterations=self.polish_iterations,
                           progress=progress, executor=self.executor)
        return union_plan(self.name, workload, privacy, union, result, self.max_cells)
