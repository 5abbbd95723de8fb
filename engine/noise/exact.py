"""A calibrated exact noise for one measurement: :class:`ExactNoise` and :func:`exact_noise`.

The release is ``g (round(A x / g) + Z)`` with Z discrete Gaussian or discrete Laplace
integers in grid units (:mod:`engine.noise.grid` for g and the sensitivity on the grid,
:mod:`engine.noise.calibration` for sigma). The record says which parameter was actually
used and the guarantee achieved at it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from engine.errors import SpecError
from engine.noise.batches import BATCH
from engine.noise.calibration import discrete_gaussian_sigma, zcdp_gaussian_sigma
from engine.noise.gaussian import discrete_gaussian
from engine.noise.grid import auto_grid_exponent, check_grid_exponent, grid_sensitivity
from engine.noise.laplace import discrete_laplace, laplace_parameter


@dataclass(frozen=True)
class ExactNoise:
    """The exact noise of one measurement: sampler, grid, parameter and achieved guarantee.

    Attributes:
        sampler: ``discrete_gaussian`` or ``discrete_laplace``.
        grid_exponent: k of the grid spacing 2**-k (0 for integer strategies).
        scale: sigma (Gaussian) or b (Laplace) in answer units; the sampler rounds it up
            by at most a relative 1e-8 (module docstring).
        sensitivity: the sensitivity on the grid in answer units (L2 for Gaussian, L1 for
            Laplace) the guarantee is computed from.
        plan_scale: the continuous plan's sigma (or b) in answer units, for comparison.
        guarantee: the achieved level, e.g. ``{"rho": ...}`` or ``{"epsilon", "delta"}``.
        calibration: how the parameter was found (text).
    """

    sampler: str
    grid_exponent: int
    scale: float
    sensitivity: float
    plan_scale: float
    guarantee: dict[str, float]
    calibration: str

    @property
    def spacing(self) -> float:
        """The grid spacing ``2**-k``."""
        return 2.0 ** -self.grid_exponent

    @property
    def noise_std(self) -> float:
        """Upper bound on the per-answer noise std in answer units (the continuous one)."""
        return self.scale * (math.sqrt(2.0) if self.sampler == "discrete_laplace" else 1.0)

    @property
    def variance_factor(self) -> float:
        """``(scale / plan_scale)**2``: the release's expected squared error is the plan's times
        this (1 for zCDP and Laplace on integer strategies; about 1.15 for (eps, delta) through
        zCDP; slightly above 1 where the grid enlarges the sensitivity)."""
        return (self.scale / self.plan_scale) ** 2

    def integers(self, size: int, rng: np.random.Generator) -> np.ndarray:
        """Integer noise in grid units."""
        unit = Fraction(self.scale) / Fraction(self.spacing)
        if self.sampler == "discrete_laplace":
            return discrete_laplace(unit, size, rng)
        return discrete_gaussian(unit, size, rng)

    def apply(self, exact: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """``g (round(exact / g) + Z)``: the released answers, on the grid.

        Drawn in chunks of :data:`BATCH` answers, so the memory beyond the output is
        O(BATCH) (no full-size integer noise or lattice array)."""
        exact = np.asarray(exact, dtype=float)
        g = self.spacing
        flat = exact.reshape(-1)
        out = np.empty(flat.size)
        for start in range(0, flat.size, BATCH):
            chunk = flat[start:start + BATCH]
            lattice = np.floor(chunk / g + 0.5)
            lattice += self.integers(chunk.size, rng)
            out[start:start + chunk.size] = lattice * g
        return out.reshape(exact.shape)

    def record(self) -> dict[str, Any]:
        """The JSON fields of a release record that describe this noise."""
        return {"sampler": self.sampler, "exact": True, "grid_exponent": self.grid_exponent,
                "grid_spacing": self.spacing, "scale": self.scale,
                "sensitivity_on_grid": self.sensitivity, "plan_scale": self.plan_scale,
                "variance_factor": self.variance_factor,
                "guarantee": dict(self.guarantee), "calibration": self.calibration}


def exact_noise(privacy: Any, l1: float, l2: float, *, integral: bool, support: int,
                grid_exponent: int | None = None) -> ExactNoise:
    """Calibrate the exact noise of a measurement with sensitivities (l1, l2).

    Args:
        privacy: an :class:`engine.privacy.Privacy` (laplace, gaussian or zcdp).
        l1, l2: the strategy's L1 and L2 sensitivities (answer units).
        integral: True when the strategy's entries are integers (then no rounding, spacing 1).
        support: :func:`column_support` of the strategy.
        grid_exponent: k of the spacing 2**-k for non-integer strategies; None chooses it
            (:func:`auto_grid_exponent`).
    """
    laplace = privacy.noise == "laplace"
    if integral:
        k = 0
    elif grid_exponent is None:
        k = auto_grid_exponent(laplace, l1, l2, support,
                               1.0 / privacy.epsilon if laplace else privacy.sigma())
    else:
        k = check_grid_exponent(grid_exponent, "grid_exponent")
    g = 2.0**-k
    d1, d2 = (l1, l2) if integral else grid_sensitivity(l1, l2, support, g)
    if privacy.noise == "laplace":
        if not math.isfinite(d1):
            raise SpecError("privacy.noise: laplace needs a finite L1 sensitivity")
        b = d1 / privacy.epsilon
        t, s = laplace_parameter(Fraction(b) / Fraction(g))
        scale = float(Fraction(t, s) * Fraction(g))
        return ExactNoise("discrete_laplace", k, scale, d1, l1 / privacy.epsilon,
                          {"epsilon": d1 / scale}, "b = L1 / eps on the grid")
    if privacy.noise == "zcdp":
        sigma = d2 / math.sqrt(2.0 * privacy.rho)
        how = "sigma = L2 / sqrt(2 rho) (exact zCDP of the discrete Gaussian)"
    else:
        sigma = zcdp_gaussian_sigma(privacy.epsilon, privacy.delta, d2)
        how = "rho-zCDP then the CKS conversion to (eps, delta)"
        shift = d2 / g
        if support == 1 and float(shift).is_integer() and sigma / g <= 1e5:
            one_d = discrete_gaussian_sigma(privacy.epsilon, privacy.delta, int(shift)) * g
            if one_d < sigma:
                sigma, how = one_d, "CKS Theorem 7 (one coordinate per record)"
    # the sampler rounds sigma**2 up (gaussian_parameter): the guarantee at sigma is conservative
    guarantee = {"rho": d2**2 / (2.0 * sigma**2)}
    if privacy.noise == "gaussian":
        guarantee.update(epsilon=float(privacy.epsilon), delta=float(privacy.delta))
    return ExactNoise("discrete_gaussian", k, sigma, d2, privacy.sigma() * l2, guarantee, how)
