"""Exact samplers against their pmfs, the grid's sensitivity bound, and OpenDP as an oracle;
the fast path's certified brackets of exp(-x) and the slow paths that read more bits."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from engine.errors import SpecError
from engine.linalg.matrix import Dense, Identity, Kron
from engine.noise import (
    GRID_INFLATION,
    SEEDED_LABEL,
    _bernoulli_exp_big,
    _decimal_exp_neg,
    _exp_neg_bounds,
    _exp_neg_fast,
    _fused_trials,
    _gaussian_acceptance,
    _laplace_inversion,
    _level_refine,
    _levels,
    _threshold_bounds,
    auto_grid_exponent,
    bernoulli_exp,
    bernoulli_exp1,
    bernoulli_exp_fast,
    check_grid_exponent,
    column_support,
    discrete_gaussian,
    discrete_gaussian_delta,
    discrete_gaussian_pmf,
    discrete_gaussian_sigma,
    discrete_laplace,
    discrete_laplace_pmf,
    exact_noise,
    gaussian_parameter,
    grid_sensitivity,
    is_integral,
    laplace_parameter,
    release_rng,
    seed_from_text,
    seeded_label,
    zcdp_gaussian_sigma,
)
from engine.privacy import Privacy, analytic_gaussian_sigma, cdp_eps

DRAWS = 1_000_000


def chi_square_pvalue(draws: np.ndarray, pmf, spread: float) -> float:
    """Chi-square of the draws against a symmetric pmf: bins of ~spread/8 integers where the
    expected count is at least 5, and each tail beyond them as one bin (its exact mass is
    half of what the central bins leave)."""
    width = max(1, int(spread // 8))
    bins = 2 * int(math.ceil(12 * spread / width)) + 1
    edges = -(bins * width) // 2 + width * np.arange(bins + 1)
    mass = np.add.reduceat(pmf(np.arange(edges[0], edges[-1])), np.arange(0, bins * width,
                                                                         width))
    keep = np.flatnonzero(DRAWS * mass >= 5)
    lo, hi = keep[0], keep[-1]
    while DRAWS * (1.0 - mass[lo:hi + 1].sum()) / 2.0 < 5:  # grow the tails to >= 5 expected
        lo, hi = lo + 1, hi - 1
    central = edges[lo: hi + 2]
    inner = mass[lo: hi + 1]
    tail = (1.0 - inner.sum()) / 2.0
    observed = np.concatenate([[(draws < central[0]).sum()], np.histogram(draws, central)[0],
                               [(draws >= central[-1]).sum()]])
    expected = DRAWS * np.concatenate([[tail], inner, [tail]])
    assert expected[0] >= 5 and expected[-1] >= 5  # the tails are tested, not dropped
    return float(stats.chisquare(observed, expected * observed.sum() / expected.sum()).pvalue)


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


@pytest.mark.parametrize("gamma", [(0, 7), (3, 7), (7, 7), (5, 2), (29, 4)])
def test_bernoulli_exp_has_probability_exp_minus_gamma(gamma: tuple[int, int]) -> None:
    num, den = gamma
    n = 400_000
    hits = bernoulli_exp(np.full(n, num, np.int64), den, release_rng(5)).mean()
    p = math.exp(-num / den)
    assert abs(hits - p) <= 5 * math.sqrt(p * (1 - p) / n) + 1e-12


@pytest.mark.parametrize(("num", "den", "fused"), [
    (999_999, 10**6, 2), (700_000, 10**6, 2), (49_999, 50_000, 3), (1000, 1000, 5),
    (3, 7, 11), (3 * 2**38, 2**40, 1)])
def test_fused_trials_keep_the_probability_exp_minus_gamma(num: int, den: int,
                                                         fused: int) -> None:
    # one draw decides the first N trials of CKS Algorithm 1 (N = fused); the rest go on one
    # by one: every split gives exp(-num / den)
    assert _fused_trials(den) == fused
    n = 400_000
    hits = bernoulli_exp(np.full(n, num, np.int64), den, release_rng(9)).mean()
    p = math.exp(-num / den)
    assert abs(hits - p) <= 5 * math.sqrt(p * (1 - p) / n)


def test_bernoulli_exp1_counts_factorial_thresholds() -> None:
    n = 1_000_000
    hits = bernoulli_exp1(n, release_rng(10)).mean()
    p = math.exp(-1.0)
    assert abs(hits - p) <= 5 * math.sqrt(p * (1 - p) / n)


def test_big_integer_bernoulli_exp_is_exact_beyond_int64() -> None:
    # exponent (2**70 + 2**69) / 3 * 2**-70 ... = 1/2: only Python integers hold these
    rng = release_rng(6)
    num, den = 2**69, 2**70
    n = 4000
    hits = sum(_bernoulli_exp_big(num, den, rng) for _ in range(n)) / n
    p = math.exp(-0.5)
    assert abs(hits - p) <= 5 * math.sqrt(p * (1 - p) / n)
    assert not any(_bernoulli_exp_big(80 * den, den, rng) for _ in range(50))


def test_gaussian_parameter_rounds_sigma_squared_up_by_a_tiny_amount() -> None:
    for sigma in (0.5, 4.2, 1000.0, 1e6, 1e8):
        p = gaussian_parameter(sigma)
        rel = float(p.sigma2) / sigma**2 - 1.0
        assert 0.0 <= rel < 1e-8, (sigma, rel)
        assert p.den <= 2**56
    with pytest.raises(SpecError, match="coarser grid"):
        gaussian_parameter(2.0**28)


def test_generators_use_os_entropy_unless_seeded() -> None:
    a, b = release_rng().integers(0, 2**62, 4), release_rng().integers(0, 2**62, 4)
    assert not np.array_equal(a, b)
    assert np.array_equal(release_rng(9).integers(0, 2**62, 4),
                          release_rng(9).integers(0, 2**62, 4))
    assert seeded_label(None) is None and seeded_label(0) == SEEDED_LABEL
    assert seed_from_text(None) is None and seed_from_text(" 12 ") == 12
    for bad in ("abc", "-1", "1.5"):
        with pytest.raises(SpecError, match=r"^--seed: expected a non-negative integer"):
            seed_from_text(bad)


def test_grid_exponent_is_checked() -> None:
    assert check_grid_exponent("12") == 12 and check_grid_exponent(0) == 0
    for bad in (-1, "-3", 41, "x", 1.5, True):
        with pytest.raises(SpecError, match=r"^--grid: expected an integer in \[0, 40\]"):
            check_grid_exponent(bad)


def test_rounded_release_moves_no_more_than_the_grid_sensitivity() -> None:
    """Brute force over every column and random data: the bound holds and is not loose by
    more than the rounding itself."""
    rng = np.random.default_rng(0)
    A = rng.normal(size=(12, 9)) * (rng.random((12, 9)) < 0.6)
    g = 2.0**-3
    l1, l2 = np.abs(A).sum(0).max(), np.sqrt((A**2).sum(0)).max()
    support = column_support(Dense(A))
    assert support == int(np.count_nonzero(A, axis=0).max())
    b1, b2 = grid_sensitivity(l1, l2, support, g)
    worst1 = worst2 = 0.0
    for _ in range(300):
        x = rng.integers(0, 50, 9).astype(float)
        base = np.floor(A @ x / g + 0.5) * g
        for j in range(9):
            moved = np.floor(A @ (x + np.eye(9)[j]) / g + 0.5) * g - base
            worst1, worst2 = max(worst1, np.abs(moved).sum()), max(worst2,
                                                                 np.sqrt((moved**2).sum()))
    assert l1 <= b1 and worst1 <= b1 and worst2 <= b2
    assert b1 - l1 == pytest.approx(g * support) and b2 < l2 + g * math.sqrt(support)


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


def test_automatic_grid_is_the_coarsest_within_the_inflation_bound() -> None:
    # a dense Kronecker strategy touching 10**6 answers per record needs a fine grid
    l1, l2, support = 800.0, 1.3, 10**6
    k = auto_grid_exponent(False, l1, l2, support, 4.2)
    d2 = grid_sensitivity(l1, l2, support, 2.0**-k)[1]
    assert d2 <= l2 * (1 + GRID_INFLATION) < grid_sensitivity(l1, l2, support, 2.0**(1 - k))[1]
    assert k == 19  # g = 2**-19: 1600 g + 1e6 g**2 <= 1.69 * 2 * 2**-10
    k1 = auto_grid_exponent(True, l1, l2, support, 1.0)
    assert grid_sensitivity(l1, l2, support, 2.0**-k1)[0] <= l1 * (1 + GRID_INFLATION)
    # capped where the noise scale in grid units would leave int64: then the finest allowed
    assert auto_grid_exponent(False, 1e9, 1e4, 10**12, 1e3) == 2  # 2e7 * 2**2 < 2**27
    noise = exact_noise(Privacy(noise="zcdp", rho=0.5), l1, l2, integral=False, support=support)
    assert noise.grid_exponent == 19 and noise.sensitivity == pytest.approx(d2)


def test_laplace_release_is_pure_eps_at_the_grid_sensitivity() -> None:
    noise = exact_noise(Privacy(noise="laplace", epsilon=0.7), 3.0, 2.0, integral=True,
                        support=3)
    assert noise.sampler == "discrete_laplace" and noise.scale == pytest.approx(3.0 / 0.7)
    assert noise.guarantee["epsilon"] <= 0.7
    assert noise.guarantee["epsilon"] == pytest.approx(0.7, rel=1e-9)


def test_theorem7_curve_is_the_exact_hockey_stick_divergence() -> None:
    """delta from CKS Theorem 7 equals sum_y max(0, P(y) - e^eps Q(y)) summed directly."""
    for sigma, eps, shift in ((1.3, 0.5, 1), (4.2, 1.0, 1), (6.0, 0.8, 3)):
        y = np.arange(-400, 401)
        P = discrete_gaussian_pmf(y, sigma)
        Q = discrete_gaussian_pmf(y - shift, sigma)
        direct = float(np.maximum(P - math.exp(eps) * Q, 0.0).sum())
        assert discrete_gaussian_delta(sigma, eps, shift) == pytest.approx(direct, rel=1e-9)


def test_theorem7_sigma_is_close_to_but_not_below_the_analytic_gaussian() -> None:
    for eps, delta in ((1.0, 1e-6), (0.3, 1e-9), (2.0, 1e-5)):
        discrete = discrete_gaussian_sigma(eps, delta, 1)
        analytic = analytic_gaussian_sigma(eps, delta)
        assert discrete_gaussian_delta(discrete, eps, 1) == pytest.approx(delta, rel=1e-6)
        assert 0.99 * analytic < discrete < 1.02 * analytic
    # the vector route (zCDP then CKS conversion) needs more noise than either
    assert zcdp_gaussian_sigma(1.0, 1e-6, 1.0) == pytest.approx(4.530877, rel=1e-6)


# ----- OpenDP as an oracle ----------------------------------------------------------------
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


@pytest.mark.parametrize(("eps", "D"), [(0.1, 1), (1.0, 3), (2.5, 7)])
def test_laplace_calibration_matches_opendp(opendp, eps: float, D: int) -> None:
    noise = exact_noise(Privacy(noise="laplace", epsilon=eps), D, D, integral=True, support=1)
    space = (opendp.vector_domain(opendp.atom_domain(T=int)), opendp.l1_distance(T=int))
    meas = opendp.m.make_laplace(*space, scale=noise.scale)
    assert meas.map(D) == pytest.approx(eps, rel=1e-9)
    assert noise.guarantee["epsilon"] == pytest.approx(meas.map(D), rel=1e-9)


# ----- the fast path: certified brackets, inversion, refinement ------------------------------
def binomial_ok(hits: int, n: int, p: float) -> bool:
    """Two-sided exact binomial test at level 1e-4 (and not suspiciously perfect)."""
    return stats.binomtest(hits, n, p).pvalue > 1e-4


@pytest.mark.parametrize(("num", "den", "bits"), [
    (1, 1, 60), (0, 5, 40), (7, 3, 120), (2**55 + 3, 2**56, 200), (123_456_789, 1000, 80)])
def test_decimal_bounds_bracket_exp_within_three_units(num: int, den: int, bits: int) -> None:
    lo, hi = _decimal_exp_neg(num, den, bits)
    assert 0 <= hi - lo <= 3
    # against an independent float evaluation where float64 has the digits to check
    value = math.exp(-num / den)
    if value * 2.0**bits > 2.0**10:
        rel = 2.0**-50
        assert lo <= value * 2.0**bits * (1 + rel) and value * 2.0**bits * (1 - rel) <= hi
    else:  # far below one unit: the bracket is [0, 1]
        assert (lo, hi) == (0, 1)
    # multiplicativity: bounds of exp(-x) squared bracket exp(-2x)
    lo2, hi2 = _decimal_exp_neg(2 * num, den, 2 * bits)
    assert lo * lo <= hi2 + 3 * 2**bits and lo2 <= hi * hi + 3 * 2**bits


def test_float_brackets_contain_the_decimal_value_and_are_tight() -> None:
    rng = np.random.default_rng(4)
    for den in (1, 7, 2**20 + 1, 10**12 + 39, 2**56 - 5):
        num = np.concatenate([rng.integers(0, 45 * den, 300, dtype=np.int64),
                              [0, den, 40 * den, 41 * den + 1]])
        num = num[num < 2**62]
        lo, hi = _exp_neg_bounds(num, den)
        for a, b, k in zip(lo, hi, num.tolist(), strict=True):
            d_lo, d_hi = _decimal_exp_neg(k, den, 100)
            assert Fraction(a) <= Fraction(d_hi, 2**100) and Fraction(d_lo, 2**100) <= b
            if k // den <= 40:
                assert (b - a) <= 2.0**-30 * b  # relative width about 2**-34
            else:
                assert a == 0.0 and b <= math.exp(-40) * (1 + 1e-9)


def test_per_draw_brackets_contain_the_decimal_value() -> None:
    rng = np.random.default_rng(5)
    for den in (1, 3, 2**24 + 7, 10**15 + 37, 2**56 - 5):
        num = np.concatenate([rng.integers(0, min(2**62, 45 * den), 300, dtype=np.int64),
                              [0, 1, den, 41 * den - 1, 41 * den, 41 * den + 1]])
        num = num[num < 2**62]
        lo, hi = _exp_neg_fast(num, den)
        for a, b, k in zip(lo, hi, num.tolist(), strict=True):
            d_lo, d_hi = _decimal_exp_neg(k, den, 100)
            assert Fraction(a) <= Fraction(d_hi, 2**100) and Fraction(d_lo, 2**100) <= b
            if k < 40 * den:
                assert (b - a) <= 2.0**-20 * b  # relative width about 2**-22
            if k > 42 * den:
                assert a == 0.0 and b <= math.exp(-40.9)


@pytest.mark.parametrize(("num", "den"), [(0, 3), (1, 3), (5, 2), (29, 4), (2**55, 2**56)])
def test_fast_bernoulli_has_probability_exp_minus_gamma(num: int, den: int) -> None:
    n = 400_000
    hits = int(bernoulli_exp_fast(np.full(n, num, np.int64), den, release_rng(21)).sum())
    p = math.exp(-num / den)
    assert hits == n if num == 0 else binomial_ok(hits, n, p)


class FixedPrefix:
    """A generator stand-in whose vector draws all carry one 53-bit prefix; single draws (the
    refinement's extra bits) come from a real generator."""

    def __init__(self, prefix: int, seed: int) -> None:
        self.prefix, self.real = prefix, release_rng(seed).bit_generator
        self.bit_generator = self
        self.extra = 0

    def random_raw(self, n: int | None = None):
        if n is None:
            self.extra += 1
            return self.real.random_raw()
        return np.full(n, self.prefix << 11, dtype=np.uint64)


def test_undecided_bernoulli_reads_more_bits_with_the_exact_conditional_probability() -> None:
    # U's first 53 bits straddle exp(-gamma): P[accept | prefix] = frac(2**53 exp(-gamma))
    num, den = 5, 7
    lo, _ = _decimal_exp_neg(num, den, 53 + 40)
    conditional = (lo & (2**40 - 1)) / 2**40
    rng = FixedPrefix(lo >> 40, 22)
    n = 4000
    hits = int(bernoulli_exp_fast(np.full(n, num, np.int64), den, rng).sum())
    assert rng.extra >= n  # every draw took the refinement
    assert binomial_ok(hits, n, conditional), (hits, conditional)


@pytest.mark.parametrize("scale", [0.5, 3.0, 5000.0, 2.0**33])
def test_level_refinement_splits_a_straddled_threshold_exactly(scale: float) -> None:
    # a prefix whose interval contains the threshold C q**(M k): level k + 1 with probability
    # frac(2**53 threshold), else level k; the vectorised path sends it to the refinement
    p = _laplace_inversion(*laplace_parameter(scale))
    k = 3
    lo, _ = _threshold_bounds(p, k, 53 + 40)
    prefix = lo >> 40
    conditional = (lo & (2**40 - 1)) / 2**40
    rng = release_rng(23)
    n = 3000
    levels = np.array([_level_refine(prefix, p, rng) for _ in range(n)])
    assert set(levels.tolist()) <= {k, k + 1}
    assert binomial_ok(int((levels == k + 1).sum()), n, conditional)
    vector = _levels(p, np.full(n, prefix, dtype=np.uint64), rng)
    assert set(vector.tolist()) <= {k, k + 1}
    assert binomial_ok(int((vector == k + 1).sum()), n, conditional)


def test_tiny_uniform_walks_to_a_deep_level() -> None:
    # prefix 0: U < 2**-53, far in the tail; the refinement reads bits until it is decided
    p = _laplace_inversion(*laplace_parameter(4.2))
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
    assert _laplace_inversion(*laplace_parameter(scale)).block_bits > 0
    draws = discrete_laplace(scale, DRAWS, release_rng(25))
    p = chi_square_pvalue(draws, lambda v: discrete_laplace_pmf(v, scale), 2 * scale)
    assert 1e-4 < p < 1.0 - 1e-6, p
    a = math.exp(-1.0 / scale)
    assert draws.var() == pytest.approx(2 * a / (1 - a) ** 2, rel=0.01)


@pytest.mark.parametrize("sigma", [3000.0, 40000.0])
def test_discrete_gaussian_with_block_proposals_matches_its_pmf(sigma: float) -> None:
    # t >= 2**11: block proposals, the offset's rejection folded into the acceptance
    assert _laplace_inversion(gaussian_parameter(sigma).t, 1).block_bits > 0
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
        d_lo, d_hi = _decimal_exp_neg(x * x, param.den, 100)
        assert Fraction(lo[y]) <= Fraction(d_hi, 2**100) and Fraction(d_lo, 2**100) <= hi[y]
