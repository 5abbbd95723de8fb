"""OPT_M: a weighted set of marginals ``M(theta)`` (HDMM section 8; spec section 4.5).

Any product-union workload is summarised exactly, for marginal strategies, by the weights
``w`` of Thm. 10 (:attr:`ProductUnion.marginal_weights`). All marginal Grams share their
eigenspaces (Thm. 9), so with ``v = theta**2``, ``lambda = Y v`` and ``kappa = Y w``
(superset sums, O(d 2**d)):

    tr[G(v)^+ W^T W] = h(v) = sum_a mult(a) kappa(a) / lambda(a),
    dh/dv(b) = -c(b) sum_{a subset of b} mult(a) kappa(a) / lambda(a)**2     (a subset sum),

inf when some ``lambda(a) = 0`` with ``kappa(a) > 0`` (the strategy does not support W). This
equals the spec's ``n 1^T X(v)^+ w`` (Thm. 11 with its missing factor n) but costs
``O(d 2**d)`` per evaluation instead of a triangular solve with the 3**d non-zeros of X: at
d = 14 (Adult) that is 0.2M operations instead of 4.8M, and no 2**d x 2**d matrix is built.

* Laplace: minimise ``(sum theta)**2 h(theta**2)`` over ``theta >= 0`` with L-BFGS-B and
  seeded restarts (the problem is non-convex; the spec's R8 needs several starts and a tight
  tolerance). The first start is the Gaussian closed form.
* Gaussian: Thm. 13's closed form ``v = Y^-1 sqrt(Y w)`` attains the SVD bound when it is
  non-negative; otherwise its clipped version starts L-BFGS-B on ``(sum v) h(v)``.

Output weights: Laplace ``theta / sum theta``, Gaussian ``theta / ||theta||_2``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import param

from engine.domain import Domain
from engine.errors import NotApplicable
from engine.executor import SerialExecutor, map_ordered, worker_count
from engine.linalg.marginals import (
    MarginalStrategy,
    axes_of,
    characteristic,
    eigenvalues,
    from_eigenvalues,
    marginal_trace,
    multiplicities,
)
from engine.mechanisms.base import Measurement, Plan, register, registered_name
from engine.mechanisms.hdmm.display import marginal_views
from engine.mechanisms.hdmm.knobs import HdmmBase
from engine.mechanisms.hdmm.reconstruct import (
    MAX_CELLS,
    MarginalEstimates,
    answers,
    data_marginal,
    marginal_variances,
)
from engine.mechanisms.hdmm.results import MarginalsResult
from engine.mechanisms.hdmm.structure import ProductUnion
from engine.mechanisms.hdmm.tracking import Reporter, minimize_reported, reporter
from engine.privacy import Privacy
from engine.progress import Progress
from engine.workloads.workload import Workload

#: Largest number of attributes (2**d weights; the paper reports OPT_M up to d = 15).
MAX_ATTRIBUTES = 20
#: Random Laplace starts on small problems (see :func:`laplace_starts`).
SMALL_STARTS = 64


def subset_sums(f: np.ndarray, d: int) -> np.ndarray:
    """``g(b) = sum_{a subset of b} f(a)`` in O(d 2**d) (the zeta transform over subsets)."""
    g = np.array(f, dtype=float, copy=True)
    keys = np.arange(g.size)
    for bit in range(d):
        m = 1 << bit
        high = keys[(keys & m) != 0]
        g[high] += g[high ^ m]
    return g


def marginal_label(key: int, d: int) -> str:
    """``TTII``-style label: I for the attributes in the marginal, T for the others."""
    return "".join("I" if (key >> (d - 1 - i)) & 1 else "T" for i in range(d))


@dataclass
class MarginalObjective:
    """``h(v) = tr[G(v)^+ G(w)]`` and its gradient for a workload's Thm. 10 weights w.

    Args:
        w: Thm. 10 weights (2**d).
        shape: attribute sizes.
    """

    w: np.ndarray
    shape: tuple[int, ...]
    c: np.ndarray = field(init=False)
    coef: np.ndarray = field(init=False)
    live: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.shape = tuple(int(n) for n in self.shape)
        self.c = characteristic(self.shape)
        kappa = eigenvalues(self.w, self.shape)
        mult = multiplicities(self.shape)
        scale = max(float(np.abs(kappa).max()), 1e-300)
        self.live = (kappa > 1e-12 * scale) & (mult > 0)
        # mult(a) kappa(a) on the live eigenspaces, 0 elsewhere
        self.coef = np.where(self.live, mult * np.clip(kappa, 0.0, None), 0.0)

    @property
    def d(self) -> int:
        """Number of attributes."""
        return len(self.shape)

    def trace(self, v: np.ndarray) -> float:
        """``h(v)``; inf when ``G(v)`` does not support the workload."""
        lam = eigenvalues(v, self.shape)
        if np.any(lam[self.live] <= 0.0):
            return math.inf
        return float((self.coef[self.live] / lam[self.live]).sum())

    def trace_grad(self, v: np.ndarray) -> tuple[float, np.ndarray]:
        """``(h(v), dh/dv)``; ``(inf, 0)`` when unsupported."""
        lam = eigenvalues(v, self.shape)
        if np.any(lam[self.live] <= 0.0):
            return math.inf, np.zeros_like(v)
        ratio = np.zeros_like(lam)
        ratio[self.live] = self.coef[self.live] / lam[self.live]
        h = float(ratio.sum())
        inner = np.zeros_like(lam)
        inner[self.live] = ratio[self.live] / lam[self.live]
        return h, -self.c * subset_sums(inner, self.d)

    def laplace(self, theta: np.ndarray) -> tuple[float, np.ndarray]:
        """``(sum theta)**2 h(theta**2)`` and its gradient in theta."""
        total = float(theta.sum())
        h, dh = self.trace_grad(theta * theta)
        if not math.isfinite(h):
            return math.inf, np.zeros_like(theta)
        return total * total * h, 2.0 * total * h + total * total * 2.0 * theta * dh

    def gaussian(self, v: np.ndarray) -> tuple[float, np.ndarray]:
        """``(sum v) h(v)`` and its gradient in v (``v = theta**2``)."""
        total = float(v.sum())
        h, dh = self.trace_grad(v)
        if not math.isfinite(h):
            return math.inf, np.zeros_like(v)
        return total * h, h + total * dh

    def closed_form(self) -> np.ndarray:
        """Thm. 13: ``v = Y^-1 sqrt(Y w)`` (may hold small negative entries)."""
        kappa = np.where(self.live, np.clip(eigenvalues(self.w, self.shape), 0.0, None), 0.0)
        return from_eigenvalues(np.sqrt(kappa), self.shape)


def laplace_starts(restarts: int, d: int) -> int:
    """Random starts for the Laplace problem: at least ``restarts``, and up to 64 while a
    start is cheap (an evaluation costs O(d 2**d)). Small problems need them: on Table 3's
    domain only 8% of random starts reach the optimum 62,886 (others stop at 67,379)."""
    return max(restarts, min(SMALL_STARTS, 2 ** max(0, 16 - d)))


def opt_marginals(w: np.ndarray, shape: Sequence[int], norm: int, *, restarts: int = 10,
                  seed: int = 0, maxiter: int = 3000, ftol: float = 1e-12,
                  max_evaluations: int | None = None,
                  progress: Progress | Reporter | None = None,
                  executor: Executor | None = None) -> MarginalsResult:
    """OPT_M for Thm. 10 weights ``w`` in sensitivity norm ``norm`` (1 Laplace, 2 Gaussian).

    Args:
        w: Thm. 10 weights of the workload (2**d).
        shape: attribute sizes.
        norm: 1 or 2.
        restarts: Laplace random Uniform[0, 1) starts besides the closed-form one (more on
            small problems, see :func:`laplace_starts`).
        seed: seed of the starts.
        maxiter: L-BFGS-B iterations per start.
        ftol: L-BFGS-B relative tolerance (loose tolerances stop at worse local optima).
        max_evaluations: Laplace: a further start is launched only while the starts before
            it used fewer objective evaluations than this (the closed-form start always
            runs; None: every start). The same starts run on an executor.
        progress: receives (iteration, loss) from every start (on an executor: one step per
            finished batch of starts; a cancel stops the batches not yet started).
        executor: runs the Laplace starts in batches (None: one after the other here); the
            starts and their results are the same.

    Returns:
        Weights with unit sensitivity in ``norm`` and the unit-noise error
        ``||M||**2 tr[(M^T M)^+ W^T W]``.
    """
    obj = MarginalObjective(np.asarray(w, dtype=float), tuple(shape))
    v0 = obj.closed_form()
    scale = max(float(np.abs(v0).max()), 1e-300)
    info: dict[str, Any] = {"closed_form_min": float(v0.min() / scale),
                            "closed_form_negatives": int((v0 < -1e-12 * scale).sum())}
    if norm == 2:
        exact = bool(v0.min() >= -1e-12 * scale)
        v = np.clip(v0, 0.0, None)
        loss, _ = obj.gaussian(v)
        reporter(progress, "OPT_M closed form (Thm. 13)").step(loss)
        info["closed_form_optimal"] = exact
        if not exact:
            rep = reporter(progress, "OPT_M gaussian")
            f, x = minimize_reported(obj.gaussian, v / v.sum(), rep, ftol=ftol, maxiter=maxiter)
            if f < loss:
                loss, v = f, x
        theta = np.sqrt(v)
        theta = theta / np.sqrt((theta * theta).sum())
        return MarginalsResult(theta, float(obj.gaussian(theta * theta)[0]), info)
    rng = np.random.default_rng(seed)
    starts = [np.sqrt(np.clip(v0, 0.0, None))]
    starts += [rng.random(v0.size) for _ in range(laplace_starts(restarts, obj.d))]
    budget = math.inf if max_evaluations is None else max_evaluations
    results: list[tuple[float, np.ndarray, int]] = []
    if executor is None or isinstance(executor, SerialExecutor):
        for k, x0 in enumerate(starts):
            if k and sum(used for _, _, used in results) >= budget:
                break
            rep = reporter(progress, f"OPT_M laplace start {k + 1}/{len(starts)}")
            results.append(_laplace_start(obj, x0, rep, ftol, maxiter))
    else:
        for k, result in enumerate(_laplace_starts_on(executor, obj, starts, ftol, maxiter,
                                                      progress)):
            if k and sum(used for _, _, used in results) >= budget:
                break  # the serial loop launches no further start
            results.append(result)
    losses = [f for f, _, _ in results]
    best = int(np.argmin(losses))  # the first of equal losses, as a serial "f < best" keeps
    theta = results[best][1] / results[best][1].sum()
    info["start_losses"] = losses
    return MarginalsResult(theta, float(obj.laplace(theta)[0]), info)


def _laplace_start(obj: MarginalObjective, x0: np.ndarray, rep: Reporter, ftol: float,
                   maxiter: int) -> tuple[float, np.ndarray, int]:
    """One Laplace start: L-BFGS-B from ``x0`` scaled to sum 1, ``(loss, theta,
    evaluations)``."""
    count = Reporter()

    def fun(theta: np.ndarray) -> tuple[float, np.ndarray]:
        f, g = obj.laplace(theta)
        count.step(f)
        return f, g

    f, theta = minimize_reported(fun, x0 / max(float(x0.sum()), 1e-300), rep, ftol=ftol,
                                 maxiter=maxiter)
    return f, theta, count.iteration


def _laplace_starts_on(executor: Executor, obj: MarginalObjective, starts: list[np.ndarray],
                       ftol: float, maxiter: int, progress: Progress | Reporter | None
                       ) -> list[tuple[float, np.ndarray, int]]:
    """Every start on ``executor``, in contiguous batches (two per worker: a start costs
    milliseconds on small domains, less than sending it), results in start order."""
    edges = np.linspace(0, len(starts), min(len(starts), 2 * worker_count(executor)) + 1)
    ranges = [(int(a), int(b)) for a, b in zip(edges[:-1].round(), edges[1:].round(),
                                               strict=True) if b > a]
    tasks = [(obj.w, obj.shape, starts[a:b], ftol, maxiter) for a, b in ranges]
    rep = reporter(progress, f"OPT_M laplace {len(starts)} starts on {len(tasks)} tasks")

    def finished(_: int, batch: list[tuple[float, np.ndarray, int]]) -> None:
        rep.step(min(f for f, _, _ in batch))

    cancel = progress.progress if isinstance(progress, Reporter) else progress
    batches = map_ordered(executor, _laplace_starts_task, tasks, finished, cancel)
    return [result for batch in batches for result in batch]


def _laplace_starts_task(task: tuple[np.ndarray, tuple[int, ...], list[np.ndarray], float, int]
                         ) -> list[tuple[float, np.ndarray, int]]:
    """A batch of Laplace starts on an executor (no progress crosses processes)."""
    w, shape, starts, ftol, maxiter = task
    obj = MarginalObjective(w, shape)
    return [_laplace_start(obj, x0, Reporter(), ftol, maxiter) for x0 in starts]


# --------------------------------------------------------------------------------------
# plans
# --------------------------------------------------------------------------------------
def marginal_table(theta: np.ndarray, domain: Domain) -> list[dict[str, Any]]:
    """One row per measured marginal, largest weight first: key, TTII label, attribute
    names (joined by ' x ', 'total' for none), weight, cells."""
    d = len(domain)
    rows = []
    for a in np.argsort(-theta, kind="stable"):
        if theta[a] <= 0.0:
            break
        ax = axes_of(int(a), d)
        rows.append({"key": int(a), "label": marginal_label(int(a), d),
                     "attributes": " x ".join(domain.names[i] for i in ax) or "total",
                     "weight": float(theta[a]),
                     "cells": math.prod(domain.shape[i] for i in ax)})
    return rows


def marginals_plan(name: str, workload: Workload, privacy: Privacy, union: ProductUnion,
                   result: MarginalsResult, max_cells: int = MAX_CELLS) -> Plan:
    """A Plan for ``M(theta)``: measured marginal by marginal, answered by the marginal-only
    path (no data vector, any domain size)."""
    domain = workload.domain
    theta = np.where(result.theta > 0.0, result.theta, 0.0)
    strategy = MarginalStrategy(theta, domain.shape)
    trace = marginal_trace(theta**2, union.marginal_weights, domain.shape)
    table = marginal_table(theta, domain)

    def measurer(plan: Plan, data: Any, rng: np.random.Generator) -> Measurement:
        start = time.perf_counter()
        exact = strategy.measure_marginals(
            lambda ax: data_marginal(data, ax, domain, max_cells))
        y, noise = plan.add_noise(exact, rng)
        return Measurement(y, noise.noise_std, time.perf_counter() - start, noise)

    def reconstructor(plan: Plan, y: np.ndarray) -> np.ndarray:
        return answers(workload, MarginalEstimates(theta, domain.shape, np.asarray(y)))

    def variances(plan: Plan) -> np.ndarray:
        return marginal_variances(theta, workload)

    return Plan(mechanism=name, workload=workload, privacy=privacy, strategy=strategy,
                trace=trace, sensitivity={1: strategy.sensitivity(1), 2: strategy.sensitivity(2)},
                shown=marginal_views(table, result), measurer=measurer,
                reconstructor=reconstructor,
                query_variances=variances)


def check_marginals(workload: Workload, what: str) -> None:
    """NotApplicable unless the workload is a product union on at most MAX_ATTRIBUTES."""
    if not workload.is_product_union:
        bad = next(t.label for t in workload.terms if not t.is_product)
        raise NotApplicable(f"{what} summarises the workload by marginal weights (Thm. 10), "
                            f"which needs Kronecker-product terms; {bad!r} is not one")
    if len(workload.domain) > MAX_ATTRIBUTES:
        raise NotApplicable(f"{what} optimises 2**d marginal weights; d = "
                            f"{len(workload.domain)} exceeds {MAX_ATTRIBUTES}")


@register
class MarginalsMechanism(HdmmBase):
    """HDMM's OPT_M: the best weighted set of marginals."""

    name = registered_name("hdmm-marginals")
    cost_model = "marginals"
    title = "HDMM OPT_marginals"
    description = ("a weighted set of marginal tables chosen for the workload; answers come "
                   "from the noisy marginals without ever building the data vector")
    restarts = param.Integer(default=10, bounds=(1, None), doc=(
        "Random starts of the (non-convex) Laplace weight optimisation."))
    maxiter = param.Integer(default=3000, bounds=(1, None), doc=(
        "L-BFGS-B iterations per start."))
    max_evaluations = param.Integer(default=None, bounds=(1, None), allow_None=True, doc=(
        "Laplace: further random starts are launched only while the starts so far used "
        "fewer objective evaluations than this (None: every start; hdmm sets it from what "
        "its other operators spent)."))

    def check(self, workload: Workload, privacy: Privacy) -> None:
        super().check(workload, privacy)
        check_marginals(workload, "hdmm-marginals")

    def _plan(self, workload: Workload, privacy: Privacy, progress: Progress | None) -> Plan:
        union = ProductUnion.of(workload)
        result = opt_marginals(union.marginal_weights, workload.domain.shape, privacy.norm,
                               restarts=self.restarts, seed=self.seed, maxiter=self.maxiter,
                               max_evaluations=self.max_evaluations, progress=progress,
                               executor=self.executor)
        return marginals_plan(self.name, workload, privacy, union, result, self.max_cells)
