"""Data-independent baselines on the same data and budget as AIM+GReM.

* :func:`residual_planner`: ResidualPlanner batch measurement of every residual of the
  workload's downward closure, with the noise that minimises the weighted total squared error
  of the workload marginals, reconstructed by GReM-MLE (spec aim_grem.md 6.7).
* :func:`independent`: every one-way marginal measured with the whole budget and each workload
  marginal estimated as the product of its one-way distributions (independence assumption);
  the reference a data-dependent mechanism must beat on correlated data.

Example (the RP noise spends exactly rho):
    >>> sigma2 = residual_planner_variances([(0, 1)], None, (4, 3), rho=0.5)
    >>> from engine.linalg.residuals import privacy_factor
    >>> round(sum(privacy_factor(t, (4, 3)) / (2 * s) for t, s in sigma2.items()), 12)
    0.5
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

import numpy as np

from engine.domain import Domain
from engine.linalg.allocation import sum_allocation
from engine.linalg.residuals import AttrSet, privacy_factor
from engine.mechanisms.aim_grem.aim import MarginalFn, unique_sets
from engine.mechanisms.aim_grem.grem import downward_closure, grem_mle, measure_residual
from engine.mechanisms.aim_grem.result import AdaptiveResult
from engine.noise import discrete_gaussian
from engine.progress import Progress, report


def residual_planner_variances(sets: Sequence[AttrSet], weights: Sequence[float] | None,
                               shape: Sequence[int], rho: float) -> dict[AttrSet, float]:
    """Optimal per-residual noise variances of the batch ResidualPlanner (spec 6.7).

    Minimises ``sum_gamma c_gamma n_gamma sum_{tau subset gamma} v_tau(gamma) sigma_tau^2``
    subject to ``sum_tau p_tau / (2 sigma_tau^2) = rho``: with
    ``u_tau = sum_{gamma >= tau} c_gamma prod_{k in tau}(n_k - 1) prod_{k in gamma \\ tau} 1/n_k``
    the optimum is ``sigma_tau^2 = sqrt(p_tau/u_tau) sum_tau' sqrt(p_tau' u_tau') / (2 rho)``
    (ResidualPlanner's sum allocation at privacy cost ``2 rho``).

    Returns:
        residual -> noise variance scalar (counts squared), for every residual of the closure.
    """
    unique, c = unique_sets(sets, weights)
    closure = downward_closure(unique)
    p = {t: privacy_factor(t, shape) for t in closure}
    u = dict.fromkeys(closure, 0.0)
    for gamma, cg in zip(unique, c, strict=True):
        members = set(gamma)
        for t in closure:
            if members.issuperset(t):
                u[t] += cg * math.prod(shape[k] - 1 for k in t) * math.prod(
                    1.0 / shape[k] for k in gamma if k not in t)
    sigma2, _ = sum_allocation([u[t] for t in closure], [p[t] for t in closure], 2.0 * rho)
    return dict(zip(closure, sigma2.tolist(), strict=True))


def residual_planner(domain: Domain, workload: Sequence[AttrSet], marginal: MarginalFn,
                     rho: float, rng: np.random.Generator, *,
                     weights: Sequence[float] | None = None,
                     progress: Progress | None = None) -> AdaptiveResult:
    """Measure every residual of the closure once (RP noise) and reconstruct by GReM-MLE.

    Args:
        domain: the public domain.
        workload: attribute sets of the workload marginals.
        marginal: the true marginal over an axis tuple, by counting (private).
        rho: zCDP budget (spent exactly).
        rng: random generator.
        weights: per-marginal weights (default 1).
        progress: reported once per measured residual.

    Returns:
        Estimates of every workload marginal; the ledger has one charge per residual.
    """
    start = time.perf_counter()
    sets, c = unique_sets(workload, weights)
    shape = domain.shape
    sigma2 = residual_planner_variances(sets, c, shape, rho)
    measurements, ledger = {}, []
    for i, (tau, s2) in enumerate(sigma2.items(), start=1):
        z = measure_residual(np.asarray(marginal(tau), dtype=float), tau, s2, rng)
        measurements[tau] = [(z, s2)]
        ledger.append((f"residual {tau}", privacy_factor(tau, shape) / (2.0 * s2)))
        report(progress, i, float("nan"), f"residual {i}/{len(sigma2)}")
    estimates = grem_mle(sets, measurements, shape)
    return AdaptiveResult("residual-planner (batch, GReM-MLE)", domain, sets, estimates,
                          float(rho), tuple(ledger), time.perf_counter() - start,
                          total=float(measurements[()][0][0]),
                          details={"residuals": len(sigma2), "sigma2": sigma2})


def independent(domain: Domain, workload: Sequence[AttrSet], marginal: MarginalFn,
                rho: float, rng: np.random.Generator) -> AdaptiveResult:
    """One-way marginals at the whole budget, workload marginals as products of them.

    Each attribute's one-way marginal (integer counts) gets i.i.d. discrete Gaussian noise with
    sigma**2 = ``d/(2 rho)`` (exact, :func:`engine.noise.discrete_gaussian`); the total is the
    inverse-variance average of their sums; a workload marginal is the total times the outer
    product of the clipped, normalised one-way estimates.
    """
    start = time.perf_counter()
    sets, _ = unique_sets(workload, None)
    shape = domain.shape
    attributes = sorted({k for g in sets for k in g})
    sigma2 = len(attributes) / (2.0 * rho)
    noisy = {}
    ledger = []
    for i in attributes:
        mu = np.asarray(marginal((i,)), dtype=float)
        noisy[i] = mu + discrete_gaussian(math.sqrt(sigma2), mu.size, rng).reshape(mu.shape)
        ledger.append((f"one-way {domain.names[i]}", 1.0 / (2.0 * sigma2)))
    precision = sum(1.0 / shape[i] for i in attributes)
    total = sum(noisy[i].sum() / shape[i] for i in attributes) / precision
    dist = {}
    for i in attributes:
        clipped = np.clip(noisy[i], 0.0, None)
        dist[i] = (clipped / clipped.sum() if clipped.sum() > 0
                   else np.full(shape[i], 1.0 / shape[i]))
    estimates = {}
    for g in sets:
        est = np.array(float(total))
        for k in g:
            est = np.multiply.outer(est, dist[k])
        estimates[g] = est
    return AdaptiveResult("independent one-way", domain, sets, estimates, float(rho),
                          tuple(ledger), time.perf_counter() - start, total=float(total))
