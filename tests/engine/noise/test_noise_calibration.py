"""The discrete Gaussian's calibration: CKS Theorem 7's curve and the zCDP route, with
OpenDP as an oracle."""

from __future__ import annotations

import math

import numpy as np
import pytest
from noise_checks import (
    discrete_gaussian_pmf,
)

from engine.noise import (
    discrete_gaussian_delta,
    discrete_gaussian_sigma,
    zcdp_gaussian_sigma,
)
from engine.privacy import analytic_gaussian_sigma, cdp_eps


def test_theorem7_curve_is_the_exact_hockey_stick_divergence() -> None:
    """delta from CKS Theorem 7 equals sum_y max(0, P(y) - e^eps Q(y)) summed directly."""
    for sigma, eps, shift in ((1.3, 0.5, 1), (4.2, 1.0, 1), (6.0, 0.8, 3)):
        y = np.arange(-400, 401)
        P = discrete_gaussian_pmf(y, sigma)
        Q = discrete_gaussian_pmf(y - shift, sigma)
        direct = float(np.maximum(P - math.exp(eps) * Q, 0.0).sum())
        assert discrete_gaussian_delta(sigma, eps, shift) == pytest.approx(direct, rel=1e-9)


def test_theorem7_at_a_huge_eps_is_the_narrowest_discrete_gaussian_and_never_overflows() -> None:
    """A fuzzed ``run --epsilon 1e300`` asked numpy for a support of 1e300 points; e^eps
    overflows a float past 709."""
    assert discrete_gaussian_sigma(1e300, 1e-6, 1) == 1e-3
    assert discrete_gaussian_sigma(1e15, 1e-9, 3) == 3e-3
    # past e^709: only P[Y > a - D/2] = P[Y >= 1] is left (P[Y >= 2] is 0 in double precision)
    assert discrete_gaussian_delta(0.026, 745.0, 1) == pytest.approx(
        float(discrete_gaussian_pmf(np.arange(1, 3), 0.026).sum()), rel=1e-9)
    assert discrete_gaussian_delta(2.0, 1e300, 1) == 0.0
    y = np.arange(-400, 401)  # a support longer than the curve's own at eps = 30
    P, Q = discrete_gaussian_pmf(y, 2.0), discrete_gaussian_pmf(y - 1, 2.0)
    direct = float(np.maximum(P - math.exp(30.0) * Q, 0.0).sum())
    assert discrete_gaussian_delta(2.0, 30.0, 1) == pytest.approx(direct, abs=1e-300)


def test_theorem7_sigma_is_close_to_but_not_below_the_analytic_gaussian() -> None:
    for eps, delta in ((1.0, 1e-6), (0.3, 1e-9), (2.0, 1e-5)):
        discrete = discrete_gaussian_sigma(eps, delta, 1)
        analytic = analytic_gaussian_sigma(eps, delta)
        assert discrete_gaussian_delta(discrete, eps, 1) == pytest.approx(delta, rel=1e-6)
        assert 0.99 * analytic < discrete < 1.02 * analytic
    # the vector route (zCDP then CKS conversion) needs more noise than either
    assert zcdp_gaussian_sigma(1.0, 1e-6, 1.0) == pytest.approx(4.530877, rel=1e-6)


@pytest.fixture(scope="module")
def opendp():
    dp = pytest.importorskip("opendp.prelude")
    dp.enable_features("contrib")
    return dp


GRID = [(eps, delta, D) for eps in (0.3, 1.0, 3.0) for delta in (1e-9, 1e-6, 1e-3)
        for D in (1, 2, 5)]


@pytest.mark.parametrize(("eps", "delta", "D"), GRID)
def test_zcdp_calibration_matches_opendp(opendp, eps: float, delta: float, D: int) -> None:
    sigma = zcdp_gaussian_sigma(eps, delta, D)
    space = (opendp.vector_domain(opendp.atom_domain(T=int)), opendp.l2_distance(T=int))
    meas = opendp.m.make_gaussian(*space, scale=sigma)
    assert meas.map(D) == pytest.approx(D**2 / (2 * sigma**2), rel=1e-12)  # rho
    profile = opendp.c.make_zCDP_to_approxDP(meas).map(D)
    # OpenDP's (eps, delta) curve of that rho meets the target, and tightly
    assert profile.delta(eps) <= delta * (1 + 1e-6)
    assert profile.delta(eps) >= delta * (1 - 1e-3)
    assert cdp_eps(D**2 / (2 * sigma**2), delta) == pytest.approx(profile.epsilon(delta),
                                                                  rel=1e-6)

