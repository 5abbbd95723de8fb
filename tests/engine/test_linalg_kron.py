"""Implicit matrices: Kronecker products, weighted stacks, sums, sparse and the dense guard."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from engine.linalg.matrix import (
    DENSE_GUARD,
    Dense,
    Identity,
    Kron,
    Ones,
    Scaled,
    Sparse,
    Sum,
    Transpose,
    VStack,
    kmatvec,
)
from engine.workloads.blocks import AllRangeBlock, PrefixBlock


def test_kmatvec_r13() -> None:
    rng = np.random.default_rng(13)
    A = [rng.normal(size=s) for s in ((3, 2), (4, 5), (2, 3))]
    full = np.kron(np.kron(A[0], A[1]), A[2])
    x = rng.normal(size=30)
    np.testing.assert_allclose(kmatvec(A, x), full @ x, atol=1e-12)
    X = rng.normal(size=(30, 4))
    np.testing.assert_allclose(kmatvec(A, X), full @ X, atol=1e-12)
    y = rng.normal(size=24)
    np.testing.assert_allclose(kmatvec([np.linalg.pinv(a) for a in A], y),
                               np.linalg.pinv(full) @ y, atol=1e-10)
    K = Kron([Dense(a) for a in A])
    np.testing.assert_allclose(K.matvec(x), full @ x, atol=1e-12)
    np.testing.assert_allclose(K @ x, full @ x, atol=1e-12)
    np.testing.assert_allclose(K.rmatvec(y), full.T @ y, atol=1e-12)
    np.testing.assert_allclose(K.rmatvec(y[:, None] * [1, 2]), full.T @ (y[:, None] * [1, 2]),
                               atol=1e-12)


def test_kron_structure_matches_dense() -> None:
    rng = np.random.default_rng(1)
    factors = [Dense(rng.normal(size=(3, 2))), PrefixBlock(4), Identity(3), Ones(1, 2)]
    K = Kron(factors)
    D = K.dense()
    assert K.shape == D.shape == (3 * 4 * 3 * 1, 2 * 4 * 3 * 2)
    np.testing.assert_allclose(K.gram().dense(), D.T @ D, atol=1e-12)
    for p in (1, 2):
        norms = np.abs(D).sum(0) if p == 1 else np.sqrt((D * D).sum(0))
        np.testing.assert_allclose(K.column_norms(p), norms)
        assert K.sensitivity(p) == pytest.approx(norms.max())
    assert K.fro2() == pytest.approx((D * D).sum())
    square = Kron([PrefixBlock(3), Identity(2)])
    assert square.trace() == pytest.approx(np.trace(square.dense()))
    assert Kron([Ones(1, 3), Ones(1, 2)]).is_total()
    assert Kron([Identity(3), Identity(2)]).is_identity()
    assert not K.is_total() and not K.is_identity()
    assert repr(Kron([Identity(2), Ones(1, 3)])) == "Identity(2) kron Total(3)"


def test_kron_of_huge_domain_stays_implicit() -> None:
    K = Kron([Identity(100)] * 10)
    assert K.shape == (10**20, 10**20)
    assert K.sensitivity(1) == 1.0 and K.fro2() == 1e20
    with pytest.raises(ValueError, match="refusing to materialise a "
                                         "100,000,000,000,000,000,000 x 100,000,000,000,000,"
                                         "000,000 matrix"):
        K.dense()
    with pytest.raises(ValueError, match="refusing to list 100,000,000,000,000,000,000 column "
                                         "norms; use sensitivity"):
        K.column_norms(1)


def test_vstack_weighted_union() -> None:
    rng = np.random.default_rng(2)
    blocks = [Dense(rng.normal(size=(2, 5))), PrefixBlock(5), Ones(1, 5)]
    w = [2.0, 0.5, 3.0]
    S = VStack(blocks, w)
    D = np.vstack([wi * b.dense() for wi, b in zip(w, blocks, strict=True)])
    np.testing.assert_allclose(S.dense(), D)
    assert S.shape == (8, 5)
    x = rng.normal(size=5)
    y = rng.normal(size=8)
    np.testing.assert_allclose(S.matvec(x), D @ x)
    np.testing.assert_allclose(S.rmatvec(y), D.T @ y)
    np.testing.assert_allclose(S.rmatvec(np.c_[y, 2 * y]), D.T @ np.c_[y, 2 * y])
    parts = S.split(S.matvec(x))
    assert [len(p) for p in parts] == [2, 5, 1]
    np.testing.assert_allclose(S.gram().dense(), D.T @ D, atol=1e-12)
    np.testing.assert_allclose(S.column_norms(1), np.abs(D).sum(0))
    np.testing.assert_allclose(S.column_norms(2), np.sqrt((D * D).sum(0)))
    assert S.sensitivity(1) == pytest.approx(np.abs(D).sum(0).max())
    assert S.sensitivity_bound(1) == pytest.approx(sum(wi * b.sensitivity(1) for wi, b
                                                       in zip(w, blocks, strict=True)))
    assert S.sensitivity_bound(2) >= S.sensitivity(2)
    assert S.fro2() == pytest.approx((D * D).sum())
    with pytest.raises(ValueError, match="same number of columns"):
        VStack([Identity(2), Identity(3)])
    with pytest.raises(ValueError, match="one weight per block"):
        VStack([Identity(2)], [1.0, 2.0])


def test_sum_scaled_transpose_ones() -> None:
    G = Sum([PrefixBlock(4).gram(), Identity(4)], [2.0, 3.0])
    expected = 2 * PrefixBlock(4).gram_array() + 3 * np.eye(4)
    np.testing.assert_allclose(G.dense(), expected)
    assert G.trace() == pytest.approx(np.trace(expected))
    x = np.arange(4.0)
    np.testing.assert_allclose(G.matvec(x), expected @ x)
    s = Scaled(PrefixBlock(3), -2.0)
    np.testing.assert_allclose(s.dense(), -2 * np.tril(np.ones((3, 3))))
    np.testing.assert_allclose(s.gram().dense(), 4 * PrefixBlock(3).gram_array())
    assert s.fro2() == 24.0 and s.sensitivity(1) == 6.0
    t = Transpose(Dense(np.arange(6.0).reshape(2, 3)))
    assert t.shape == (3, 2)
    np.testing.assert_allclose(t.dense(), np.arange(6.0).reshape(2, 3).T)
    o = Ones(3, 4)
    np.testing.assert_allclose(o.gram().dense(), 3 * np.ones((4, 4)))
    assert o.column_norms(2)[0] == pytest.approx(np.sqrt(3)) and not o.is_total()
    np.testing.assert_allclose(o.rmatvec(np.ones(3)), 3 * np.ones(4))


def test_sparse_matrix() -> None:
    rng = np.random.default_rng(3)
    D = (rng.random((7, 5)) < 0.4) * rng.normal(size=(7, 5))
    S = Sparse(sp.csr_matrix(D))
    assert S.shape == (7, 5)
    x, X, y = rng.normal(size=5), rng.normal(size=(5, 2)), rng.normal(size=7)
    np.testing.assert_allclose(S.matvec(x), D @ x)
    np.testing.assert_allclose(S.matvec(X), D @ X)
    np.testing.assert_allclose(S.rmatvec(y), D.T @ y)
    np.testing.assert_allclose(S.dense(), D)
    np.testing.assert_allclose(S.gram().dense(), D.T @ D, atol=1e-12)
    np.testing.assert_allclose(S.column_norms(1), np.abs(D).sum(0))
    np.testing.assert_allclose(S.column_norms(2), np.sqrt((D * D).sum(0)))
    assert S.fro2() == pytest.approx((D * D).sum())
    assert Sparse(np.eye(3)).is_identity() and Sparse(np.ones((1, 3))).is_total()
    assert not S.is_identity() and not S.is_total()


def test_dense_guard_everywhere() -> None:
    big = AllRangeBlock(20_000)  # 200M rows
    with pytest.raises(ValueError, match=f"> guard {DENSE_GUARD:,}"):
        Kron([big]).dense()
    with pytest.raises(ValueError, match=f"> guard {DENSE_GUARD:,}"):
        VStack([big, big]).dense()
    with pytest.raises(ValueError, match="refusing to form a 10,000 x 10,000 Gram matrix "
                                         "explicitly"):
        Sparse(sp.identity(10_000)).gram()
    with pytest.raises(ValueError, match="needs at least one factor"):
        Kron([])
