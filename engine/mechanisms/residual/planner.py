"""ResidualPlanner's plan (Xiao, He, Zhang, Kifer, NeurIPS 2023); registered as
``residual-planner`` in ``mechanism.py``.

One Gaussian mechanism per attribute set A' in the downward closure of the workload: it
releases the residual ``z_{A'} = H_{A'} (x_{A'} + xi)``, ``H_{A'} = kron_{i in A'} S_{d_i}``
(subtraction matrices), ``xi ~ N(0, tau2_{A'} I)``, at privacy cost ``p_{A'} / tau2_{A'}`` with
``p_{A'} = prod (d_i - 1)/d_i`` (costs add exactly). Every workload marginal is reconstructed
from the residuals of its subsets, ``x_A = sum_{A' subset A} Recon(z_{A'})``, with per-cell
variance ``sum_{A' subset A} tau2_{A'} v(A', A)`` (spec 2.2; the residual algebra is shared with
AIM+GReM in ``engine.linalg.residuals``).

The noise is exact: ``H (x + xi)`` is drawn as ``V^(1/2) (w + e)`` with the whitened residual
``w = V^(-1/2) H x`` (``V = H H^T``, :func:`~engine.linalg.residuals.whiten`; one record moves
``w / sqrt(tau2)`` by ``sqrt(p / tau2)`` in L2, so the privacy cost is unchanged), ``w`` rounded
to the grid ``2**-k`` and ``e`` i.i.d. discrete Gaussian integers on it
(:meth:`~engine.mechanisms.base.Plan.add_noise`). ``Measurement.noise`` states the sampler, the
grid and the variance factor (below 1.002 on the automatic grid
unless sigma passes 2**27 grid units).

Noise allocation (privacy cost beta = 1, i.e. zCDP rho = 1/2):

* ``objective="sum"``: the closed form ``tau2 = sqrt(p/v) sum sqrt(v p) / beta`` minimises the
  weighted sum of variances ``sum v tau2`` with ``v_{A'} = tr G_{A'}`` (for marginals the
  spec's ``v_{A'}``; for any other query answerable from marginals, the trace of its residual
  sub-workload Gram);
* ``objective="max"``: the convex program ``min sum p / s`` subject to ``w_q Var_q(s) <= 1``
  for every query, rescaled to cost beta.

Both splits live in ``engine.linalg.allocation`` (AIM+GReM's batch RP baseline uses the first).

RP is optimal among all matrix mechanisms for marginal workloads under both objectives.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from engine.errors import NotApplicable
from engine.linalg.allocation import max_allocation, sum_allocation
from engine.linalg.residuals import (
    AttrSet,
    decomp,
    marginal_from_residuals,
    privacy_factor,
    residual_shape,
    subsets,
    variance_factor,
    whiten,
)
from engine.mechanisms.base import Measurement, Plan
from engine.mechanisms.residual.assemble import (
    Assembly,
    MarginalSource,
    Release,
    assembly_plan,
    residual_label,
    timings_table,
)
from engine.mechanisms.residual.decomposition import decompose, subquery
from engine.mechanisms.residual.submechanisms import KronSub
from engine.mechanisms.residual.subsolvers import rp_factor
from engine.mechanisms.views import Fact, WeightsView
from engine.privacy import Privacy
from engine.progress import Progress, report
from engine.workloads.workload import Workload


def _pareto(rows: np.ndarray) -> np.ndarray:
    """Rows not dominated componentwise by another row (the binding variance profiles)."""
    rows = np.unique(np.round(rows, 14), axis=0)
    keep = []
    order = np.argsort(-rows.sum(axis=1))
    for i in order:
        r = rows[i]
        if not any(np.all(rows[j] >= r) for j in keep):
            keep.append(i)
    return rows[keep]


def variance_profiles(workload: Workload, residuals: Sequence[AttrSet],
                      limit: int = 20_000) -> np.ndarray:
    """Per query, ``w_q ||q_{=>A'}||^2`` for every residual A' (columns in ``residuals``
    order), reduced to the non-dominated rows: ``Var_q = profile . tau2`` under RP noise."""
    column = {a: j for j, a in enumerate(residuals)}
    out = []
    total = 0
    for t in workload.terms:
        positions = tuple(range(len(t.attrs)))
        keeps = subsets(positions)
        if t.is_product:
            # per attribute: (centred row norm^2, row mean^2); only Pareto rows can bind
            per_attr = []
            for f in t.factors or ():
                F = f.dense()
                pair = np.stack([((F - F.mean(axis=1, keepdims=True)) ** 2).sum(axis=1),
                                 F.mean(axis=1) ** 2], axis=1)
                per_attr.append(_pareto(pair))
            combos = np.array(np.meshgrid(*[np.arange(len(a)) for a in per_attr],
                                          indexing="ij")).reshape(len(per_attr), -1).T
            prof = np.zeros((len(combos), len(residuals)))
            for keep in keeps:
                col = column[tuple(t.attrs[p] for p in keep)]
                vals = np.ones(len(combos))
                for p, a in enumerate(per_attr):
                    vals = vals * a[combos[:, p], 0 if p in keep else 1]
                prof[:, col] = vals
        else:
            Q = t.query.dense()
            prof = np.zeros((Q.shape[0], len(residuals)))
            for keep in keeps:
                S = subquery(Q, t.marginal_shape, keep)
                prof[:, column[tuple(t.attrs[p] for p in keep)]] = (S * S).sum(axis=1)
        prof = _pareto(t.weight**2 * prof)
        total += len(prof)
        if total > limit:
            raise NotApplicable(f"residual-planner: the max-variance program would need more "
                                f"than {limit:,} distinct query variance profiles")
        out.append(prof)
    return _pareto(np.vstack(out))


def residual_plan(name: str, workload: Workload, privacy: Privacy, objective: str = "sum",
                  max_profiles: int = 20_000, progress: Progress | None = None) -> Plan:
    """ResidualPlanner's plan (also QuerySmasher's with ``objective="max"``).

    Args:
        name: the registered mechanism name the plan carries.
        workload: any workload answerable from marginals.
        privacy: a Gaussian or zCDP privacy level (checked by the caller).
        objective: ``"sum"`` (weighted sum of variances) or ``"max"`` (maximum weighted
            query variance).
        max_profiles: cap on distinct query variance profiles of the max-variance program.
        progress: receives the decomposition's reports and one after the noise split.

    Returns:
        A plan measured and reconstructed in RP's own subtraction basis; its views hold the
        per-residual noise variances ``tau2`` and per-cell marginal variances (counts
        squared, at privacy cost 1).
    """
    start = time.perf_counter()
    dec = decompose(workload, progress)
    shape = workload.domain.shape
    residuals = list(dec.residuals)
    v = np.array([dec.residuals[a].trace for a in residuals])
    v_unweighted = np.array([dec.residuals[a].trace_unweighted for a in residuals])
    p = np.array([privacy_factor(a, shape) for a in residuals])
    if objective == "sum":
        tau2, _ = sum_allocation(v, p)
        max_variance = None
    else:
        tau2, max_variance = max_allocation(p, variance_profiles(
            workload, residuals, max_profiles))
    report(progress, 1, float(v @ tau2), "allocated noise")
    # In unit-cost terms: V = kron C d/(d-1), loss p v, multiplier tau2 / p.
    releases = [Release(a, KronSub([rp_factor(shape[i]) for i in a]), float(pa * va),
                        float(pa * vu), float(t / pa), "isotropic")
                for a, pa, va, vu, t in zip(residuals, p, v, v_unweighted, tau2, strict=True)]
    assembly = Assembly(workload.domain, releases)
    tau = dict(zip(residuals, tau2, strict=True))
    names = workload.domain.names
    settings = (
        Fact("sub_solver", "sub-solver", "residual"),
        Fact("objective", "objective (sum or max of variances)", objective),
        Fact("measurement", "what is measured", "subtraction-basis residuals z = S (x + xi); "
             "noise_std is the std of xi per marginal cell; drawn exactly as whitened "
             "residuals on a grid plus discrete Gaussian integers"),
        *([] if max_variance is None else [
            Fact("max_variance", "largest weighted query variance at privacy cost 1",
                 max_variance, "squared counts")]))
    views = (
        WeightsView.of({residual_label(a, names): t for a, t in tau.items()},
                       key="residual_variances", title="Noise variance per residual",
                       units="squared counts at privacy cost 1", caption=(
                           "The noise variance tau2 ResidualPlanner gives each residual: "
                           "smaller bars are measured more precisely.")),
        WeightsView.of({residual_label(a, names): v for a, v in
                        marginal_cell_variances(workload, tau).items()},
                       key="marginal_variances", title="Variance per marginal cell",
                       units="squared counts at privacy cost 1", caption=(
                           "The variance of each cell of every workload marginal, rebuilt "
                           "from the noisy residuals.")),
        timings_table({"total": time.perf_counter() - start}))
    plan = assembly_plan(name, workload, privacy, assembly, settings, views)
    return _native(plan, workload, tau)


def marginal_cell_variances(workload: Workload, tau: dict[AttrSet, float]
                            ) -> dict[AttrSet, float]:
    """Per-cell variance (at privacy cost 1) of every workload marginal reconstructed from
    the residuals: ``sum_{A' subset A} tau2_{A'} v(A', A)``."""
    shape = workload.domain.shape
    out = {}
    for attrs in workload.attribute_sets:
        out[attrs] = float(sum(
            tau[a] * variance_factor(a, attrs, shape) for a in subsets(attrs) if a in tau))
    return out


def _native(plan: Plan, workload: Workload, tau: dict[AttrSet, float]) -> Plan:
    """Measure and reconstruct in RP's own basis: release the subtraction-basis residuals
    with correlated noise and rebuild marginals with ``marginal_from_residuals``."""
    shape = workload.domain.shape
    order = list(tau)
    sizes = [math.prod(residual_shape(a, shape)) for a in order]
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(int)

    def measurer(plan: Plan, data: Any, rng: np.random.Generator) -> Measurement:
        start = time.perf_counter()
        source = MarginalSource(data, workload.domain)
        whitened = np.empty(offsets[-1])
        # largest sets first: smaller marginals are then sums of cached ones
        for k in sorted(range(len(order)), key=lambda k: -len(order[k])):
            a = order[k]
            residual = decomp(source(a), a, a)
            whitened[offsets[k]:offsets[k + 1]] = (whiten(residual).reshape(-1)
                                                   / math.sqrt(tau[a]))
        # i.i.d. exact noise on the whitened residuals (the plan's strategy rows), then back
        # to the subtraction basis: z = S x + V^(1/2) e, distributed as S (x + xi)
        noisy, noise = plan.add_noise(whitened, rng)
        y, stds = np.empty(offsets[-1]), np.empty(offsets[-1])
        for a, lo, hi in zip(order, offsets[:-1], offsets[1:], strict=True):
            part = noisy[lo:hi].reshape(residual_shape(a, shape)) * math.sqrt(tau[a])
            y[lo:hi] = whiten(part, inverse=True).reshape(-1)
            stds[lo:hi] = noise.scale * math.sqrt(tau[a])
        return Measurement(y, stds, time.perf_counter() - start, noise)

    def reconstructor(plan: Plan, y: np.ndarray) -> np.ndarray:
        z = {a: y[lo:hi].reshape(residual_shape(a, shape))
             for a, lo, hi in zip(order, offsets[:-1], offsets[1:], strict=True)}
        out = np.empty(workload.num_queries)
        position = 0
        current: tuple[AttrSet | None, np.ndarray | None] = (None, None)
        for t in workload.terms:
            if current[0] != t.attrs:  # one reconstructed marginal at a time
                current = (t.attrs, marginal_from_residuals(z, t.attrs, shape))
            out[position:position + t.num_queries] = t.weight * t.answer_marginal(current[1])
            position += t.num_queries
        return out

    return replace(plan, measurer=measurer, reconstructor=reconstructor)
