"""The discrete Gaussian sampler against its pmf, its rational parameter and its
acceptance brackets."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from noise_checks import (
    DRAWS,
    chi_square_pvalue,
    discrete_gaussian_pmf,
)

from engine.errors import SpecError
from engine.noise import (
    discrete_gaussian,
    gaussian_parameter,
    release_rng,
)
from engine.noise.brackets import decimal_exp_neg
from engine.noise.gaussian import _gaussian_acceptance
from engine.noise.laplace import laplace_inversion


@pytest.mark.parametrize("sigma", [0.5, 4.2, 1000.0])
def test_discrete_gaussian_matches_its_pmf(sigma: float) -> None:
    draws = discrete_gaussian(sigma, DRAWS, release_rng(11))
    assert draws.dtype == np.int64 and draws.shape == (DRAWS,)
    p = chi_square_pvalue(draws, lambda v: discrete_gaussian_pmf(v, sigma), sigma)
    assert 1e-4 < p < 1.0 - 1e-6, p
    # variance at most sigma**2 (CKS Cor. 9; below it by e^(-2 pi^2 sigma^2) relatively)
    support = np.arange(-int(60 * sigma) - 5, int(60 * sigma) + 6)
    exact_var = float((discrete_gaussian_pmf(support, sigma) * support.astype(float) ** 2).sum())
    assert exact_var <= sigma**2 * (1 + 1e-12)
    assert draws.var() == pytest.approx(exact_var, rel=0.01)


def test_gaussian_parameter_rounds_sigma_squared_up_by_a_tiny_amount() -> None:
    for sigma in (0.5, 4.2, 1000.0, 1e6, 1e8):
        p = gaussian_parameter(sigma)
        rel = float(p.sigma2) / sigma**2 - 1.0
        assert 0.0 <= rel < 1e-8, (sigma, rel)
        assert p.den <= 2**56
    with pytest.raises(SpecError, match="coarser grid"):
        gaussian_parameter(2.0**28)


@pytest.mark.parametrize("sigma", [3000.0, 40000.0])
def test_discrete_gaussian_with_block_proposals_matches_its_pmf(sigma: float) -> None:
    # t >= 2**11: block proposals, the offset's rejection folded into the acceptance
    assert laplace_inversion(gaussian_parameter(sigma).t, 1).block_bits > 0
    draws = discrete_gaussian(sigma, DRAWS, release_rng(26))
    p = chi_square_pvalue(draws, lambda v: discrete_gaussian_pmf(v, sigma), sigma)
    assert 1e-4 < p < 1.0 - 1e-6, p
    assert draws.var() == pytest.approx(sigma**2, rel=0.01)


@pytest.mark.parametrize("sigma", [0.5, 4.2, 1000.0])
def test_gaussian_acceptance_table_brackets_the_exact_probability(sigma: float) -> None:
    param = gaussian_parameter(sigma)
    lo, hi = _gaussian_acceptance(param)
    assert np.all(lo <= hi) and lo[-1] == 0.0
    for y in (0, 1, param.t, 3 * param.t, lo.size - 2):
        x = abs(y * param.q - param.m)
        d_lo, d_hi = decimal_exp_neg(x * x, param.den, 100)
        assert Fraction(lo[y]) <= Fraction(d_hi, 2**100) and Fraction(d_lo, 2**100) <= hi[y]

