"""Spec aim_grem.md reference cases R1-R8: Decomp/Recon, bijection, Kronecker view, p/v, IID."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from engine.linalg.residuals import (
    decomp,
    privacy_factor,
    recon,
    residual_covariance,
    subsets,
    subtraction_matrix,
    variance_factor,
)
from engine.mechanisms.aim_grem.grem import measure_residual

MU = np.array([[7, 5, 2], [3, 5, 11], [10, 2, 11], [9, 18, 17]], dtype=float)
SHAPE = (4, 3)


def kron_all(factors):
    out = np.ones((1, 1))
    for f in factors:
        out = np.kron(out, f)
    return out


def t_matrix(tau, gamma, shape):
    """T_{tau,gamma} = kron_{k in gamma}(S if k in tau else 1^T)."""
    return kron_all([subtraction_matrix(shape[k]) if k in tau else np.ones((1, shape[k]))
                     for k in gamma])


def test_r1_decomp_worked_example():
    assert decomp(MU, (0, 1), ()) == 100
    assert decomp(MU, (0, 1), (0,)).tolist() == [5, 9, 30]
    assert decomp(MU, (0, 1), (1,)).tolist() == [1, 12]
    assert decomp(MU, (0, 1), (0, 1)).tolist() == [[4, 13], [-6, 6], [11, 13]]
    assert decomp(np.array([14, 19, 23, 44]), (0,), (0,)).tolist() == [5, 9, 30]


def test_r2_recon_components_with_corrected_typo():
    expected = {
        (): np.full((4, 3), 100.0),
        (0,): np.repeat(np.array([[-44], [-24], [-8], [76]], dtype=float), 3, axis=1),
        (1,): np.tile([-13.0, -10.0, 23.0], (4, 1)),
        # the paper prints 32 in row 2; 33 makes rows sum to zero and the components add to mu
        (0, 1): np.array([[41, 14, -55], [-27, -6, 33], [41, -58, 17], [-55, 50, 5]], float),
    }
    total = np.zeros(SHAPE)
    for tau, comp in expected.items():
        got = 12 * recon(decomp(MU, (0, 1), tau), tau, (0, 1), SHAPE)
        np.testing.assert_allclose(got, comp, atol=1e-12)
        total += got / 12
    assert np.abs(total - MU).max() < 1e-13


def test_r3_round_trip():
    rng = np.random.default_rng(3)
    shape = (2, 3, 4)
    mu = rng.integers(0, 50, size=shape).astype(float)
    gamma = (0, 1, 2)
    back = sum(recon(decomp(mu, gamma, tau), tau, gamma, shape) for tau in subsets(gamma))
    np.testing.assert_allclose(back, mu, atol=1e-12)


def test_r4_residual_independent_of_source_marginal():
    rng = np.random.default_rng(4)
    shape = (2, 3, 4)
    mu = rng.integers(0, 50, size=shape).astype(float)
    gamma = (0, 1, 2)
    for sub in subsets(gamma):
        drop = tuple(ax for ax, k in enumerate(gamma) if k not in sub)
        mu_sub = mu.sum(axis=drop) if drop else mu
        for tau in subsets(sub):
            assert np.array_equal(decomp(mu, gamma, tau), decomp(mu_sub, sub, tau))


def test_r5_bi_orthogonality():
    rng = np.random.default_rng(5)
    shape = (2, 3, 4)
    gamma = (0, 1, 2)
    mu = rng.normal(size=shape)
    taus = subsets(gamma)
    for tau in taus:
        z = rng.normal(size=tuple(shape[k] - 1 for k in tau))
        comp = recon(z, tau, gamma, shape)
        for other in taus:
            back = decomp(comp, gamma, other)
            if other == tau:
                np.testing.assert_allclose(back, z, atol=1e-12)
            else:
                assert np.abs(back).max() < 1e-12
    comps = {t: recon(decomp(mu, gamma, t), t, gamma, shape) for t in taus}
    for a, b in itertools.combinations(taus, 2):
        assert abs(np.sum(comps[a] * comps[b])) < 1e-12


@pytest.mark.parametrize("n", [2, 3, 5])
def test_r6_subtraction_matrix_identities(n):
    S = subtraction_matrix(n)
    one = np.ones((n - 1, n - 1))
    np.testing.assert_allclose(np.linalg.pinv(S), np.vstack([np.zeros((1, n - 1)),
                                                              np.eye(n - 1)]) - 1.0 / n,
                               atol=1e-12)
    np.testing.assert_allclose(S @ S.T, np.eye(n - 1) + one, atol=1e-12)
    np.testing.assert_allclose(np.linalg.inv(S @ S.T), np.eye(n - 1) - one / n, atol=1e-12)
    np.testing.assert_allclose(S @ np.ones(n), 0.0, atol=1e-12)


def test_r6_kronecker_equivalence():
    rng = np.random.default_rng(6)
    shape = (2, 3, 4)
    gamma = (0, 1, 2)
    mu = rng.normal(size=shape)
    blocks = []
    for tau in subsets(gamma):
        T = t_matrix(tau, gamma, shape)
        blocks.append(T)
        np.testing.assert_allclose(T @ mu.ravel(), decomp(mu, gamma, tau).ravel(), atol=1e-12)
        z = rng.normal(size=tuple(shape[k] - 1 for k in tau))
        np.testing.assert_allclose(np.linalg.pinv(T) @ z.ravel(),
                                   recon(z, tau, gamma, shape).ravel(), atol=1e-12)
    stacked = np.vstack(blocks)
    assert stacked.shape == (24, 24)
    assert np.linalg.matrix_rank(stacked) == 24


R7 = {(): (1, 1 / 576), (0,): (1 / 2, 1 / 288), (1,): (2 / 3, 1 / 96), (2,): (3 / 4, 1 / 48),
      (0, 1): (1 / 3, 1 / 48), (0, 2): (3 / 8, 1 / 24), (1, 2): (1 / 2, 1 / 8),
      (0, 1, 2): (1 / 4, 1 / 4)}


def test_r7_privacy_and_variance_factors():
    shape = (2, 3, 4)
    gamma = (0, 1, 2)
    for tau, (p, v) in R7.items():
        assert privacy_factor(tau, shape) == pytest.approx(p, rel=1e-12)
        assert variance_factor(tau, gamma, shape) == pytest.approx(v, rel=1e-12)
        # diag(R^T V^-1 R) is constant p_tau with V = T_{tau,tau} T_{tau,tau}^T
        R = kron_all([subtraction_matrix(shape[k]) if k in tau else np.ones((1, shape[k]))
                      for k in range(3)])
        V = residual_covariance(tau, shape)
        np.testing.assert_allclose(V, t_matrix(tau, tau, shape) @ t_matrix(tau, tau, shape).T)
        np.testing.assert_allclose(np.diag(R.T @ np.linalg.inv(V) @ R), p, rtol=1e-12)
        # per-cell variance of Recon(N(0, V_tau), tau, gamma) is v_tau
        P = np.linalg.pinv(t_matrix(tau, gamma, shape))
        np.testing.assert_allclose(np.diag(P @ V @ P.T), v, rtol=1e-10)
    # joint precision diagonal for sigma_tau^2 = 1 + |tau|
    prec = sum(privacy_factor(t, shape) / (1 + len(t)) for t in R7)
    assert prec == pytest.approx(2.423611, abs=5e-7)


def test_r8_iid_strategy_identities():
    shape = (2, 3, 4)
    gamma = (0, 1, 2)
    sigma2 = {t: 7.0 * math.prod(shape[k] for k in gamma if k not in t) for t in R7}
    assert sum(privacy_factor(t, shape) / s for t, s in sigma2.items()) == pytest.approx(1 / 7)
    assert sum(variance_factor(t, gamma, shape) * s for t, s in sigma2.items()) == \
        pytest.approx(7.0)


def test_measure_residual_covariance_matches_v_tau():
    # MeasureResidual with sigma2 = 2 gives covariance 2 V_tau (spec 3.1), checked empirically.
    rng = np.random.default_rng(8)
    shape = (3, 2)
    tau = (0, 1)
    mu = np.zeros(shape)
    draws = np.array([measure_residual(mu, tau, 2.0, rng).ravel() for _ in range(20000)])
    np.testing.assert_allclose(np.cov(draws.T), 2.0 * residual_covariance(tau, shape), rtol=0.08)
