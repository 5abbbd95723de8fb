"""Privacy units: analytic Gaussian calibration, zCDP conversions, noise sampling, spec parsing,
and the inverse question (the smallest budget for a target error)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from engine.errors import SpecError
from engine.mechanisms import Plan, get
from engine.privacy import (
    Privacy,
    analytic_gaussian_sigma,
    budget_for_rmse,
    budget_for_sigma,
    budget_name,
    cdp_delta,
    cdp_eps,
    cdp_rho,
    classical_gaussian_sigma,
    li_miklau_gaussian_sigma,
)
from engine.workloads import PrefixBlock, Workload


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


# ----- the inverse question -------------------------------------------------------------------
LEVELS = [Privacy(noise="laplace", epsilon=1.0), Privacy(noise="zcdp", rho=0.5),
          Privacy(noise="gaussian", epsilon=1.0, delta=1e-6),
          Privacy(noise="gaussian", epsilon=1.0, delta=1e-9, calibration="classical"),
          Privacy(noise="gaussian", epsilon=1.0, delta=1e-3, calibration="li-miklau")]
IDS = ["laplace", "zcdp", "analytic", "classical", "li-miklau"]


def h2_plan(privacy: Privacy) -> Plan:
    return get("h2").plan(Workload.one_dim(PrefixBlock(32)), privacy)


def at_budget(privacy: Privacy, budget: float) -> Privacy:
    return privacy.with_(**{budget_name(privacy.noise): budget})


@pytest.mark.parametrize("privacy", LEVELS, ids=IDS)
@pytest.mark.parametrize("target", [0.05, 1.0, 3.7, 40.0])
def test_budget_for_a_target_rmse_round_trips(privacy: Privacy, target: float) -> None:
    plan = h2_plan(privacy)
    budget = plan.budget_for_rmse(target)
    assert budget > 0
    assert plan.rmse(at_budget(privacy, budget)) == pytest.approx(target, rel=1e-9)
    # the smallest such budget: a little less misses the target
    assert plan.rmse(at_budget(privacy, budget * (1 - 1e-6))) > target


def test_closed_forms_are_exact_rescales() -> None:
    plan = h2_plan(Privacy(noise="laplace", epsilon=1.0))
    # Laplace RMSE is proportional to 1/eps: eps = rmse(eps=1) / t.
    assert plan.budget_for_rmse(0.5) == pytest.approx(plan.rmse() / 0.5, rel=1e-14)
    zcdp = h2_plan(Privacy(noise="zcdp", rho=0.5))
    # zCDP RMSE is proportional to 1/sqrt(rho): rho = 0.5 (rmse(rho=0.5) / t)**2.
    assert zcdp.budget_for_rmse(2.0) == pytest.approx(0.5 * (zcdp.rmse() / 2.0) ** 2,
                                                      rel=1e-14)
    assert budget_for_sigma(Privacy(noise="gaussian", delta=1e-9, calibration="classical"),
                            2.0) == pytest.approx(math.sqrt(2 * math.log(1.25e9)) / 2.0,
                                                  rel=1e-15)
    # the paper's reference value, inverted: sigma(1, 1e-6) = 4.224679 -> eps = 1
    assert budget_for_sigma(Privacy(noise="gaussian", delta=1e-6),
                            analytic_gaussian_sigma(1.0, 1e-6)) == pytest.approx(1.0, rel=1e-12)


@pytest.mark.parametrize("privacy", LEVELS, ids=IDS)
def test_budget_decreases_as_the_target_grows(privacy: Privacy) -> None:
    plan = h2_plan(privacy)
    budgets = [plan.budget_for_rmse(t) for t in np.geomspace(0.01, 100.0, 25)]
    assert all(a > b for a, b in zip(budgets, budgets[1:], strict=False))


def test_analytic_gaussian_noise_is_bounded_as_eps_vanishes() -> None:
    # At fixed delta the analytic Gaussian's sigma tends to 1 / (2 z) with z the (1 + delta)/2
    # normal quantile: any noise above that is (eps, delta)-DP for every eps > 0.
    delta = 1e-6
    limit = 0.5 / norm.ppf((1 + delta) / 2)
    level = Privacy(noise="gaussian", delta=delta)
    assert analytic_gaussian_sigma(1e-20, delta) == pytest.approx(limit, rel=1e-6)
    assert budget_for_sigma(level, limit * 1.001) == 0.0
    eps = budget_for_sigma(level, limit * 0.999)
    assert 0 < eps < 1e-2
    assert analytic_gaussian_sigma(eps, delta) == pytest.approx(limit * 0.999, rel=1e-9)


@pytest.mark.parametrize("target", [0.0, -1.0, math.nan, math.inf])
def test_a_target_must_be_a_positive_number(target: float) -> None:
    with pytest.raises(SpecError, match=r"^target: the RMSE must be a positive number"):
        h2_plan(Privacy(noise="laplace")).budget_for_rmse(target)


def test_an_unsupported_workload_is_unreachable() -> None:
    plan = h2_plan(Privacy(noise="laplace"))
    unsupported = Plan("none", plan.workload, plan.privacy, None, math.inf, plan.sensitivity)
    with pytest.raises(SpecError, match=r"^target: unreachable, the error is infinite"):
        unsupported.budget_for_rmse(1.0)
    with pytest.raises(SpecError, match=r"^target: noise std .* needs eps above 1e\+300$"):
        budget_for_sigma(Privacy(noise="gaussian"), 1e-160)
    assert budget_for_rmse(Privacy(noise="zcdp"), 1.0, 0.0) == 0.0  # no error at all


def test_analytic_sigma_follows_large_eps_below_its_first_bracket() -> None:
    # For large eps the analytic sigma approaches 1 / sqrt(2 eps) (the two terms of Theorem 8
    # balance where 1 / (2 sigma) = eps sigma); 1e-8, the first bracket's floor, is passed at
    # eps ~ 5e15, and eps = 1e300 used to end in a scipy traceback.
    from engine.privacy import analytic_gaussian_sigma

    assert analytic_gaussian_sigma(1e12, 1e-6) == pytest.approx(7.071091579023427e-07, rel=1e-9)
    assert analytic_gaussian_sigma(1e300, 1e-6) == pytest.approx(7.0710678118654e-151, rel=1e-9)
    assert analytic_gaussian_sigma(1.0, 1e-6) == pytest.approx(4.224679, abs=5e-7)



def _bisect_1000(low_side, lo: float, hi: float) -> tuple[float, float, float]:
    """The bracket and the last midpoint after 1000 bisection steps without early stop (the
    reference for the conversions); ``low_side(mid)`` says the answer is above ``mid``."""
    for _ in range(1000):
        mid = (lo + hi) / 2.0
        if low_side(mid):
            lo = mid
        else:
            hi = mid
    return lo, hi, mid


@pytest.mark.parametrize("eps, delta", [(0.7, 1e-6), (5.99, 1e-6), (0.01, 1e-9), (10.0, 0.5)])
def test_zcdp_conversions_stop_bisecting_at_adjacent_floats_with_the_same_answer(eps, delta):
    # The searches stop once the bracket stops moving (a slider's conversion line took 0.4 s
    # for 1000 x 1000 steps); the answers are bit for bit those of all 1000 steps.
    rho, _, _ = _bisect_1000(lambda r: cdp_delta(r, eps) <= delta, 0.0, eps + 1.0)
    assert cdp_rho(eps, delta) == rho
    _, back, _ = _bisect_1000(lambda e: cdp_delta(rho, e) > delta, 0.0,
                           rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta)))
    assert cdp_eps(rho, delta) == back
    assert back == pytest.approx(eps, rel=1e-6)
    # the order alpha of the Renyi bound, bisected on the sign of its derivative
    *_, alpha = _bisect_1000(
        lambda a: (2.0 * a - 1.0) * rho - eps + math.log1p(-1.0 / a) < 0,
        math.nextafter(1.0, 2.0), (eps + 1.0) / (2.0 * rho) + 2.0)
    log_bound = ((alpha - 1.0) * (alpha * rho - eps) + alpha * math.log1p(-1.0 / alpha)
                 - math.log(alpha - 1.0))
    assert cdp_delta(rho, eps) == min(math.exp(log_bound), 1.0)


@pytest.mark.parametrize("rho", [1e6, 1e12])
def test_cdp_conversions_hold_for_a_huge_rho(rho: float) -> None:
    """A ledger's remaining budget can be huge (rho = 1e6 overflowed the bound's exponent and
    crashed the release record after the charge): the conversion still finds the eps whose
    delta is the one asked, just under Bun-Steinke's rho + 2 sqrt(rho log(1/delta))."""
    delta = 1e-6
    eps = cdp_eps(rho, delta)
    spread = math.sqrt(rho * math.log(1.0 / delta))
    assert rho + 1.99 * spread < eps < rho + 2.0 * spread
    assert cdp_delta(rho, eps) == pytest.approx(delta, rel=1e-6)
    assert cdp_delta(rho, rho / 2) == 1.0  # a bound far above 1 is reported as 1, not overflowed
