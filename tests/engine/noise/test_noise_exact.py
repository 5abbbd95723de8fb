"""The calibrated exact noise of one measurement: integer and real strategies, Laplace,
with OpenDP as an oracle."""

from __future__ import annotations

import math

import numpy as np
import pytest

from engine.linalg.matrix import Dense, Identity, Kron
from engine.noise import (
    column_support,
    exact_noise,
    is_integral,
    release_rng,
)
from engine.privacy import Privacy


def test_integer_strategies_are_released_on_the_integers_without_inflation() -> None:
    prefix = Dense(np.tril(np.ones((5, 5))))
    K = Kron([prefix, Identity(3)])
    assert is_integral(K) and column_support(K) == 5
    assert not is_integral(Dense(np.full((2, 2), 0.5)))
    noise = exact_noise(Privacy(noise="zcdp", rho=0.5), K.sensitivity(1), K.sensitivity(2),
                        integral=True, support=5)
    assert noise.grid_exponent == 0 and noise.sensitivity == pytest.approx(math.sqrt(5))
    assert noise.scale == pytest.approx(math.sqrt(5)) and noise.guarantee["rho"] == 0.5
    y = noise.apply(np.array([3.0, 7.0, 11.0]), release_rng(1))
    assert np.array_equal(y, np.round(y))


def test_real_strategies_are_released_on_the_grid() -> None:
    privacy = Privacy(noise="zcdp", rho=0.5)
    noise = exact_noise(privacy, 2.3, 1.4, integral=False, support=4, grid_exponent=6)
    g = 2.0**-6
    assert noise.spacing == g and noise.sensitivity > 1.4
    assert noise.scale == pytest.approx(noise.sensitivity)  # sigma = D / sqrt(2 rho), rho = 1/2
    y = noise.apply(np.random.default_rng(2).normal(size=1000) * 50, release_rng(2))
    assert np.array_equal(y / g, np.round(y / g))


def test_laplace_release_is_pure_eps_at_the_grid_sensitivity() -> None:
    noise = exact_noise(Privacy(noise="laplace", epsilon=0.7), 3.0, 2.0, integral=True,
                        support=3)
    assert noise.sampler == "discrete_laplace" and noise.scale == pytest.approx(3.0 / 0.7)
    assert noise.guarantee["epsilon"] <= 0.7
    assert noise.guarantee["epsilon"] == pytest.approx(0.7, rel=1e-9)


@pytest.fixture(scope="module")
def opendp():
    dp = pytest.importorskip("opendp.prelude")
    dp.enable_features("contrib")
    return dp


@pytest.mark.parametrize(("eps", "D"), [(0.1, 1), (1.0, 3), (2.5, 7)])
def test_laplace_calibration_matches_opendp(opendp, eps: float, D: int) -> None:
    noise = exact_noise(Privacy(noise="laplace", epsilon=eps), D, D, integral=True, support=1)
    space = (opendp.vector_domain(opendp.atom_domain(T=int)), opendp.l1_distance(T=int))
    meas = opendp.m.make_laplace(*space, scale=noise.scale)
    assert meas.map(D) == pytest.approx(eps, rel=1e-9)
    assert noise.guarantee["epsilon"] == pytest.approx(meas.map(D), rel=1e-9)

