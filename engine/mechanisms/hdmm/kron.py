"""OPT_kron: one Kronecker strategy ``A_1 kron ... kron A_d`` for a union of products
(HDMM section 6, Defs. 17-18; spec section 4.2).

The error of a Kronecker strategy on ``W = [w_j kron_i W_ij]`` is
``sum_j w_j**2 prod_i E_ij`` with ``E_ij = ||A_i||**2 tr[(A_i^T A_i)^+ V_ij]``. With every
factor but A_i fixed this is exactly ``C(A_i; sum_j c_j V_ij)`` with
``c_j = w_j**2 prod_{i' != i} E_i'j``, so the operator is block-coordinate descent: OPT_0 on
that surrogate Gram for each attribute in turn (starting from identity factors), sweeping
until a sweep improves the error by less than ``tol``. A new factor is kept only when it
lowers the error (OPT_0 is heuristic for Laplace). A single product separates exactly and
needs one sweep.
"""

from __future__ import annotations

import math
import time
from concurrent.futures import Executor
from typing import Any

import numpy as np
import param

from engine.errors import NotApplicable
from engine.linalg.matrix import Kron
from engine.mechanisms.base import Measurement, Plan, register, registered_name
from engine.mechanisms.hdmm.display import kron_views
from engine.mechanisms.hdmm.knobs import HdmmBase
from engine.mechanisms.hdmm.opt0 import identity_factor, opt0
from engine.mechanisms.hdmm.reconstruct import MAX_CELLS, kron_answers, kron_measure
from engine.mechanisms.hdmm.results import Factor, KronResult
from engine.mechanisms.hdmm.structure import ProductUnion
from engine.mechanisms.hdmm.tracking import Reporter, reporter
from engine.privacy import Privacy
from engine.progress import Progress
from engine.workloads.workload import Workload

#: Largest attribute OPT_0 is run on (an explicit n x n Gram per attribute).
MAX_ATTRIBUTE = 8192


def _errors(union: ProductUnion, i: int, factor: Factor, norm: int) -> np.ndarray:
    """``E_ij`` of a factor for every distinct Gram on attribute i."""
    return np.array([factor.error(V, norm) for V in union.grams[i]])


def _loss(union: ProductUnion, E: list[np.ndarray]) -> float:
    per = np.ones(union.k)
    for i in range(union.d):
        per = per * E[i][union.index[:, i]]
    with np.errstate(invalid="ignore"):
        total = float((union.weights2 * per).sum())
    return total if math.isfinite(total) else math.inf


def opt_kron(union: ProductUnion, norm: int, *, restarts: int = 4, seed: int = 0,
             sweeps: int = 10, tol: float = 1e-6, maxiter: int = 300,
             polish_iterations: int = 200, progress: Progress | Reporter | None = None,
             executor: Executor | None = None) -> KronResult:
    """OPT_kron on a product union in sensitivity norm ``norm`` (1 Laplace, 2 Gaussian).

    Args:
        union: the workload's per-attribute factor Grams.
        norm: 1 or 2.
        restarts: most p-Identity random starts in the first sweep (later sweeps warm-start
            from the current factor plus one random start; see
            :func:`~engine.mechanisms.hdmm.opt0.optimize_pidentity` for the rule).
        seed: base seed of the starts.
        sweeps: largest number of sweeps over the attributes.
        tol: stop when a sweep lowers the error by less than this fraction.
        maxiter: OPT_0 iterations per start.
        polish_iterations: OPT_0 polishing iterations.
        progress: receives (iteration, loss) from every inner optimiser.
        executor: runs batches of the first sweep's p-Identity restarts.
    """
    d = union.d
    factors = [identity_factor(n, np.eye(n), norm) for n in union.shape]
    E = [_errors(union, i, factors[i], norm) for i in range(d)]
    loss = _loss(union, E)
    history = [loss]
    for sweep in range(sweeps if union.k > 1 else 1):
        start = loss
        for i in range(d):
            if union.shape[i] == 1:
                continue
            per = np.ones(union.k)
            for i2 in range(d):
                if i2 != i:
                    per = per * E[i2][union.index[:, i2]]
            if not np.all(np.isfinite(per)):
                continue
            V = union.surrogate(i, union.weights2 * per)
            scale = float(np.trace(V)) / V.shape[0]
            if not scale > 0.0:
                continue
            # the surrogate weights are products of errors and can be huge: normalise (one
            # attribute has no other errors: its surrogate is the workload's own Gram, kept
            # as it is so that OPT_kron solves exactly hdmm-opt0's problem)
            scale = scale if d > 1 else 1.0
            rep = reporter(progress, f"OPT_kron sweep {sweep + 1}, attribute {i + 1}/{d}")
            candidate = opt0(V / scale, norm, restarts=restarts if sweep == 0 else 1,
                             seed=seed + 7919 * sweep + 104729 * i, maxiter=maxiter,
                             polish_iterations=polish_iterations, init=factors[i],
                             progress=rep, executor=executor)
            E_new = _errors(union, i, candidate, norm)
            trial = E[:i] + [E_new] + E[i + 1:]
            new_loss = _loss(union, trial)
            if new_loss < loss:
                factors[i], E, loss = candidate, trial, new_loss
        history.append(loss)
        if start - loss <= tol * start:
            break
    traces = np.empty((union.k, d))
    for i, f in enumerate(factors):
        tr = np.array([f.trace(V) for V in union.grams[i]])
        traces[:, i] = tr[union.index[:, i]]
    return KronResult(tuple(factors), traces, loss, tuple(history))


# --------------------------------------------------------------------------------------
# plans
# --------------------------------------------------------------------------------------
def kron_trace(union: ProductUnion, traces: np.ndarray) -> float:
    """``tr[(A^T A)^+ W^T W] = sum_j w_j**2 prod_i tr_ij`` (inf when unsupported)."""
    with np.errstate(invalid="ignore"):
        total = float((union.weights2 * np.prod(traces, axis=1)).sum())
    return total if math.isfinite(total) else math.inf


def kron_sensitivity(factors: tuple[Factor, ...]) -> dict[int, float]:
    """Exact ``{1: L1, 2: L2}`` of the Kronecker product (products of the factors')."""
    return {p: math.prod(f.sensitivity[p] for f in factors) for p in (1, 2)}


def kron_plan(name: str, workload: Workload, privacy: Privacy, union: ProductUnion,
              result: KronResult, max_cells: int = MAX_CELLS) -> Plan:
    """A Plan for a Kronecker strategy, measured and reconstructed factor-wise."""
    factors = result.factors
    pinvs = [f.pinv_matrix() for f in factors]
    mats = [f.matrix for f in factors]

    def measurer(plan: Plan, data: Any, rng: np.random.Generator) -> Measurement:
        start = time.perf_counter()
        y = kron_measure(mats, data, workload.domain, max_cells)
        y, noise = plan.add_noise(y, rng)
        return Measurement(y, noise.noise_std, time.perf_counter() - start, noise)

    def reconstructor(plan: Plan, y: np.ndarray) -> np.ndarray:
        return kron_answers(pinvs, mats, y, workload)

    return Plan(mechanism=name, workload=workload, privacy=privacy, strategy=Kron(mats),
                trace=kron_trace(union, result.traces), sensitivity=kron_sensitivity(factors),
                shown=kron_views(workload, result), measurer=measurer,
                reconstructor=reconstructor)


def check_attributes(workload: Workload, what: str) -> None:
    """NotApplicable unless every term is a product and every attribute fits OPT_0."""
    if not workload.is_product_union:
        bad = next(t.label for t in workload.terms if not t.is_product)
        raise NotApplicable(f"{what} needs every term to be a Kronecker product of "
                            f"per-attribute queries; {bad!r} is not")
    for attr in workload.domain:
        if attr.size > MAX_ATTRIBUTE:
            raise NotApplicable(f"{what} runs OPT_0 on every attribute; {attr.name} has "
                                f"{attr.size:,} values (limit {MAX_ATTRIBUTE:,})")


@register
class KronMechanism(HdmmBase):
    """HDMM's OPT_kron: the best single Kronecker-product strategy."""

    name = registered_name("hdmm-kron")
    cost_model = "factors"
    title = "HDMM OPT_kron"
    family = "hdmm"
    description = ("one optimised strategy per attribute, combined as a Kronecker product "
                   "(block-coordinate descent over the attributes)")
    sweeps = param.Integer(default=10, bounds=(1, None), doc=(
        "Largest number of sweeps over the attributes."))

    def check(self, workload: Workload, privacy: Privacy) -> None:
        super().check(workload, privacy)
        check_attributes(workload, "hdmm-kron")

    def _plan(self, workload: Workload, privacy: Privacy, progress: Progress | None) -> Plan:
        union = ProductUnion.of(workload)
        result = opt_kron(union, privacy.norm, restarts=self.restarts, seed=self.seed,
                          sweeps=self.sweeps, maxiter=self.maxiter,
                          polish_iterations=self.polish_iterations, progress=progress,
                          executor=self.executor)
        return kron_plan(self.name, workload, privacy, union, result, self.max_cells)

