"""Privacy units: analytic Gaussian calibration, zCDP conversions, noise sampling, spec parsing."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from engine.errors import SpecError
from engine.privacy import (
    Privacy,
    analytic_gaussian_sigma,
    cdp_delta,
    cdp_eps,
    cdp_rho,
    classical_gaussian_sigma,
    li_miklau_gaussian_sigma,
)


def balle_wang_delta(sigma: float, eps: float) -> float:
    """delta achieved by N(0, sigma^2) at unit L2 sensitivity (Balle & Wang, Thm. 8)."""
    return norm.cdf(0.5 / sigma - eps * sigma) - math.exp(eps) * norm.cdf(-0.5 / sigma
                                                                        - eps * sigma)


def test_reference_values() -> None:
    sigma = analytic_gaussian_sigma(1.0, 1e-6)
    assert round(sigma, 6) == 4.224679
    assert sigma == pytest.approx(4.224678889, abs=1e-9)  # spec R1
    assert balle_wang_delta(sigma, 1.0) == pytest.approx(1e-6, rel=1e-9)
    assert cdp_eps(rho=0.03125, delta=1e-3) == pytest.approx(0.6880024554878086, rel=1e-12)
    assert cdp_rho(eps=1.0, delta=1e-9) == pytest.approx(0.014973057673588523, rel=1e-12)


def test_gdp_mu_one_is_sigma_one() -> None:
    # QuerySmasher R11: privacy cost 1 (mu = 1 GDP) gives delta(eps=1) = 0.1269367375
    delta = norm.cdf(-0.5) - math.e * norm.cdf(-1.5)
    assert delta == pytest.approx(0.1269367375, abs=1e-10)
    assert analytic_gaussian_sigma(1.0, delta) == pytest.approx(1.0, rel=1e-10)


@pytest.mark.parametrize("eps,delta", [(0.1, 1e-5), (1.0, 1e-9), (3.0, 1e-6), (10.0, 1e-12)])
def test_analytic_sigma_is_the_smallest_valid_sigma(eps: float, delta: float) -> None:
    sigma = analytic_gaussian_sigma(eps, delta)
    assert balle_wang_delta(sigma, eps) == pytest.approx(delta, rel=1e-6)
    assert balle_wang_delta(sigma * 0.999, eps) > delta
    assert sigma < classical_gaussian_sigma(eps, delta) or eps > 1


def test_classical_calibrations() -> None:
    assert classical_gaussian_sigma(1.0, 1e-6) == pytest.approx(5.2988, abs=1e-4)
    assert li_miklau_gaussian_sigma(1.0, 1e-6) == pytest.approx(math.sqrt(2 * math.log(2e6)))


def test_cdp_conversions_are_consistent() -> None:
    for rho in (0.01, 0.5, 2.0):
        for delta in (1e-9, 1e-6):
            eps = cdp_eps(rho, delta)
            assert cdp_delta(rho, eps) == pytest.approx(delta, rel=1e-6)
            assert cdp_rho(eps, delta) == pytest.approx(rho, rel=1e-9)
    assert cdp_delta(0.0, 1.0) == 0.0
    assert cdp_eps(0.5, 1.0) == 0.0
    assert cdp_delta(0.5, 0.5) > cdp_delta(0.5, 1.0) > cdp_delta(0.5, 2.0)


def test_privacy_units() -> None:
    lap = Privacy(noise="laplace", epsilon=0.5)
    assert lap.norm == 1
    assert lap.sigma() == pytest.approx(math.sqrt(2) / 0.5)
    assert lap.unit_variance() == pytest.approx(8.0)
    gau = Privacy(noise="gaussian", epsilon=1.0, delta=1e-6)
    assert gau.norm == 2 and gau.sigma() == analytic_gaussian_sigma(1.0, 1e-6)
    assert gau.with_(calibration="classical").sigma() == classical_gaussian_sigma(1.0, 1e-6)
    assert gau.with_(calibration="li-miklau").sigma() == li_miklau_gaussian_sigma(1.0, 1e-6)
    z = Privacy(noise="zcdp", rho=0.5)
    assert z.norm == 2 and z.sigma() == 1.0  # "privacy cost 1" of ResidualPlanner
    assert Privacy(noise="zcdp", rho=2.0).unit_variance() == pytest.approx(0.25)


def test_zcdp_equivalents() -> None:
    assert Privacy(noise="zcdp", rho=0.3).zcdp_rho() == 0.3
    assert Privacy(noise="laplace", epsilon=2.0).zcdp_rho() == 2.0
    gau = Privacy(noise="gaussian", epsilon=1.0, delta=1e-9)
    assert gau.zcdp_rho() == pytest.approx(0.014973057673588523, rel=1e-12)
    assert gau.epsilon_at(1e-9) == 1.0
    assert Privacy(noise="zcdp", rho=0.03125).epsilon_at(1e-3) == pytest.approx(
        0.6880024554878086, rel=1e-12)


@pytest.mark.parametrize("noise", ["laplace", "gaussian", "zcdp"])
def test_sample_has_the_calibrated_variance(noise: str) -> None:
    p = Privacy(noise=noise, epsilon=2.0, delta=1e-5, rho=0.2)
    draws = p.sample(200_000, 3.0, np.random.default_rng(1))
    assert draws.shape == (200_000,)
    assert draws.var() == pytest.approx(p.unit_variance() * 9.0, rel=0.02)
    assert abs(draws.mean()) < 0.05 * math.sqrt(p.unit_variance() * 9.0)
    assert p.sample((3, 4), 1.0, np.random.default_rng(0)).shape == (3, 4)


def test_keys_specs_and_descriptions() -> None:
    gau = Privacy(noise="gaussian", epsilon=1.0, delta=1e-6)
    assert gau.key() == ("gaussian", 1.0, 1e-6, "analytic")
    assert Privacy(noise="laplace", epsilon=1.0).key() == ("laplace", 1.0)
    assert Privacy(noise="zcdp", rho=0.5).key() == ("zcdp", 0.5)
    assert gau.describe() == "gaussian eps=1 delta=1e-06"
    assert Privacy(noise="laplace", epsilon=0.5).describe() == "laplace eps=0.5"
    assert gau.with_(calibration="classical").describe() == (
        "gaussian eps=1 delta=1e-06 (classical)")
    for spec in ({"noise": "laplace", "epsilon": 0.5}, {"noise": "zcdp", "rho": 0.25},
                 {"noise": "gaussian", "epsilon": 2.0, "delta": 1e-8},
                 {"noise": "gaussian", "epsilon": 2.0, "delta": 1e-8,
                  "calibration": "classical"}):
        p = Privacy.from_spec(spec)
        assert p.to_spec() == spec
        assert Privacy.from_spec(p.to_spec()).key() == p.key()
    assert gau.with_(epsilon=2.0).epsilon == 2.0 and gau.epsilon == 1.0


@pytest.mark.parametrize("spec,message", [
    ({"noise": "gausian", "epsilon": 1},
     "privacy.noise: unknown noise 'gausian' (did you mean 'gaussian'?); "
     "allowed: laplace, gaussian, zcdp"),
    ({"noise": "laplace", "epsilon": 1, "delta": 1e-6},
     "privacy.delta: not a parameter of laplace noise; allowed: noise, epsilon"),
    ({"noise": "zcdp", "rh": 0.5},
     "privacy.rh: not a parameter of zcdp noise (did you mean 'rho'?); allowed: noise, rho"),
    ({"noise": "laplace"}, "privacy.epsilon: missing (required for laplace noise)"),
    ({"noise": "gaussian", "epsilon": 1, "delta": 2},
     "privacy.delta: must lie strictly between 0 and 1, got 2.0"),
    ({"noise": "gaussian", "epsilon": -1}, "privacy.epsilon: must be a positive number, "
                                           "got -1.0"),
    ({"noise": "zcdp", "rho": "big"}, "privacy.rho: expected a number, got 'big'"),
    ({"noise": "gaussian", "epsilon": 1, "calibration": "exact"},
     "privacy.calibration: unknown 'exact'; allowed: analytic, classical, li-miklau"),
    ([1, 2], "privacy: expected a mapping with 'noise', got [1, 2]"),
])
def test_privacy_spec_errors(spec, message: str) -> None:
    with pytest.raises(SpecError) as info:
        Privacy.from_spec(spec)
    assert str(info.value) == message


def test_invalid_parameters_of_the_functions() -> None:
    with pytest.raises(SpecError, match=r"privacy.epsilon: must be a positive number"):
        analytic_gaussian_sigma(0.0, 1e-6)
    with pytest.raises(SpecError, match=r"privacy.delta: must lie strictly between 0 and 1"):
        analytic_gaussian_sigma(1.0, 1.0)
    with pytest.raises(SpecError, match=r"privacy.rho: must be non-negative"):
        cdp_eps(-1.0, 1e-6)
