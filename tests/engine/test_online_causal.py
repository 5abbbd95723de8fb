"""The causal algebra of continual release (engine/linalg/causal.py and the dyadic tree):
exact identities, closed forms against O(n) or explicit computations, and causality."""

from __future__ import annotations

from fractions import Fraction
from math import comb

import numpy as np
import pytest
import scipy.linalg as sla

from engine.analysis.svd_bound import svd_bound
from engine.linalg.causal import (
    BufferedToeplitz,
    LowerToeplitz,
    blt_inverse,
    blt_last_step_variance,
    blt_prefix_total_variance,
    blt_sensitivity2,
    causal_factor,
    prefix_gram,
    prefix_step_variances,
    prefix_total_variance,
    series_inverse,
    sqrt_coefficients,
)
from engine.mechanisms.online_blt import fit_blt
from engine.mechanisms.online_blt.fit import blt_unit_max, spread_start
from engine.mechanisms.online_sqrt import sqrt_closed_form_tse
from engine.mechanisms.online_tree import DyadicTree
from engine.workloads import PrefixBlock, Workload

RNG_SEED = 7


def test_sqrt_coefficients_are_binomials_and_square_to_the_prefix_matrix() -> None:
    n = 64
    c = sqrt_coefficients(n)
    exact = [comb(2 * k, k) / 4**k for k in range(n)]
    np.testing.assert_allclose(c, exact, rtol=1e-14)
    C = LowerToeplitz(c).dense()
    np.testing.assert_allclose(C @ C, np.tril(np.ones((n, n))), atol=1e-13)


def test_sqrt_closed_form_matches_exact_rational_arithmetic() -> None:
    """Sensitivity**2 times ||C||_F**2 in exact fractions: sum_{k<n} c_k^2 and
    sum_t sum_{k<t} c_k^2 with c_k = binom(2k, k) / 4**k."""
    for n in (1, 2, 10, 60):
        c2 = [Fraction(comb(2 * k, k), 4**k) ** 2 for k in range(n)]
        exact = sum(c2) * sum(sum(c2[:t]) for t in range(1, n + 1))
        assert sqrt_closed_form_tse(n) == pytest.approx(float(exact), rel=1e-13)


def test_series_inverse_and_toeplitz_inverse() -> None:
    rng = np.random.default_rng(RNG_SEED)
    c = np.concatenate(([2.0], rng.uniform(-0.3, 0.3, 999)))
    g = series_inverse(c)
    product = np.convolve(c, g)[:1000]
    expected = np.zeros(1000)
    expected[0] = 1.0
    np.testing.assert_allclose(product, expected, atol=1e-11)
    C = LowerToeplitz(c)
    x = rng.normal(size=1000)
    np.testing.assert_allclose(C.pinv().matvec(C.matvec(x)), x, atol=1e-10)
    np.testing.assert_allclose(C.rmatvec(x), C.dense().T @ x, atol=1e-10)
    np.testing.assert_allclose(C.column_norms(2), np.linalg.norm(C.dense(), axis=0), rtol=1e-12)
    assert C.fro2() == pytest.approx(float((C.dense() ** 2).sum()), rel=1e-12)


def test_prefix_variances_of_a_toeplitz_strategy_equal_the_explicit_ones() -> None:
    n = 40
    c = sqrt_coefficients(n) * np.linspace(1.0, 0.5, n)
    C = sla.toeplitz(c, np.zeros(n))
    B = np.tril(np.ones((n, n))) @ np.linalg.inv(C)
    variances = prefix_step_variances(series_inverse(c))
    np.testing.assert_allclose(variances, (B * B).sum(axis=1), rtol=1e-10)
    assert prefix_total_variance(series_inverse(c)) == pytest.approx(float((B * B).sum()),
                                                                     rel=1e-10)


@pytest.mark.parametrize("n", [1, 7, 1000, 2**16])
def test_blt_closed_forms_match_the_recurrences(n: int) -> None:
    omega = np.array([0.3, 0.12, 0.04, 0.01])
    theta = np.array([0.5, 0.9, 0.99, 0.9995])
    C = BufferedToeplitz(omega, theta, n)
    c = C.coefficients()
    k = np.arange(1, n)
    direct = np.concatenate(([1.0], (omega * theta ** (k[:, None] - 1.0)).sum(axis=1)))
    np.testing.assert_allclose(c, direct, rtol=1e-12)
    assert blt_sensitivity2(omega, theta, n) == pytest.approx(float((c * c).sum()), rel=1e-12)
    inverse = series_inverse(c)
    assert blt_prefix_total_variance(omega, theta, n) == pytest.approx(
        prefix_total_variance(inverse), rel=1e-9)
    np.testing.assert_allclose(C.pinv().coefficients(), inverse, rtol=1e-8, atol=1e-14)


def test_blt_inverse_is_the_matrix_inverse() -> None:
    omega, theta = np.array([0.4, 0.1]), np.array([0.6, 0.95])
    alpha, beta = blt_inverse(omega, theta)
    n = 50
    C = BufferedToeplitz(omega, theta, n).dense()
    Cinv = BufferedToeplitz(alpha, beta, n).dense()
    np.testing.assert_allclose(C @ Cinv, np.eye(n), atol=1e-12)


def test_causal_factor_is_lower_triangular_with_the_gram() -> None:
    n = 30
    X = prefix_gram(n) + np.eye(n)
    C = causal_factor(X)
    np.testing.assert_array_equal(np.triu(C, 1), 0.0)
    np.testing.assert_allclose(C.T @ C, X, rtol=1e-12, atol=1e-10)


def test_dyadic_tree_levels_and_sensitivity() -> None:
    tree = DyadicTree(13)
    assert tree.levels == 4 and tree.counts == [13, 6, 3, 1] and tree.nodes == 23
    np.testing.assert_allclose(tree.level_variances[:3], [1.0, 2 / 3, 4 / 7], rtol=1e-15)
    A = tree.matrix().toarray()
    assert np.sqrt((A * A).sum(axis=0)).max() ** 2 == 4.0


def test_causal_tree_estimate_is_the_blue_from_completed_nodes() -> None:
    """Step t's variance equals w^T (A_t^T A_t)^-1 w over the nodes finished by step t."""
    n = 13
    tree = DyadicTree(n)
    A = tree.matrix().toarray()
    ends = np.array([np.flatnonzero(row).max() + 1 for row in A])
    for t in range(1, n + 1):
        At = A[ends <= t][:, :t]
        w = np.ones(t)
        blue = w @ np.linalg.solve(At.T @ At, w)
        assert tree.step_variances()[t - 1] == pytest.approx(blue, rel=1e-12), t


def test_causal_tree_estimate_is_exact_without_noise_and_causal() -> None:
    n = 21
    tree = DyadicTree(n)
    A = tree.matrix()
    x = np.random.default_rng(RNG_SEED).integers(0, 9, n).astype(float)
    np.testing.assert_allclose(tree.estimate(A @ x), np.cumsum(x), atol=1e-12)
    ends = np.array([np.flatnonzero(row).max() + 1 for row in A.toarray()])
    for node in range(tree.nodes):
        bump = np.zeros(tree.nodes)
        bump[node] = 1.0
        moved = tree.estimate(bump)
        assert np.all(moved[: ends[node] - 1] == 0.0), node  # nothing before it is finished


@pytest.mark.parametrize("n", [1024, pytest.param(2**14, marks=pytest.mark.slow)])
def test_blt_fit_error_is_real_and_between_the_optimum_and_the_square_root(n: int) -> None:
    """The fitted error, checked against the power-series inverse (so the optimiser cannot
    exploit the closed form), beats the square root and is no better than the SVD bound's
    floor (sum of the singular values of W)**2 / n."""
    fit = fit_blt(n)
    c = fit.strategy().coefficients()
    real = float((c * c).sum()) * prefix_total_variance(series_inverse(c))
    assert fit.unit_tse == pytest.approx(real, rel=1e-8)
    assert fit.unit_tse < sqrt_closed_form_tse(n)
    bound = svd_bound(Workload.one_dim(PrefixBlock(n))).value
    assert fit.unit_tse > bound


#: The peer's 5-buffer mean-error BLT optimum (google-deepmind/jax_privacy 2.3.0.dev0 at commit
#: 8967688, ``buffered_toeplitz.optimize_loss`` on the materialised single-participation mean
#: loss, times n), from its run in benchmarks/continual_peers.py (benchmarks/README.md,
#: "continual release beside jax_privacy"); printed to 4 decimals.
PEER_BLT_UNIT_TSE = {1024: 9571.8311, 4096: 50127.5490}


def test_blt_fit_reaches_the_peer_optimum_at_4096() -> None:
    """Our multi-start fit ends where the peer's optimiser does (same parametrisation, same
    objective), two-sided: neither a worse local minimum (it ended 0.031 % above before the
    equal-weight start) nor an error formula that flatters."""
    assert fit_blt(4096).unit_tse == pytest.approx(PEER_BLT_UNIT_TSE[4096], rel=1e-6)


def test_blt_fit_at_1024_is_at_most_the_peer_optimum_and_close_to_it() -> None:
    """At n = 1,024 our fit (9,571.6355, its error confirmed against the power-series inverse
    above) is 2.0e-5 below the peer's 9,571.8311, which our fit also reached before the
    equal-weight start (9,571.8309, with two buffers merged): a local minimum both
    optimisers fell into. Two-sided: no worse than the peer, within 1e-4."""
    unit = fit_blt(1024).unit_tse
    assert PEER_BLT_UNIT_TSE[1024] * (1 - 1e-4) < unit <= PEER_BLT_UNIT_TSE[1024]


#: The peer's 5-buffer max-error BLT optimum at n = 1,024 (same peer and commit,
#: ``optimize_loss`` on ``LossFn.build_closed_form_single_participation``, its loss
#: ``sensitivity**2 * max_t Var(step t)``), from benchmarks/continual_peers.py --max-error.
PEER_BLT_UNIT_MAX_1024 = 10.709812865785876


def test_blt_last_step_closed_form_matches_the_power_series_inverse() -> None:
    omega, theta = spread_start(5, 1000)
    c = BufferedToeplitz(omega, theta, 1000).coefficients()
    last = prefix_step_variances(series_inverse(c))[-1]
    assert blt_last_step_variance(omega, theta, 1000) == pytest.approx(last, rel=1e-10)


def test_blt_max_error_fit_reaches_the_peer_optimum_at_1024() -> None:
    """Fitted for the worst step, our fit ends at the peer's max-error optimum (two-sided), and
    its mean error is above the mean-error fit's (each fit wins on its own objective)."""
    fit = fit_blt(1024, error="max")
    assert blt_unit_max(fit.omega, fit.theta, 1024) == pytest.approx(PEER_BLT_UNIT_MAX_1024,
                                                                      rel=1e-6)
    assert fit.unit_tse > PEER_BLT_UNIT_TSE[1024] * 1.03
