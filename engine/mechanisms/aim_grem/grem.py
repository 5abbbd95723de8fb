"""GReM: noisy residual measurements and their maximum-likelihood reconstruction into marginals.

A noisy residual of the data over ``tau`` is ``z_tau ~ zeta_tau + N(0, sigma2 V_tau)`` (spec
aim_grem.md 3.1-3.2). GReM-MLE (spec 3.4) pools every measurement of one residual by
inverse-variance weighting (precision ``lambda_tau = sum 1/sigma2``), sets unmeasured residuals
to zero (the minimum-norm fill) and rebuilds each marginal as
``mu_gamma = sum_{tau subset gamma} Recon(z_tau, tau, gamma)``.

:class:`ResidualEstimates` keeps the pooled residuals and the reconstructed marginals of a set of
*tracked* attribute sets and updates them either lazily (spec 4.1: a change of ``z_alpha`` only
touches the tracked supersets of alpha, found through a superset index) or by re-running the
reconstruction of every tracked marginal (the ablation's "full" variant).

Example (spec R11, pooling):
    >>> import numpy as np
    >>> z, lam = pool([(np.array([10.0, 4.0]), 1.0), (np.array([13.0, 1.0]), 2.0)])
    >>> z.tolist(), lam
    ([11.0, 3.0], 1.5)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from engine.linalg.residuals import (
    AttrSet,
    decomp,
    recon,
    residual_shape,
    smear_into,
    subsets,
    variance_factor,
    whiten,
)
from engine.noise import ExactNoise, exact_noise
from engine.privacy import Privacy

UPDATES = ("lazy", "full")


def residual_noise(sizes: Sequence[int], sigma2: float) -> ExactNoise:
    """The exact noise of a residual measured at per-cell variance ``sigma2`` (counts squared)
    over a marginal of the given sizes, costing ``rho = p_tau / (2 sigma2)``.

    The total (no sizes) is an integer count: discrete Gaussian integers with sigma**2 =
    ``sigma2``. Any other residual is whitened (L2 sensitivity ``sqrt(p_tau)`` exactly,
    ``prod (n_k - 1)`` coordinates per record), rounded to the grid ``2**-k`` and given i.i.d.
    discrete Gaussian integers on it, sigma enlarged with the sensitivity on the grid so that
    rho is unchanged: the variance is ``sigma2 * variance_factor`` (below 1.002 unless
    sigma passes 2**27 grid units).
    """
    p = math.prod((n - 1) / n for n in sizes)
    privacy = Privacy(noise="zcdp", rho=p / (2.0 * sigma2))
    support = math.prod(n - 1 for n in sizes)
    return exact_noise(privacy, math.inf if sizes else 1.0, math.sqrt(p),
                       integral=not sizes, support=support)


def measure_residual(mu_tau: np.ndarray, tau: AttrSet, sigma2: float,
                     rng: np.random.Generator) -> np.ndarray:
    """MeasureResidual (spec Alg. 5): the tau-residual of ``mu_tau`` plus exact noise.

    Distributed as ``zeta_tau + V_tau^(1/2) e`` with i.i.d. discrete Gaussian ``e`` on a grid
    (:func:`residual_noise`): the exact counterpart of adding ``N(0, sigma2)`` to every cell of
    the tau-marginal and decomposing (``zeta_tau + N(0, sigma2 V_tau)``), at the same cost
    ``rho = p_tau / (2 sigma2)`` in zCDP and variance ``sigma2`` times the noise's
    ``variance_factor``. No float Gaussian is drawn.

    Args:
        mu_tau: the true marginal over ``tau`` (counts), axes in sorted attribute order.
        tau: its attribute set (sorted axis tuple).
        sigma2: per-cell noise variance (counts squared), > 0.
        rng: source of the noise.

    Returns:
        The noisy residual, shape ``(n_k - 1 for k in tau)`` (a 0-d array for ``()``).
    """
    mu = np.asarray(mu_tau, dtype=float)
    noise = residual_noise(mu.shape, sigma2)
    released = noise.apply(whiten(decomp(mu, tau, tau)), rng)
    return whiten(released, inverse=True)


def pool(measurements: Iterable[tuple[np.ndarray, float]]) -> tuple[np.ndarray, float]:
    """Inverse-variance average of measurements of one residual (GReM-MLE stage 1).

    Args:
        measurements: ``(z, sigma2)`` pairs, all of the same residual.

    Returns:
        ``(z, lambda)``: the pooled residual and its precision ``sum 1/sigma2`` (the pooled
        covariance is ``V_tau / lambda``).

    Raises:
        ValueError: no measurements.
    """
    items = [(np.asarray(z, dtype=float), float(s2)) for z, s2 in measurements]
    if not items:
        raise ValueError("pool: needs at least one measurement")
    lam = sum(1.0 / s2 for _, s2 in items)
    z = sum(z / s2 for z, s2 in items) / lam
    return np.asarray(z), float(lam)


def downward_closure(sets: Iterable[AttrSet]) -> tuple[AttrSet, ...]:
    """Every subset of every set (including ``()``), smallest first then lexicographic."""
    closure: set[AttrSet] = set()
    for s in sets:
        closure.update(subsets(tuple(sorted(s))))
    return tuple(sorted(closure, key=lambda s: (len(s), s)))


def grem_mle(sets: Sequence[AttrSet], measurements: Mapping[AttrSet, Sequence[tuple]],
             shape: Sequence[int]) -> dict[AttrSet, np.ndarray]:
    """GReM-MLE reconstruction (spec Alg. 3) of the marginals over ``sets`` from scratch.

    Args:
        sets: attribute sets to reconstruct (sorted axis tuples).
        measurements: residual ``tau`` -> ``(z, sigma2)`` measurements of it; residuals of the
            downward closure without measurements are set to zero (minimum-norm fill).
        shape: sizes of every attribute of the domain.

    Returns:
        ``gamma`` -> reconstructed marginal (counts, possibly negative), consistent across sets.
    """
    pooled = {tau: pool(items)[0] for tau, items in measurements.items() if items}
    centred: dict[AttrSet, np.ndarray] = {}
    out = {}
    for gamma in sets:
        est = np.zeros(tuple(shape[k] for k in gamma))
        for tau in subsets(gamma):
            if tau in pooled:
                if tau not in centred:
                    centred[tau] = np.asarray(recon(pooled[tau], tau, tau, shape))
                est += smear_into(centred[tau], tau, gamma, shape)
        out[gamma] = est
    return out


class ResidualEstimates:
    """Pooled residual estimates over a downward closure, with the marginals they imply.

    Holds ``z_tau`` and ``lambda_tau`` for every residual of ``closure`` (zero until measured)
    and the GReM-MLE marginal of every tracked set. :meth:`add` pools a new measurement; with
    ``update="lazy"`` the tracked supersets of the residual are updated in place
    (``mu_gamma += Recon(z' - z, tau, gamma)``), with ``update="full"`` every tracked marginal is
    rebuilt from all residuals on the next read (or :meth:`sync`).

    Args:
        shape: sizes of every attribute of the domain.
        closure: the residuals that may be measured (a downward-closed family, with ``()``).
        tracked: attribute sets whose marginals are kept (each must lie in ``closure``).
        update: ``"lazy"`` or ``"full"``.
    """

    def __init__(self, shape: Sequence[int], closure: Iterable[AttrSet],
                 tracked: Iterable[AttrSet], update: str = "lazy") -> None:
        if update not in UPDATES:
            raise ValueError(f"update: unknown {update!r}; allowed: {', '.join(UPDATES)}")
        self.shape = tuple(int(n) for n in shape)
        self.update = update
        self.closure = tuple(sorted({tuple(sorted(t)) for t in closure},
                                    key=lambda s: (len(s), s)))
        known = set(self.closure)
        self.tracked = tuple(dict.fromkeys(tuple(sorted(g)) for g in tracked))
        missing = [g for g in self.tracked if g not in known]
        if missing:
            raise ValueError(f"tracked sets {missing} are not in the closure")
        self.z = {t: np.zeros(residual_shape(t, self.shape)) for t in self.closure}
        self.lam = dict.fromkeys(self.closure, 0.0)
        members = {g: set(g) for g in self.tracked}
        # Superset index: which tracked marginals a change of residual tau touches.
        self.supersets = {t: tuple(g for g in self.tracked if members[g].issuperset(t))
                          for t in self.closure}
        self._est = {g: np.zeros(tuple(self.shape[k] for k in g)) for g in self.tracked}
        self._changed: set[AttrSet] = set()
        self._stale = False
        self.measurements = 0

    # ---------------------------------------------------------------------------- updates
    def add(self, tau: AttrSet, z_new: np.ndarray, sigma2: float) -> None:
        """Pool one new measurement ``z_new ~ zeta_tau + N(0, sigma2 V_tau)`` of residual tau.

        Args:
            tau: the residual's attribute set (in the closure).
            z_new: the noisy residual.
            sigma2: its variance scalar (counts squared).
        """
        tau = tuple(sorted(tau))
        if tau not in self.lam:
            raise KeyError(f"residual {tau} is not in the closure")
        lam_old = self.lam[tau]
        lam_new = lam_old + 1.0 / sigma2
        pooled = (lam_old * self.z[tau] + np.asarray(z_new, dtype=float) / sigma2) / lam_new
        delta = pooled - self.z[tau]
        self.z[tau], self.lam[tau] = pooled, lam_new
        self.measurements += 1
        if self.update == "full":
            self._stale = True
            return
        targets = self.supersets[tau]
        if not targets:
            return
        # Centre once, then smear into every tracked superset (spec 2.4, 4.1).
        centred = np.asarray(recon(delta, tau, tau, self.shape))
        for gamma in targets:
            self._est[gamma] += smear_into(centred, tau, gamma, self.shape)
        self._changed.update(targets)

    def sync(self) -> None:
        """Rebuild every tracked marginal from the residuals if a full update is pending."""
        if not self._stale:
            return
        measured = {t: [(self.z[t], 1.0 / self.lam[t])] for t in self.closure
                    if self.lam[t] > 0}
        self._est = grem_mle(self.tracked, measured, self.shape)
        self._changed.update(self.tracked)
        self._stale = False

    # ----------------------------------------------------------------------------- reads
    def marginal(self, gamma: AttrSet) -> np.ndarray:
        """The GReM-MLE estimate of the marginal over ``gamma`` (counts, may be negative).

        Tracked sets return the kept array (do not modify it); other sets of the closure are
        reconstructed on demand from the residuals.
        """
        gamma = tuple(sorted(gamma))
        if gamma in self._est:
            self.sync()
            return self._est[gamma]
        out = np.zeros(tuple(self.shape[k] for k in gamma))
        for tau in subsets(gamma):
            if self.lam.get(tau, 0.0) > 0:
                out += recon(self.z[tau], tau, gamma, self.shape)
        return out

    def pop_changed(self) -> set[AttrSet]:
        """Tracked sets whose marginal changed since the last call (and forget them)."""
        self.sync()
        changed, self._changed = self._changed, set()
        return changed

    def total(self) -> float:
        """The pooled estimate of the record count ``z_()`` (0 until measured)."""
        return float(self.z[()])

    def cell_variance(self, gamma: AttrSet) -> float:
        """Per-cell variance of the estimate of ``gamma`` from the measured residuals
        (``sum v_tau / lambda_tau``, spec 3.5); unmeasured residuals add bias, not variance."""
        gamma = tuple(sorted(gamma))
        return float(sum(variance_factor(t, gamma, self.shape) / self.lam[t]
                         for t in subsets(gamma) if self.lam.get(t, 0.0) > 0))
