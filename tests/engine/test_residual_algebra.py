"""Residual algebra (spec aim_grem.md section 2): the worked example of 2.8 and its identities."""

from __future__ import annotations

import numpy as np
import pytest

from engine.linalg.residuals import (
    decomp,
    marginal_from_residuals,
    privacy_factor,
    recon,
    residual_covariance,
    residual_shape,
    residual_size,
    smear_into,
    subsets,
    subtraction_matrix,
    subtraction_pinv,
    variance_factor,
)

#: Age (4 levels) x Educ (3 levels), N = 100 (spec 2.8).
MU = np.array([[7, 5, 2], [3, 5, 11], [10, 2, 11], [9, 18, 17]], dtype=float)
SHAPE = (4, 3)
AGE, EDUC, BOTH = (0,), (1,), (0, 1)


def test_worked_example_residuals() -> None:
    assert decomp(MU, BOTH, ()) == 100.0
    np.testing.assert_array_equal(decomp(MU, BOTH, AGE), [5, 9, 30])
    np.testing.assert_array_equal(decomp(MU, BOTH, EDUC), [1, 12])
    np.testing.assert_array_equal(decomp(MU, BOTH, BOTH), [[4, 13], [-6, 6], [11, 13]])
    np.testing.assert_array_equal(decomp(np.array([14, 19, 23, 44]), AGE, AGE), [5, 9, 30])


def test_worked_example_components() -> None:
    comps = {tau: 12 * recon(decomp(MU, BOTH, tau), tau, BOTH, SHAPE) for tau in subsets(BOTH)}
    np.testing.assert_allclose(comps[()], np.full(SHAPE, 100.0))
    np.testing.assert_allclose(comps[AGE], np.repeat([[-44], [-24], [-8], [76]], 3, axis=1))
    np.testing.assert_allclose(comps[EDUC], np.tile([-13, -10, 23], (4, 1)))
    # the paper prints 32 in row 2; 33 is right (rows sum to 0, components add up to mu)
    np.testing.assert_allclose(comps[BOTH], [[41, 14, -55], [-27, -6, 33], [41, -58, 17],
                                             [-55, 50, 5]], atol=1e-12)
    np.testing.assert_allclose(sum(comps.values()) / 12, MU, atol=1e-12)
    residuals = {tau: decomp(MU, BOTH, tau) for tau in subsets(BOTH)}
    np.testing.assert_allclose(marginal_from_residuals(residuals, BOTH, SHAPE), MU, atol=1e-12)


def test_decomp_from_any_superset_and_orthogonality() -> None:
    rng = np.random.default_rng(0)
    shape = (3, 2, 4)
    mu = rng.integers(0, 9, shape).astype(float)
    gamma = (0, 1, 2)
    for tau in subsets(gamma):
        z = decomp(mu, gamma, tau)
        assert z.shape == residual_shape(tau, shape)
        assert z.size == residual_size(tau, shape)
        for sup in subsets(gamma):
            if set(tau) <= set(sup):
                others = tuple(i for i in gamma if i not in sup)
                np.testing.assert_allclose(decomp(mu.sum(axis=others), sup, tau), z)
        comp = recon(z, tau, gamma, shape)
        for other in subsets(gamma):
            back = decomp(comp, gamma, other)
            np.testing.assert_allclose(back, z if other == tau else 0.0, atol=1e-12)
        np.testing.assert_allclose(smear_into(recon(z, tau, tau, shape), tau, gamma, shape),
                                   comp, atol=1e-12)


def test_kronecker_view() -> None:
    S = subtraction_matrix(4)
    np.testing.assert_array_equal(S, [[-1, 1, 0, 0], [-1, 0, 1, 0], [-1, 0, 0, 1]])
    np.testing.assert_allclose(S @ S.T, np.eye(3) + 1.0)
    np.testing.assert_allclose(subtraction_pinv(4), np.linalg.pinv(S), atol=1e-12)
    np.testing.assert_allclose(S.T @ np.linalg.inv(S @ S.T) @ S, np.eye(4) - 0.25)
    np.testing.assert_allclose(residual_covariance((0, 1), SHAPE),
                               np.kron(np.eye(3) + 1.0, np.eye(2) + 1.0))
    # Decomp over both attributes is (S_4 kron S_3) vec(mu)
    R = np.kron(subtraction_matrix(4), subtraction_matrix(3))
    np.testing.assert_allclose(R @ MU.ravel(), decomp(MU, BOTH, BOTH).ravel())


def test_privacy_and_variance_factors() -> None:
    assert privacy_factor((0, 1), SHAPE) == pytest.approx(3 / 4 * 2 / 3)
    assert privacy_factor((), SHAPE) == 1.0
    assert variance_factor((0,), (0, 1), SHAPE) == pytest.approx(3 / 4 / 9)
    # p_tau is the constant diagonal of the residual projector: S^T (S S^T)^-1 S
    S = subtraction_matrix(4)
    np.testing.assert_allclose(np.diag(S.T @ np.linalg.inv(S @ S.T) @ S), 3 / 4)
