"""The AIM+GReM loop (spec aim_grem.md section 5) and the fixed-sequence ablation driver.

Budget (zCDP, spec 5.3-5.5): with ``K = |W down|`` and ``T = 2K`` budget units, the initial
marginal-equivalent noise is ``sigma0^2 = T / (1.8 rho)`` (= K / (0.9 rho)) and the initial
selection parameter ``eps0 = sqrt(0.8 rho / T)``; initialisation measures the d one-way
marginals (as residuals plus repeated totals, Alg. 6) at ``rho_init = 1/(2 sigma0^2)`` each.
Each round charges ``eps_t^2/8`` (exponential mechanism) plus ``1/(2 sigma_t^2)``
(CRP-allocated residual measurements, skipped residuals included). Before every round, if the
remainder cannot pay for two such rounds the round spends exactly the remainder
(``eps = sqrt(0.8 R)``, ``sigma^2 = 1/(1.8 R)``) and is the last. Annealing doubles both budgets
when the selected marginal's ESTIMATE changed by at most its expected noise (spec errata 5.5:
never compare with the true marginal). Every charge goes to a ledger whose sum equals ``rho``.

Randomness is exact: the selection is :func:`engine.noise.exponential_mechanism` (integer
exponents on a score grid, exact Bernoulli draws; the same ``eps_t**2 / 8`` zCDP) and every
residual is measured with discrete Gaussian noise (``grem.measure_residual``).

An optional rounds cap (an extension for interactive use, not in the paper) spreads the budget
over about ``max_rounds`` rounds (``T = max_rounds + 0.9 d`` units when that is fewer than the
paper's ``2K``) and makes round ``max_rounds`` the final one.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.domain import Domain
from engine.linalg.residuals import AttrSet, subsets
from engine.mechanisms.aim_grem.crp import ETA, crp, iid
from engine.mechanisms.aim_grem.grem import (
    ResidualEstimates,
    downward_closure,
    measure_residual,
)
from engine.mechanisms.aim_grem.result import AdaptiveResult, RoundRecord
from engine.noise import exponential_mechanism
from engine.progress import Progress, report

#: share of each round's (and of the initial) budget spent on measurement, and on selection.
MEASURE_SHARE = 0.9
SELECT_SHARE = 0.1
MEASUREMENTS = ("crp", "iid")
#: the release record's account of an AIM+GReM run's randomness
NOISE_RECORD = {
    "sampler": "discrete_gaussian", "exact": True,
    "measurements": "each residual whitened (L2 sensitivity sqrt(p_tau)), rounded to the "
                    "automatic grid 2**-k (the total: the integers) plus i.i.d. discrete "
                    "Gaussian integers, sigma enlarged so that rho = p_tau / (2 sigma_t**2) "
                    "exactly as charged; variance sigma_t**2 times ExactNoise.variance_factor "
                    "(grem.residual_noise; the pooling weights use sigma_t**2)",
    "selection": "exact exponential mechanism (engine.noise.exponential_mechanism): integer "
                 "exponents on the score grid 2**-40 and exact Bernoulli(exp(-a / 2**40)) "
                 "rejection; eps_t**2 / 8 zCDP as charged",
    "not_accounted": "float64 rounding of the whitened residuals and of the scores",
}
#: ``E|N(0, 1)|``: the expected L1 norm of unit Gaussian noise per cell.
ROOT_2_OVER_PI = math.sqrt(2.0 / math.pi)

MarginalFn = Callable[[AttrSet], np.ndarray]
RoundCallback = Callable[[RoundRecord], None]


@dataclass(frozen=True)
class Schedule:
    """Initial budget parameters of a run.

    Attributes:
        K: number of residuals counted in the budget units (``|W down|``, with or without ()).
        d: attributes measured at initialisation.
        units: budget units T (``2K``, or fewer under a rounds cap).
        sigma0_sq: initial marginal-equivalent noise variance (counts squared).
        rho_init: zCDP of one initial one-way measurement, ``1/(2 sigma0_sq)``.
        epsilon0: initial exponential-mechanism parameter.
    """

    K: int
    d: int
    units: float
    sigma0_sq: float
    rho_init: float
    epsilon0: float

    @property
    def round_cost(self) -> float:
        """zCDP of one un-annealed round, ``eps0^2/8 + 1/(2 sigma0^2)`` (= rho / T)."""
        return self.epsilon0 ** 2 / 8.0 + 1.0 / (2.0 * self.sigma0_sq)


def schedule(rho: float, K: int, d: int, max_rounds: int | None = None) -> Schedule:
    """The initial budget parameters (spec 5.3; R14).

    Args:
        rho: total zCDP budget.
        K: ``|W down|`` (the paper counts the empty set).
        d: number of attributes measured at initialisation.
        max_rounds: optional rounds cap (see the module docstring).
    """
    if not rho > 0:
        raise ValueError(f"rho: must be positive, got {rho!r}")
    units = 2.0 * K
    if max_rounds is not None:
        if max_rounds < 1:
            raise ValueError(f"max_rounds: must be at least 1, got {max_rounds!r}")
        units = min(units, max_rounds + MEASURE_SHARE * d)
    sigma0_sq = units / (2.0 * MEASURE_SHARE * rho)
    epsilon0 = math.sqrt(8.0 * SELECT_SHARE * rho / units)
    return Schedule(K, d, units, sigma0_sq, 1.0 / (2.0 * sigma0_sq), epsilon0)


def final_round(remaining: float) -> tuple[float, float]:
    """``(epsilon, sigma2)`` of a round that spends exactly ``remaining`` (spec 5.4, R14c)."""
    return math.sqrt(8.0 * SELECT_SHARE * remaining), 1.0 / (2.0 * MEASURE_SHARE * remaining)


def candidate_weights(candidates: Sequence[AttrSet], workload: Sequence[AttrSet],
                      weights: Sequence[float] | None = None) -> np.ndarray:
    """AIM's selection weights ``w_gamma = sum_{pi in W} c_pi |gamma & pi|`` (spec 1.3)."""
    c = np.ones(len(workload)) if weights is None else np.asarray(weights, dtype=float)
    members = [set(p) for p in workload]
    return np.array([sum(ci * len(m.intersection(g)) for ci, m in zip(c, members, strict=True))
                     for g in candidates], dtype=float)


def exponential_probabilities(scores: np.ndarray, epsilon: float,
                              sensitivity: float) -> np.ndarray:
    """Selection probabilities ``prop. to exp(eps (score - max) / (2 sensitivity))`` (R15)."""
    if not sensitivity > 0:
        raise ValueError("exponential mechanism: the score sensitivity must be positive")
    s = np.asarray(scores, dtype=float)
    logits = epsilon / (2.0 * sensitivity) * (s - s.max())
    weights = np.exp(logits)
    return weights / weights.sum()


def unique_sets(workload: Sequence[AttrSet], weights: Sequence[float] | None
                ) -> tuple[tuple[AttrSet, ...], np.ndarray]:
    """Workload attribute sets sorted and without repeats (repeated sets add their weights)."""
    merged: dict[AttrSet, float] = {}
    c = [1.0] * len(workload) if weights is None else list(weights)
    for g, ci in zip(workload, c, strict=True):
        key = tuple(sorted(int(k) for k in g))
        merged[key] = merged.get(key, 0.0) + float(ci)
    return tuple(merged), np.array(list(merged.values()))


def _true_marginals(marginal: MarginalFn, sets: Sequence[AttrSet]) -> dict[AttrSet, np.ndarray]:
    return {g: np.asarray(marginal(g), dtype=float) for g in sets}


def initialise(store: ResidualEstimates, truth: Mapping[AttrSet, np.ndarray],
               attributes: Sequence[int], sigma0_sq: float, rng: np.random.Generator,
               ledger: list[tuple[str, float]], names: Sequence[str]) -> None:
    """Alg. 6: measure every one-way marginal at variance ``sigma0_sq`` as its residual plus a
    total measured at ``n_i sigma0_sq`` (together exactly one Gaussian one-way measurement)."""
    for i in attributes:
        tau = (i,)
        store.add(tau, measure_residual(truth[tau], tau, sigma0_sq, rng), sigma0_sq)
        n_i = store.shape[i]
        store.add((), measure_residual(truth[()], (), n_i * sigma0_sq, rng), n_i * sigma0_sq)
        ledger.append((f"init {names[i]}", 1.0 / (2.0 * sigma0_sq)))


def precision(store: ResidualEstimates, sets: Sequence[AttrSet]) -> dict[str, Any]:
    """What the released estimates' margins need (public: noise parameters only):
    ``cell_variance`` (set -> per-cell noise variance of its GReM-MLE estimate, counts
    squared, :meth:`ResidualEstimates.cell_variance`) and ``unmeasured`` (set -> residuals of
    it never measured, set to zero: the estimate's bias, which no variance covers)."""
    return {"cell_variance": {g: store.cell_variance(g) for g in sets},
            "unmeasured": {g: tuple(t for t in subsets(g) if store.lam.get(t, 0.0) <= 0)
                           for g in sets}}


def aim_grem(domain: Domain, workload: Sequence[AttrSet], marginal: MarginalFn, rho: float,
             rng: np.random.Generator, *, weights: Sequence[float] | None = None,
             measurement: str = "crp", update: str = "lazy", eta: float = ETA,
             include_empty_in_K: bool = True, max_rounds: int | None = None,
             progress: Progress | None = None, on_round: RoundCallback | None = None,
             mechanism: str = "aim-grem") -> AdaptiveResult:
    """Run AIM+GReM (spec Alg. 4 in the "check first" order of 5.4).

    Args:
        domain: the public domain.
        workload: the workload's attribute sets (axis tuples).
        marginal: the true marginal over an axis tuple, by counting (private).
        rho: total zCDP budget.
        rng: the run's random generator (seed it for reproducible runs).
        weights: per-workload-marginal weights ``c_pi`` (default 1).
        measurement: ``"crp"`` (Conditional ResidualPlanner) or ``"iid"`` (isotropic noise).
        update: ``"lazy"`` or ``"full"`` GReM-MLE updates.
        eta: CRP skip threshold.
        include_empty_in_K: count () in ``K = |W down|`` (the paper) or not (AIM's code).
        max_rounds: optional rounds cap (module docstring).
        progress: reported once per round (loss = true workload mean L1, evaluation only);
            its ``cancel()`` stops the run with ``Cancelled``.
        on_round: called with each round's record.
        mechanism: name stored in the result.

    Returns:
        Estimates of every workload marginal, the round log and the ledger (sums to ``rho``).
    """
    if measurement not in MEASUREMENTS:
        raise ValueError(f"measurement: unknown {measurement!r}; allowed: "
                         f"{', '.join(MEASUREMENTS)}")
    start = time.perf_counter()
    shape = domain.shape
    sets, c = unique_sets(workload, weights)
    closure = downward_closure(sets)
    candidates = tuple(g for g in closure if g)
    if not candidates:
        raise ValueError("aim-grem: the workload has no attributes (only the total)")
    K = len(closure) if include_empty_in_K else len(closure) - 1
    attributes = sorted({k for g in sets for k in g})
    plan = schedule(rho, K, len(attributes), max_rounds)
    w = candidate_weights(candidates, sets, c)
    sensitivity = float(w.max())
    sizes = np.array([math.prod(shape[k] for k in g) for g in candidates], dtype=float)

    truth = _true_marginals(marginal, closure)
    tracked = tuple(dict.fromkeys(candidates + sets))
    store = ResidualEstimates(shape, closure, tracked, update)
    ledger: list[tuple[str, float]] = []
    initialise(store, truth, attributes, plan.sigma0_sq, rng, ledger, domain.names)

    errors = {g: float(np.abs(truth[g] - store.marginal(g)).sum()) for g in tracked}
    store.pop_changed()
    index = {g: i for i, g in enumerate(candidates)}
    err = np.array([errors[g] for g in candidates])

    sigma2_next, eps_next = plan.sigma0_sq, plan.epsilon0
    rounds: list[RoundRecord] = []
    t = 0
    terminate = False
    while not terminate:
        t += 1
        sigma2_t, eps_t = sigma2_next, eps_next
        remaining = rho - math.fsum(cost for _, cost in ledger)
        cost = 1.0 / (2.0 * sigma2_t) + eps_t ** 2 / 8.0
        if remaining <= 2.0 * cost or (max_rounds is not None and t >= max_rounds):
            eps_t, sigma2_t = final_round(remaining)
            terminate = True
        ledger.append((f"round {t} select", eps_t ** 2 / 8.0))
        ledger.append((f"round {t} measure", 1.0 / (2.0 * sigma2_t)))
        sigma_t = math.sqrt(sigma2_t)

        # SELECT: AIM's score with the expected L1 noise of a measurement at sigma_t.
        scores = w * (err - ROOT_2_OVER_PI * sigma_t * sizes)
        gamma = candidates[exponential_mechanism(scores, eps_t, sensitivity, rng)]

        # OPTIMIZE + MEASURE + (lazy) RECONSTRUCT
        alloc = (crp(gamma, store.lam, sigma2_t, shape, eta) if measurement == "crp"
                 else iid(gamma, store.lam, sigma2_t, shape))
        before = np.array(store.marginal(gamma), copy=True)
        for tau, s2 in alloc.measured():
            store.add(tau, measure_residual(truth[tau], tau, s2, rng), s2)
        after = store.marginal(gamma)
        change = float(np.abs(after - before).sum())
        for g in store.pop_changed():
            errors[g] = float(np.abs(truth[g] - store.marginal(g)).sum())
            if g in index:
                err[index[g]] = errors[g]

        # ANNEAL on the change of the estimate (spec errata), never on the true marginal.
        n_gamma = sizes[index[gamma]]
        annealed = change <= ROOT_2_OVER_PI * sigma_t * n_gamma
        if annealed:
            eps_next, sigma2_next = 2.0 * eps_t, sigma2_t / 4.0
        else:
            eps_next, sigma2_next = eps_t, sigma2_t

        workload_error = float(np.mean([errors[g] for g in sets]))
        expected = ROOT_2_OVER_PI * n_gamma * math.sqrt(store.cell_variance(gamma))
        record = RoundRecord(
            round=t, marginal=gamma, epsilon=eps_t, sigma=sigma_t,
            rho_round=eps_t ** 2 / 8.0 + 1.0 / (2.0 * sigma2_t),
            rho_used=math.fsum(cost for _, cost in ledger),
            measured=tuple(tau for tau, _ in alloc.measured()), skipped=alloc.skipped,
            change_l1=change, annealed=annealed, final=terminate, expected_l1=expected,
            workload_error=workload_error, seconds=time.perf_counter() - start)
        rounds.append(record)
        if on_round is not None:
            on_round(record)
        report(progress, t, workload_error,
               f"round {t}: {' x '.join(domain.names[k] for k in gamma)}")

    estimates = {g: np.array(store.marginal(g), copy=True) for g in sets}
    details = {"K": plan.K, "d": plan.d, "units": plan.units, "sigma0_sq": plan.sigma0_sq,
               "rho_init": plan.rho_init, "epsilon0": plan.epsilon0,
               "measurement": measurement, "update": update, "eta": eta,
               "candidates": len(candidates), "sensitivity": sensitivity,
               "residual_measurements": store.measurements, "noise": NOISE_RECORD,
               **precision(store, sets)}
    return AdaptiveResult(mechanism, domain, sets, estimates, float(rho), tuple(ledger),
                          time.perf_counter() - start, tuple(rounds), store.total(),
                          details=details)


def fixed_sequence(domain: Domain, workload: Sequence[AttrSet], marginal: MarginalFn,
                   rho: float, sequence: Sequence[AttrSet], rng: np.random.Generator, *,
                   measurement: str = "crp", update: str = "lazy", eta: float = ETA,
                   one_way_share: float = 0.5, progress: Progress | None = None
                   ) -> AdaptiveResult:
    """The paper's Table 2 ablation: a pre-chosen sequence of marginal measurements.

    ``one_way_share`` of ``rho`` measures every one-way marginal of the workload (Alg. 6 style,
    equal split); the rest is split equally over ``sequence``, each measured with CRP or IID
    noise; the workload marginals are kept by lazy or full GReM-MLE updates.

    Returns:
        Estimates of the workload marginals; the ledger sums to ``rho``.
    """
    if measurement not in MEASUREMENTS:
        raise ValueError(f"measurement: unknown {measurement!r}; allowed: "
                         f"{', '.join(MEASUREMENTS)}")
    if not sequence:
        raise ValueError("fixed_sequence: the sequence is empty")
    start = time.perf_counter()
    shape = domain.shape
    sets, _ = unique_sets(workload, None)
    sequence = tuple(tuple(sorted(g)) for g in sequence)
    closure = downward_closure(sets + sequence)
    truth = _true_marginals(marginal, closure)
    store = ResidualEstimates(shape, closure, sets, update)
    attributes = sorted({k for g in sets for k in g})
    ledger: list[tuple[str, float]] = []
    sigma1_sq = len(attributes) / (2.0 * one_way_share * rho)
    for i in attributes:
        initialise(store, truth, [i], sigma1_sq, rng, ledger, domain.names)
        store.sync()
    sigma2 = len(sequence) / (2.0 * (1.0 - one_way_share) * rho)
    skipped = 0
    for t, gamma in enumerate(sequence, start=1):
        alloc = (crp(gamma, store.lam, sigma2, shape, eta) if measurement == "crp"
                 else iid(gamma, store.lam, sigma2, shape))
        for tau, s2 in alloc.measured():
            store.add(tau, measure_residual(truth[tau], tau, s2, rng), s2)
        skipped += len(alloc.skipped)
        store.sync()
        ledger.append((f"measure {t}", 1.0 / (2.0 * sigma2)))
        report(progress, t, float("nan"), f"measurement {t}/{len(sequence)}")
    estimates = {g: np.array(store.marginal(g), copy=True) for g in sets}
    details = {"measurement": measurement, "update": update, "sequence": len(sequence),
               "skipped_residuals": skipped, "residual_measurements": store.measurements}
    return AdaptiveResult(f"fixed-sequence {update}+{measurement}", domain, sets, estimates,
                          float(rho), tuple(ledger), time.perf_counter() - start,
                          total=store.total(), details=details)
