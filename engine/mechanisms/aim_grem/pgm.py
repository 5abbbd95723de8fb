"""Optional AIM+PGM (McKenna et al. 2022) on the ``mbi`` package, for comparison with AIM+GReM.

Needs the optional extra ``pip install .[pgm]`` (``mbi==2.0.0``, which brings JAX). Nothing here
imports JAX or mbi at module import: :func:`aim_pgm` imports them when called and raises
NotApplicable("... install .[pgm]") when they are missing, so the core install works without.

The loop follows AIM's reference design as the AIM+GReM paper describes it (spec aim_grem.md
5.6): ``T = 16 d`` budget units (``sigma0^2 = 8 d / (0.9 rho)``, ``eps0 = sqrt(0.05 rho / d)``),
one-way marginals measured with i.i.d. Gaussian noise, candidates of the downward closure kept
only while the junction tree stays below ``max_model_size * rho_used / rho`` megabytes (or
already covered by the model), the same score, exponential mechanism, annealing on the change
of the model's estimate and final-round rule as AIM+GReM, and Private-PGM (mirror descent,
warm-started) after every measurement. Estimates are the fitted model's marginals (counts).

Randomness is exact, as in AIM+GReM: the selection is
:func:`engine.noise.exponential_mechanism` over the allowed candidates and every measurement
adds discrete Gaussian integers (:func:`engine.noise.discrete_gaussian`, sigma**2 the round's
``sigma2``) to the integer marginal counts, which is ``1 / (2 sigma2)``-zCDP exactly (L2
sensitivity 1), the cost the ledger records.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from engine.domain import Domain
from engine.errors import NotApplicable
from engine.linalg.residuals import AttrSet
from engine.mechanisms.aim_grem.aim import (
    MEASURE_SHARE,
    ROOT_2_OVER_PI,
    SELECT_SHARE,
    MarginalFn,
    RoundCallback,
    candidate_weights,
    final_round,
    unique_sets,
)
from engine.mechanisms.aim_grem.grem import downward_closure
from engine.mechanisms.aim_grem.result import AdaptiveResult, RoundRecord
from engine.noise import discrete_gaussian, exponential_mechanism
from engine.progress import Progress, report

INSTALL_HINT = "aim-pgm needs the optional mbi package (JAX): install .[pgm]"
#: the release record's account of an AIM+PGM run's randomness
PGM_NOISE_RECORD = {
    "sampler": "discrete_gaussian", "exact": True, "grid_spacing": 1.0,
    "measurements": "integer marginal counts plus i.i.d. discrete Gaussian integers, sigma**2 "
                    "the round's sigma2: 1 / (2 sigma2) zCDP exactly as charged",
    "selection": "exact exponential mechanism (engine.noise.exponential_mechanism) over the "
                 "candidates the model size allows; eps_t**2 / 8 zCDP as charged",
}


def available() -> bool:
    """True when ``mbi`` and JAX can be imported (checked without importing them)."""
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in ("mbi", "jax"))


def _import_mbi() -> Any:
    if not available():
        raise NotApplicable(INSTALL_HINT)
    import jax

    # Counts up to ~1e5 need float64; mbi warns (and stalls) in JAX's default float32.
    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_enable_compilation_cache", False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        import mbi
    return mbi


def aim_pgm(domain: Domain, workload: Sequence[AttrSet], marginal: MarginalFn, rho: float,
            rng: np.random.Generator, *, max_model_size: float = 80.0, iters: int = 1000,
            final_iters: int = 1000, progress: Progress | None = None,
            on_round: RoundCallback | None = None) -> AdaptiveResult:
    """Run AIM+PGM; same inputs and result type as :func:`engine.mechanisms.aim_grem.aim_grem`.

    Args:
        domain: the public domain.
        workload: attribute sets of the workload marginals.
        marginal: the true marginal over an axis tuple, by counting (private).
        rho: total zCDP budget (spent exactly).
        rng: random generator.
        max_model_size: junction-tree size limit in megabytes at the end of the run (AIM's
            code: 80; the AIM+GReM paper: 50).
        iters: mirror-descent iterations per round.
        final_iters: iterations of the final estimate.
        progress: reported once per round (cancellable).
        on_round: called with every round's record.

    Raises:
        NotApplicable: mbi / JAX are not installed.
    """
    mbi = _import_mbi()
    start = time.perf_counter()
    names = domain.names
    shape = domain.shape
    sets, c = unique_sets(workload, None)
    candidates = tuple(g for g in downward_closure(sets) if g)
    w = candidate_weights(candidates, sets, c)
    sensitivity = float(w.max())
    every = tuple(dict.fromkeys(candidates + sets))
    truth = {g: np.asarray(marginal(g), dtype=float) for g in every}
    sizes = np.array([math.prod(shape[k] for k in g) for g in candidates], dtype=float)
    attributes = sorted({k for g in sets for k in g})
    pgm_domain = mbi.Domain(tuple(names), tuple(shape))
    clique = {g: tuple(names[k] for k in g) for g in every}
    units = 16.0 * len(names)
    sigma2 = units / (2.0 * MEASURE_SHARE * rho)
    eps = math.sqrt(8.0 * SELECT_SHARE * rho / units)

    measurements = []
    ledger: list[tuple[str, float]] = []

    def measure(g: AttrSet, s2: float) -> None:
        y = noisy_counts(truth[g].reshape(-1), s2, rng)
        measurements.append(mbi.LinearMeasurement(y, clique[g], stddev=math.sqrt(s2)))

    for i in attributes:
        measure((i,), sigma2)
        ledger.append((f"init {names[i]}", 1.0 / (2.0 * sigma2)))
    estimator = mbi.estimation.MirrorDescent()
    model = estimator.estimate(pgm_domain, measurements, iters=iters)

    def estimate(g: AttrSet) -> np.ndarray:
        return np.asarray(model.project(clique[g]).datavector(flatten=False), dtype=float)

    rounds: list[RoundRecord] = []
    t = 0
    terminate = False
    while not terminate:
        t += 1
        remaining = rho - math.fsum(cost for _, cost in ledger)
        if remaining <= 2.0 * (1.0 / (2.0 * sigma2) + eps ** 2 / 8.0):
            eps, sigma2 = final_round(remaining)
            terminate = True
        ledger.append((f"round {t} select", eps ** 2 / 8.0))
        ledger.append((f"round {t} measure", 1.0 / (2.0 * sigma2)))
        rho_used = math.fsum(cost for _, cost in ledger)
        limit = max_model_size * rho_used / rho
        cliques = list(model.cliques)
        allowed = np.array([
            any(set(clique[g]) <= set(cl) for cl in cliques)
            or mbi.junction_tree.hypothetical_model_size(pgm_domain, cliques + [clique[g]])
            <= limit for g in candidates])
        sigma = math.sqrt(sigma2)
        err = np.array([np.abs(truth[g] - estimate(g)).sum() if ok else 0.0
                        for g, ok in zip(candidates, allowed, strict=True)])
        scores = w * (err - ROOT_2_OVER_PI * sigma * sizes)
        gamma = candidates[select_allowed(scores, allowed, eps, sensitivity, rng)]
        before = estimate(gamma)
        measure(gamma, sigma2)
        model = estimator.estimate(pgm_domain, measurements, iters=iters, warm_start=model)
        after = estimate(gamma)
        change = float(np.abs(after - before).sum())
        n_gamma = math.prod(shape[k] for k in gamma)
        annealed = change <= ROOT_2_OVER_PI * sigma * n_gamma
        workload_error = float(np.mean([np.abs(truth[g] - estimate(g)).sum() for g in sets]))
        record = RoundRecord(
            round=t, marginal=gamma, epsilon=eps, sigma=sigma,
            rho_round=eps ** 2 / 8.0 + 1.0 / (2.0 * sigma2), rho_used=rho_used,
            measured=(gamma,), skipped=(), change_l1=change, annealed=annealed,
            final=terminate, expected_l1=ROOT_2_OVER_PI * sigma * n_gamma,
            workload_error=workload_error, seconds=time.perf_counter() - start)
        rounds.append(record)
        if on_round is not None:
            on_round(record)
        report(progress, t, workload_error, f"round {t}: {' x '.join(clique[gamma])}")
        if annealed:
            eps, sigma2 = 2.0 * eps, sigma2 / 4.0
    model = estimator.estimate(pgm_domain, measurements, iters=final_iters, warm_start=model)
    estimates = {g: estimate(g) for g in sets}
    return AdaptiveResult("aim-pgm", domain, sets, estimates, float(rho), tuple(ledger),
                          time.perf_counter() - start, tuple(rounds),
                          total=float(model.total),
                          details={"max_model_size": max_model_size, "iters": iters,
                                   "units": units, "noise": PGM_NOISE_RECORD})


def noisy_counts(counts: np.ndarray, sigma2: float, rng: np.random.Generator) -> np.ndarray:
    """``counts`` plus i.i.d. discrete Gaussian integers of parameter ``sigma2`` (exact; the
    counts are integers, so the release is ``1 / (2 sigma2)``-zCDP per unit of L2 change)."""
    counts = np.asarray(counts, dtype=float)
    return counts + discrete_gaussian(math.sqrt(sigma2), counts.size, rng).reshape(counts.shape)


def select_allowed(scores: np.ndarray, allowed: np.ndarray, epsilon: float, sensitivity: float,
                   rng: np.random.Generator) -> int:
    """Index of the candidate chosen by the exact exponential mechanism among the allowed ones
    (:func:`engine.noise.exponential_mechanism`; the others have probability 0)."""
    index = np.flatnonzero(allowed)
    return int(index[exponential_mechanism(np.asarray(scores)[index], epsilon, sensitivity,
                                           rng)])
