"""The discrete Laplace sampler against its pmf: inversion, refinement of straddled
thresholds, the block path."""

from __future__ import annotations

import math

import numpy as np
import pytest
from noise_checks import (
    DRAWS,
    binomial_ok,
    chi_square_pvalue,
    discrete_laplace_pmf,
)

from engine.noise import (
    discrete_laplace,
    laplace_parameter,
    release_rng,
)
from engine.noise.laplace import _level_refine, _threshold_bounds, laplace_inversion, laplace_levels


@pytest.mark.parametrize("scale", [0.5, 4.2, 1000.0])
def test_discrete_laplace_matches_its_pmf(scale: float) -> None:
    draws = discrete_laplace(scale, DRAWS, release_rng(12))
    p = chi_square_pvalue(draws, lambda v: discrete_laplace_pmf(v, scale), 2 * scale)
    assert 1e-4 < p < 1.0 - 1e-6, p
    a = math.exp(-1.0 / scale)
    assert draws.var() == pytest.approx(2 * a / (1 - a) ** 2, rel=0.01)


def test_discrete_laplace_at_scale_two_matches_the_geometric_mechanism_zero_mass() -> None:
    draws = discrete_laplace(2.0, DRAWS, release_rng(3))
    zero = math.tanh(0.25)  # (1 - a) / (1 + a) with a = e^-1/2: 0.244919
    assert zero == pytest.approx(0.244919, abs=1e-6)
    assert (draws == 0).mean() == pytest.approx(zero, abs=5 * math.sqrt(zero / DRAWS))


@pytest.mark.parametrize("scale", [0.5, 3.0, 5000.0, 2.0**33])
def test_level_refinement_splits_a_straddled_threshold_exactly(scale: float) -> None:
    # a prefix whose interval contains the threshold C q**(M k): level k + 1 with probability
    # frac(2**53 threshold), else level k; the vectorised path sends it to the refinement
    p = laplace_inversion(*laplace_parameter(scale))
    k = 3
    lo, _ = _threshold_bounds(p, k, 53 + 40)
    prefix = lo >> 40
    conditional = (lo & (2**40 - 1)) / 2**40
    rng = release_rng(23)
    n = 3000
    levels = np.array([_level_refine(prefix, p, rng) for _ in range(n)])
    assert set(levels.tolist()) <= {k, k + 1}
    assert binomial_ok(int((levels == k + 1).sum()), n, conditional)
    vector = laplace_levels(p, np.full(n, prefix, dtype=np.uint64), rng)
    assert set(vector.tolist()) <= {k, k + 1}
    assert binomial_ok(int((vector == k + 1).sum()), n, conditional)


def test_tiny_uniform_walks_to_a_deep_level() -> None:
    # prefix 0: U < 2**-53, far in the tail; the refinement reads bits until it is decided
    p = laplace_inversion(*laplace_parameter(4.2))
    rng = release_rng(24)
    levels = np.array([_level_refine(0, p, rng) for _ in range(200)])
    # P[|Z| >= k] = C q**(k - 1) < 2**-53 needs k >= 1 + 53 ln 2 / (1 / 4.2) - ... ~ 152
    floor = math.floor(4.2 * (53 * math.log(2) + math.log(2 * math.exp(-1 / 4.2)
                                                         / (1 + math.exp(-1 / 4.2)))))
    assert levels.min() >= floor
    # given U < 2**-53 the overshoot is geometric with mean ~ 4.2 (memoryless)
    assert 2.0 < levels.mean() - floor < 8.0


@pytest.mark.parametrize("scale", [5000.0, 3.0e5])
def test_discrete_laplace_block_path_matches_its_pmf(scale: float) -> None:
    # scales above 2**11 invert the block index and draw the offset by rejection
    assert laplace_inversion(*laplace_parameter(scale)).block_bits > 0
    draws = discrete_laplace(scale, DRAWS, release_rng(25))
    p = chi_square_pvalue(draws, lambda v: discrete_laplace_pmf(v, scale), 2 * scale)
    assert 1e-4 < p < 1.0 - 1e-6, p
    a = math.exp(-1.0 / scale)
    assert draws.var() == pytest.approx(2 * a / (1 - a) ** 2, rel=0.01)

