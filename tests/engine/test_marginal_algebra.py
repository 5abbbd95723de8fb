"""The marginal algebra of HDMM section 7 (spec hdmm.md 4.4-4.5, reference case R10)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from engine.domain import Domain
from engine.linalg.marginals import (
    MarginalsGram,
    MarginalStrategy,
    axes_of,
    cells,
    characteristic,
    eigenvalues,
    factor_pair,
    from_eigenvalues,
    is_marginal_like,
    key_of,
    marginal_svd_bound,
    marginal_trace,
    marginal_weights,
    multiplicities,
    pinv_weights,
    xmatrix,
)
from engine.workloads import Workload

NS = (2, 3, 4)


def kron_all(mats) -> np.ndarray:
    out = np.ones((1, 1))
    for m in mats:
        out = np.kron(out, m)
    return out


def bits(a: int, d: int) -> list[int]:
    return [(a >> (d - 1 - i)) & 1 for i in range(d)]


def H(a: int, ns=NS) -> np.ndarray:
    return kron_all([np.eye(n) if b else np.ones((n, n)) for n, b in zip(ns, bits(a, len(ns)),
                                                                       strict=True)])


def G(v, ns=NS) -> np.ndarray:
    return sum(v[a] * H(a, ns) for a in range(2 ** len(ns)))


def Q(a: int, ns=NS) -> np.ndarray:
    return kron_all([np.eye(n) if b else np.ones((1, n)) for n, b in zip(ns, bits(a, len(ns)),
                                                                       strict=True)])


def test_keys_put_attribute_one_first() -> None:
    assert key_of((0, 2), 3) == 0b101  # I x T x I (paper Example 14)
    assert axes_of(0b101, 3) == (0, 2)
    assert axes_of(key_of((1,), 4), 4) == (1,)


def test_small_constants() -> None:
    np.testing.assert_array_equal(characteristic((2, 3)), [6, 2, 3, 1])
    X = xmatrix(np.ones(4), (2, 3)).toarray()
    np.testing.assert_array_equal(X, [[12, 3, 4, 1], [0, 3, 0, 1], [0, 0, 4, 1], [0, 0, 0, 1]])
    Y = np.array([eigenvalues(np.eye(4)[b], (2, 3)) for b in range(4)]).T
    np.testing.assert_array_equal(Y, [[6, 2, 3, 1], [0, 2, 0, 1], [0, 0, 3, 1], [0, 0, 0, 1]])
    np.testing.assert_array_equal(multiplicities(NS), [1, 3, 2, 6, 1, 3, 2, 6])
    assert multiplicities(NS).sum() == 24
    np.testing.assert_array_equal(cells(NS), [1, 4, 3, 12, 2, 8, 6, 24])


def test_product_rule_and_x_matrix() -> None:
    c = characteristic(NS)
    np.testing.assert_allclose(H(5) @ H(3), c[7] * H(1))
    rng = np.random.default_rng(10)
    u, v = rng.random(8), rng.random(8)
    X = xmatrix(u, NS).toarray()
    np.testing.assert_allclose(G(u) @ G(v), G(X @ v), atol=1e-10)
    np.testing.assert_array_equal(X, np.triu(X))
    np.testing.assert_allclose(X @ v, xmatrix(v, NS).toarray() @ u)  # Grams commute


def test_inverse_and_pseudo_inverse() -> None:
    rng = np.random.default_rng(11)
    u = rng.random(8)
    X = xmatrix(u, NS).toarray()
    z = np.zeros(8)
    z[-1] = 1.0
    np.testing.assert_allclose(np.linalg.inv(G(u)), G(np.linalg.solve(X, z)), atol=1e-10)
    for support in ([1, 2, 4], [3, 5], [0, 6], [7]):
        v = np.zeros(8)
        v[support] = rng.random(len(support)) + 0.1
        np.testing.assert_allclose(G(pinv_weights(v, NS)), np.linalg.pinv(G(v)), atol=1e-10)


def test_eigenstructure() -> None:
    rng = np.random.default_rng(12)
    v = rng.random(8)
    kappa = eigenvalues(v, NS)
    lam = np.linalg.eigvalsh(G(v))
    expected = np.sort(np.repeat(kappa, multiplicities(NS).astype(int)))
    np.testing.assert_allclose(lam, expected, rtol=1e-10)
    np.testing.assert_allclose(from_eigenvalues(kappa, NS), v)
    g = MarginalsGram(v, NS)
    x = rng.normal(size=24)
    np.testing.assert_allclose(g.matvec(x), G(v) @ x)
    np.testing.assert_allclose(g.matvec(np.c_[x, -x]), G(v) @ np.c_[x, -x])
    assert g.trace() == pytest.approx(np.trace(G(v)))
    np.testing.assert_allclose(g.eigenvalues(), kappa)


def test_marginal_strategy() -> None:
    rng = np.random.default_rng(13)
    theta = rng.random(8)
    theta[[2, 6]] = 0.0
    M = MarginalStrategy(theta, NS)
    D = np.vstack([theta[a] * Q(a) for a in range(8) if theta[a] != 0])
    np.testing.assert_allclose(M.dense(), D)
    np.testing.assert_allclose(M.gram().dense(), D.T @ D, atol=1e-12)
    np.testing.assert_allclose(D.T @ D, G(theta**2), atol=1e-12)
    assert M.sensitivity(1) == pytest.approx(np.abs(D).sum(0).max()) == pytest.approx(
        theta.sum())
    assert M.sensitivity(2) == pytest.approx(np.linalg.norm(theta))
    assert M.fro2() == pytest.approx((D * D).sum())
    x = rng.integers(0, 5, 24).astype(float)
    y = rng.normal(size=D.shape[0])
    np.testing.assert_allclose(M.matvec(x), D @ x)
    np.testing.assert_allclose(M.rmatvec(y), D.T @ y)
    np.testing.assert_allclose(M.pinv_apply(y), np.linalg.pinv(D) @ y, atol=1e-10)
    t = x.reshape(NS)

    def marginal(axes):
        return t.sum(axis=tuple(i for i in range(3) if i not in axes))

    np.testing.assert_allclose(M.measure_marginals(marginal), D @ x)


def test_thm10_trace_identity() -> None:
    rng = np.random.default_rng(14)
    products = []
    for _ in range(3):
        grams = []
        for n in NS:
            B = rng.normal(size=(n + 1, n))
            grams.append(B.T @ B)
        products.append((rng.random() + 0.5, tuple(grams)))
    WtW = sum(w**2 * kron_all(g) for w, g in products)
    w = marginal_weights(products)
    for _ in range(3):
        u = rng.random(8)
        assert np.trace(G(u) @ WtW) == pytest.approx(np.trace(G(u) @ G(w)), rel=1e-10)
    assert factor_pair(np.array([[5.0]])) == (0.0, 5.0)  # n = 1 has no off-diagonal part
    assert is_marginal_like(3 * np.eye(4) + 2.0)
    assert not is_marginal_like(np.diag([1.0, 2.0, 3.0]))


def test_thm11_error_and_support() -> None:
    rng = np.random.default_rng(15)
    theta = rng.random(8)
    w = np.zeros(8)
    w[[3, 5, 6]] = rng.random(3) + 0.2  # a weighted set of 2-way marginals
    brute = np.trace(np.linalg.pinv(G(theta**2)) @ G(w))
    assert marginal_trace(theta**2, w, NS) == pytest.approx(brute, rel=1e-10)
    only_total = np.zeros(8)
    only_total[0] = 1.0
    assert marginal_trace(only_total, w, NS) == math.inf


def test_corrected_thm12() -> None:
    w = np.zeros(8)
    w[[1, 2, 4, 3, 5, 6]] = 1.0  # all 1-way and 2-way marginals on (2, 3, 4)
    lam = np.clip(np.linalg.eigvalsh(G(w)), 0, None)
    assert np.sqrt(lam).sum() ** 2 / 24 == pytest.approx(85.842331, abs=1e-6)
    assert marginal_svd_bound(w, NS) == pytest.approx(85.842331, abs=1e-6)
    # the multiplicity printed in the paper (rows, not rank) overestimates it
    kappa = eigenvalues(w, NS)
    assert (cells(NS) * np.sqrt(kappa)).sum() ** 2 / 24 == pytest.approx(279.840936, abs=1e-6)


def test_example_15_fixed_weights_catch_bit_order_bugs() -> None:
    """R8: unit "Expected TSE" of fixed marginal strategies on all 2-way marginals."""
    d = Domain.from_sizes([2, 5, 50, 100])
    W = Workload.marginals(d, k=2)
    w = marginal_weights(W.factor_grams())

    def expected_tse(ttii: float, iiti: float, iiit: float) -> float:
        theta = np.zeros(16)
        theta[[0b0011, 0b1101, 0b1110]] = [ttii, iiti, iiit]
        return theta.sum() ** 2 * marginal_trace(theta**2, w, d.shape)

    assert expected_tse(0.44, 0.308, 0.252) == pytest.approx(62_886.15, abs=0.01)
    assert expected_tse(0.44, 0.31, 0.25) == pytest.approx(62_891.53, abs=0.01)
    assert expected_tse(0.44, 0.25, 0.31) == pytest.approx(66_432.33, abs=0.01)
