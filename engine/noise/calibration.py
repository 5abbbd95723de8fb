"""The discrete Gaussian's calibration to (eps, delta): its own 1-D curve and the zCDP route.

The discrete Gaussian with parameter sigma and L2 sensitivity D is ``D**2 / (2 sigma**2)``-zCDP
exactly (CKS Theorem 14). For an (eps, delta) target sigma is found with the discrete
Gaussian's own curve (CKS Theorem 7, :func:`discrete_gaussian_delta`) when each record moves a
single coordinate, and otherwise through rho-zCDP and the CKS conversion
(:func:`engine.privacy.cdp_rho`, the one conversion of the project), which is valid for
vectors but needs a little more noise than the continuous analytic Gaussian (about 20 % more
sigma at eps = 1, delta = 1e-6).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import brentq

from engine.privacy import cdp_rho


def discrete_gaussian_delta(sigma: float, epsilon: float, sensitivity: int) -> float:
    """delta of the 1-D discrete Gaussian at eps for an integer shift <= ``sensitivity``.

    CKS 2020, Theorem 7: ``delta = P[Y > eps s2/D - D/2] - e^eps P[Y > eps s2/D + D/2]``
    with Y ~ N_Z(0, s2). Summed in double precision over the support (sigma <= 1e5) within
    ``40 sigma + sensitivity`` of 0: a point beyond has weight below ``exp(-800)``, which is 0 in
    double precision, so a threshold past the support (a huge eps) sums nothing, as it would
    over a longer support.
    """
    if sigma > 1e5:
        raise ValueError("discrete_gaussian_delta: sigma above 1e5; use the zCDP bound")
    half = int(math.ceil(40.0 * sigma + sensitivity)) + 1
    y = np.arange(-half, half + 1, dtype=float)
    logw = -(y**2) / (2.0 * sigma**2)
    w = np.exp(logw - logw.max())
    w /= w.sum()
    a = epsilon * sigma**2 / sensitivity
    upper = w[y > a - sensitivity / 2.0].sum()
    lower = float(w[y > a + sensitivity / 2.0].sum())
    if lower == 0.0:
        return max(0.0, float(upper))
    scaled = epsilon + math.log(lower)  # e^eps * lower in logs: e^eps alone overflows past 709
    return max(0.0, float(upper) - math.exp(scaled)) if scaled < 700.0 else 0.0


def discrete_gaussian_sigma(epsilon: float, delta: float, sensitivity: int) -> float:
    """Smallest sigma whose 1-D discrete Gaussian is (eps, delta)-DP (CKS Theorem 7), at least
    ``1e-3 * sensitivity`` (a discrete Gaussian that narrow is 0 with probability 1 - 1e-200;
    a large eps is met there)."""
    def excess(sigma: float) -> float:
        return discrete_gaussian_delta(sigma, epsilon, sensitivity) - delta

    lo, hi = 1e-3 * sensitivity, float(sensitivity)
    if excess(lo) <= 0:
        return lo
    while excess(hi) > 0:
        hi *= 2.0
    return float(brentq(excess, lo, hi, xtol=1e-12, rtol=1e-12))


def zcdp_gaussian_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    """sigma of a discrete Gaussian vector release that is (eps, delta)-DP via rho-zCDP.

    rho = ``cdp_rho(eps, delta)`` (CKS conversion), sigma = sensitivity / sqrt(2 rho).
    """
    return sensitivity / math.sqrt(2.0 * cdp_rho(epsilon, delta))
