"""``Matrix.T`` and ``Matrix.pinv()``: exact identities against dense numpy on small cases,
structure kept where it can be, and a clear refusal above the dense guard."""

from __future__ import annotations

import numpy as np
import pytest

from engine.errors import NotApplicable
from engine.linalg.marginals import MarginalsGram, MarginalStrategy
from engine.linalg.matrix import (
    Dense,
    Identity,
    ImplicitGram,
    Kron,
    Matrix,
    Ones,
    Product,
    PsdDense,
    Scaled,
    Sparse,
    Sum,
    Transpose,
    UpperTriangular,
    VStack,
)
from engine.mechanisms.base import least_squares
from engine.mechanisms.hdmm import PIdentity
from engine.workloads import AllRangeBlock, PrefixBlock

RNG = np.random.default_rng(7)


def cases() -> dict[str, Matrix]:
    D = Dense(RNG.random((5, 3)))
    rank_one = Dense(np.outer(RNG.random(4), RNG.random(3)))
    return {
        "dense": D,
        "dense-rank-one": rank_one,
        "sparse": Sparse(RNG.random((4, 6)) * (RNG.random((4, 6)) > 0.5)),
        "identity": Identity(4),
        "ones": Ones(3, 4),
        "total": Ones(1, 5),
        "scaled": Scaled(D, -2.5),
        "scaled-zero": Scaled(D, 0.0),
        "transpose": Transpose(D),
        "kron": Kron([D, Ones(1, 2), Identity(2), Sparse(RNG.random((3, 3)))]),
        "kron-blocks": Kron([PrefixBlock(4), AllRangeBlock(3)]),
        "vstack": VStack([D, Dense(RNG.random((2, 3)))], [1.0, 2.0]),
        "sum": Sum([Dense(RNG.random((3, 3))), Identity(3)], [0.5, 2.0]),
        "product": Product(D, Dense(RNG.random((3, 4)))),
        "upper-triangular": UpperTriangular(np.triu(RNG.random((4, 4))) + np.eye(4)),
        "psd": PsdDense(D.array.T @ D.array),
        "implicit-gram": ImplicitGram(D),
        "marginals": MarginalStrategy(np.array([0.0, 0.5, 0.3, 0.2, 0.1, 0.0, 0.4, 0.6]),
                                      (2, 3, 4)),
        "marginals-gram": MarginalsGram(np.array([0.2, 0.0, 1.0, 0.5]), (3, 4)),
        "p-identity": PIdentity(RNG.random((2, 5))),
    }


CASES = cases()


@pytest.mark.parametrize("name", list(CASES))
def test_transpose_is_the_dense_transpose(name: str) -> None:
    A = CASES[name]
    assert A.T.shape == (A.shape[1], A.shape[0])
    np.testing.assert_array_equal(A.T.dense(), A.dense().T)
    np.testing.assert_array_equal(A.T.T.dense(), A.dense())


@pytest.mark.parametrize("name", list(CASES))
def test_pinv_is_numpys_pseudo_inverse(name: str) -> None:
    A = CASES[name]
    P = A.pinv()
    assert P.shape == (A.shape[1], A.shape[0])
    np.testing.assert_allclose(P.dense(), np.linalg.pinv(A.dense()), rtol=1e-9, atol=1e-10)
    # the pseudo-inverse applies to vectors and batches, and its transpose too
    y = RNG.standard_normal(A.shape[0])
    np.testing.assert_allclose(P.matvec(y), np.linalg.pinv(A.dense()) @ y, rtol=1e-8,
                               atol=1e-10)
    np.testing.assert_allclose(P.T.dense(), np.linalg.pinv(A.dense()).T, rtol=1e-9,
                               atol=1e-10)


def test_structure_is_kept() -> None:
    K = CASES["kron"]
    assert isinstance(K.T, Kron) and isinstance(K.pinv(), Kron)
    assert [f.shape for f in K.pinv().factors] == [(3, 5), (2, 1), (2, 2), (3, 3)]
    assert Identity(6).pinv() is not None and Identity(6).T.is_identity()
    assert isinstance(Identity(6).pinv(), Identity)
    assert isinstance(Ones(2, 3).pinv(), Scaled) and Ones(2, 3).pinv().c == pytest.approx(1 / 6)
    M = CASES["marginals"]
    assert isinstance(M.pinv(), Product)  # G(theta**2)^+ M^T, never a dense n x m matrix
    assert isinstance(M.gram().pinv(), MarginalsGram)
    assert isinstance(CASES["sparse"].T, Sparse)


def test_marginal_pinv_on_a_large_domain_stays_implicit() -> None:
    # 2**21 cells and 2**15 rows: far above the dense guard, yet least squares runs through
    # the structure
    shape = (2**7, 2**7, 2**7)
    theta = np.zeros(8)
    theta[0b011] = theta[0b101] = 1.0
    M = MarginalStrategy(theta, shape)
    x = least_squares(M, np.ones(M.shape[0]))
    assert M.size > 10**10 and x.shape == (2**21,)
    # every cell alike: each 2-way count of 1 spreads over the 2**7 cells it sums
    np.testing.assert_allclose(x[:5], 2.0**-7, rtol=1e-12)


def test_kron_of_the_factor_pinvs_solves_least_squares() -> None:
    A = Kron([Dense(RNG.random((6, 3))), Dense(RNG.random((5, 4)))])
    y = RNG.standard_normal(30)
    np.testing.assert_allclose(least_squares(A, y),
                               np.linalg.lstsq(A.dense(), y, rcond=None)[0], rtol=1e-9)


def test_pinv_above_the_guard_names_the_size() -> None:
    tall = VStack([Identity(8000)] * 7)  # 56,000 x 8,000 = 448,000,000 entries
    with pytest.raises(ValueError, match="56,000 x 8,000 matrix to pseudo-invert"):
        tall.pinv()
    with pytest.raises(NotApplicable, match="least squares: .*56,000 x 8,000"):
        least_squares(tall, np.zeros(56_000))


def test_upper_triangular_refuses_what_it_is_not() -> None:
    with pytest.raises(ValueError, match="upper-triangular"):
        UpperTriangular(np.ones((3, 3)))
    with pytest.raises(ValueError, match="singular"):
        UpperTriangular(np.diag([1.0, 0.0, 2.0]))
    U = CASES["upper-triangular"]
    assert isinstance(U.gram(), ImplicitGram)  # A^T A is formed only when asked for
    np.testing.assert_allclose(U.gram().dense(), U.dense().T @ U.dense(), rtol=1e-12)
    np.testing.assert_allclose(U.gram().pinv().dense(), np.linalg.inv(U.dense().T @ U.dense()),
                               rtol=1e-10)
