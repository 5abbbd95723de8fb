"""Exact noise in the residual family and AIM+GReM: integer noise on the grid of the whitened
residual answers, records that say exact, seeded reproducibility, variances as planned."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import chi2

from engine.data.dataset import Dataset
from engine.domain import Domain
from engine.linalg.residuals import decomp, privacy_factor, residual_covariance, whiten
from engine.mechanisms import get
from engine.mechanisms.aim_grem.aim import exponential_probabilities
from engine.mechanisms.aim_grem.grem import measure_residual, residual_noise
from engine.noise import ExactNoise, exponential_mechanism
from engine.privacy import Privacy
from engine.workloads import Workload
from engine.workloads.groups import Marginals

BETA1 = Privacy(noise="zcdp", rho=0.5)


def abc_marginals() -> Workload:
    dom = Domain.from_sizes([2, 3, 4], ["A", "B", "C"], ["numeric"] * 3)
    return Workload(dom, (Marginals(k=1), Marginals(k=2)))


@pytest.fixture(scope="module")
def plans() -> dict:
    W = abc_marginals()
    return {"residual-planner": get("residual-planner").plan(W, BETA1),
            "querysmasher": get("querysmasher", workers=0).plan(W, BETA1)}


class Spy:
    """Records the integers the exact sampler draws (and draws them as usual)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.draws: list[np.ndarray] = []
        original = ExactNoise.integers

        def integers(noise: ExactNoise, size: int, rng: np.random.Generator) -> np.ndarray:
            z = original(noise, size, rng)
            self.draws.append(z)
            return z

        monkeypatch.setattr(ExactNoise, "integers", integers)


def test_querysmasher_noise_is_integers_on_the_grid(plans: dict, monkeypatch) -> None:
    plan = plans["querysmasher"]
    data = Dataset.synthetic(plan.workload.domain, 300, rng=1)
    spy = Spy(monkeypatch)
    m = plan.measure(data, np.random.default_rng(3))
    noise = m.noise
    assert noise.record()["exact"] is True and noise.sampler == "discrete_gaussian"
    assert noise.guarantee["rho"] == pytest.approx(0.5, rel=1e-12)
    g = noise.spacing
    exact = plan.strategy.matvec(data.datavector().astype(float))
    (z,) = spy.draws
    assert z.dtype == np.int64 and z.size == m.y.size
    np.testing.assert_array_equal(m.y / g, np.floor(exact / g + 0.5) + z)
    assert 1.0 <= noise.variance_factor < 1.002


def test_residual_planner_noise_is_integers_on_the_whitened_residuals(plans: dict,
                                                                       monkeypatch) -> None:
    plan = plans["residual-planner"]
    data = Dataset.synthetic(plan.workload.domain, 300, rng=1)
    spy = Spy(monkeypatch)
    m = plan.measure(data, np.random.default_rng(3))
    assert m.noise.record()["exact"] is True
    g = m.noise.spacing
    (z,) = spy.draws
    assert z.dtype == np.int64 and z.size == m.y.size
    # back to the whitened residuals: w = V^(-1/2) y / sqrt(tau2) = round(w_exact / g) g + g z
    shape = plan.workload.domain.shape
    view = plan.view("residual_variances")  # one bar per residual, in measurement order
    names = plan.workload.domain.names
    lo = 0
    for label, tau2 in zip(view.names, view.values, strict=True):
        a = () if label == "total" else tuple(names.index(n) for n in label.split(" x "))
        marginal = data.marginal([names[i] for i in a])
        w_exact = whiten(decomp(marginal, a, a)).reshape(-1) / math.sqrt(tau2)
        hi = lo + math.prod(shape[i] - 1 for i in a)
        part = m.y[lo:hi].reshape(tuple(shape[i] - 1 for i in a))
        w = whiten(part).reshape(-1) / math.sqrt(tau2)
        np.testing.assert_allclose(w / g - np.floor(w_exact / g + 0.5), z[lo:hi], atol=1e-6)
        lo = hi
    assert lo == m.y.size


@pytest.mark.parametrize("name", ["residual-planner", "querysmasher"])
def test_seeded_runs_repeat_and_unseeded_differ(plans: dict, name: str) -> None:
    plan = plans[name]
    data = Dataset.synthetic(plan.workload.domain, 300, rng=1)
    a = plan.run(data, np.random.default_rng(11))
    b = plan.run(data, np.random.default_rng(11))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(plan.run(data), plan.run(data))


@pytest.mark.parametrize("name", ["residual-planner", "querysmasher"])
def test_monte_carlo_variance_is_the_plans_times_the_factor(plans: dict, name: str) -> None:
    plan = plans[name]
    W = plan.workload
    x = np.random.default_rng(2).integers(0, 30, W.domain.size).astype(float)
    truth = W.answer(x)
    rng = np.random.default_rng(5)
    trials = 3000
    errors = np.array([plan.run(x, rng) - truth for _ in range(trials)])
    factor = plan.measure(x, rng).noise.variance_factor
    analytic = plan.variances() * factor
    # sampling spread of a variance estimate: sqrt(2 / trials) = 2.6 % per query
    np.testing.assert_allclose(errors.var(axis=0) / analytic, 1.0, atol=0.12)
    # the total squared error pools every query: a few tenths of a percent of spread
    assert (errors**2).sum(axis=1).mean() == pytest.approx(plan.tse() * factor, rel=0.03)


def test_aim_residual_measurement_is_exact_on_its_grid(monkeypatch) -> None:
    shape = (3, 4)
    tau = (0, 1)
    mu = np.arange(12.0).reshape(shape) * 7
    noise = residual_noise(shape, 2.0)
    # the cost is the Gaussian residual's p_tau / (2 sigma2) exactly, at a slightly larger sigma
    assert noise.guarantee["rho"] == pytest.approx(privacy_factor(tau, shape) / 4.0, rel=1e-12)
    assert noise.scale == pytest.approx(math.sqrt(2.0 * noise.variance_factor), rel=1e-12)
    assert 1.0 <= noise.variance_factor < 1.002
    spy = Spy(monkeypatch)
    z = measure_residual(mu, tau, 2.0, np.random.default_rng(4))
    w = whiten(z) / noise.spacing
    np.testing.assert_allclose(w, np.round(w), atol=1e-6)  # released on the grid
    exact = np.floor(whiten(decomp(mu, tau, tau)) / noise.spacing + 0.5)
    np.testing.assert_allclose(w - exact, spy.draws[0].reshape(w.shape), atol=1e-6)
    # the total is an integer count with integer noise
    total = measure_residual(np.array(84.0), (), 3.0, np.random.default_rng(4))
    assert float(total - 84.0).is_integer() and residual_noise((), 3.0).grid_exponent == 0


def test_aim_residual_covariance_is_sigma2_v_times_the_factor() -> None:
    rng = np.random.default_rng(8)
    shape, tau, s2 = (3, 2), (0, 1), 2.0
    draws = np.array([measure_residual(np.zeros(shape), tau, s2, rng).ravel()
                      for _ in range(20000)])
    expected = s2 * residual_noise(shape, s2).variance_factor * residual_covariance(tau, shape)
    # entries of a 20 000-draw covariance: relative spread about 1 %, 5 % is over 4 sigma
    np.testing.assert_allclose(np.cov(draws.T), expected, rtol=0.05, atol=0.05 * s2)
    seeded = [measure_residual(np.ones(shape), tau, s2, np.random.default_rng(1))
              for _ in range(2)]
    np.testing.assert_array_equal(*seeded)


def test_exponential_mechanism_matches_its_probabilities() -> None:
    scores, eps, sens = np.array([100.0, 90.0, 50.0, 99.5]), 0.2, 10.0
    rng = np.random.default_rng(21)
    n = 20_000
    counts = np.bincount([exponential_mechanism(scores, eps, sens, rng) for _ in range(n)],
                         minlength=scores.size)
    expected = n * exponential_probabilities(scores, eps, sens)
    stat = float(((counts - expected) ** 2 / expected).sum())
    assert stat < chi2.ppf(1 - 1e-4, df=scores.size - 1)
    # a dominant candidate (others at e**-50 relative) is all but always chosen
    picks = {exponential_mechanism(np.array([0.0, 1000.0, 0.0]), 1.0, 10.0, rng)
             for _ in range(200)}
    assert picks == {1}
    with pytest.raises(ValueError, match="positive"):
        exponential_mechanism(scores, 0.0, sens, rng)


def test_aim_grem_run_says_exact() -> None:
    W = abc_marginals()
    data = Dataset.synthetic(W.domain, 400, rng=2)
    mech = get("aim-grem")
    a = mech.run(W, Privacy(noise="zcdp", rho=1.0), data, np.random.default_rng(6))
    b = mech.run(W, Privacy(noise="zcdp", rho=1.0), data, np.random.default_rng(6))
    assert a.details["noise"]["exact"] is True
    assert a.rho_spent == pytest.approx(1.0, rel=1e-12)
    for g, est in a.estimates.items():
        np.testing.assert_array_equal(est, b.estimates[g])
