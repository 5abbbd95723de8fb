"""Known eigenbases of strategy Grams: detection, and error equal to the generic pseudo-inverse."""

from __future__ import annotations

import numpy as np
import pytest

from engine.analysis.expected_error import FactorInverse, trace_term
from engine.linalg.matrix import Dense, Identity, Kron, Sparse
from engine.linalg.pinv import psd_pinv
from engine.linalg.spectral import gram_spectrum, haar_rows
from engine.linalg.trees import haar_matrix, hb_branching, hierarchy_matrix
from engine.workloads import (
    AllRangeBlock,
    CircularRangeBlock,
    IdentityBlock,
    PermutedBlock,
    PrefixBlock,
    RandomBlock,
    SuffixBlock,
    TotalBlock,
    WidthRangeBlock,
    Workload,
)


def generic_trace(A: np.ndarray, V: np.ndarray) -> float:
    return float((psd_pinv(A.T @ A) * V).sum())


def test_haar_rows_are_orthogonal() -> None:
    H = haar_rows(16).toarray()
    HHt = H @ H.T
    np.testing.assert_array_equal(HHt, np.diag(np.diag(HHt)))
    assert set(np.unique(H)) == {-1.0, 0.0, 1.0}
    with pytest.raises(ValueError, match="power of two"):
        haar_rows(12)


@pytest.mark.parametrize("n", [2, 16, 64])
@pytest.mark.parametrize("which", ["identity", "h2", "wavelet", "dyadic16"])
def test_detected_spectrum_is_exact(n: int, which: str) -> None:
    A = {"identity": lambda: Identity(n), "h2": lambda: Sparse(hierarchy_matrix(n, 2)),
         "wavelet": lambda: Sparse(haar_matrix(n)),
         "dyadic16": lambda: Sparse(hierarchy_matrix(n, 16)[1:])}[which]()
    spec = gram_spectrum(A)
    assert spec is not None
    D = A.dense()
    G = D.T @ D
    U = np.eye(n) if spec.basis is None else spec.basis.toarray()
    np.testing.assert_allclose(U.T @ U, np.eye(n), atol=1e-12)
    np.testing.assert_allclose(U @ np.diag(spec.eigenvalues) @ U.T, G, atol=1e-10)
    np.testing.assert_allclose(spec.pinv(), np.linalg.pinv(G), atol=1e-10)


def test_hb_at_4096_is_dyadic() -> None:
    # b* = 16 at n = 4096 = 16**3: every interval is dyadic, so the Haar basis diagonalises
    assert hb_branching(4096) == 16
    assert gram_spectrum(Sparse(hierarchy_matrix(256, 16)[1:])).basis is not None


def test_no_spectrum_for_unstructured_strategies() -> None:
    assert gram_spectrum(Sparse(hierarchy_matrix(100, 2))) is None  # n not a power of two
    assert gram_spectrum(Sparse(hierarchy_matrix(27, 3))) is None  # ternary: not dyadic
    rng = np.random.default_rng(0)
    assert gram_spectrum(Dense(rng.random((20, 16)))) is None
    diag = gram_spectrum(Dense(np.diag([1.0, 2.0, 0.0, 3.0])))
    assert diag is not None and diag.basis is None
    np.testing.assert_allclose(diag.eigenvalues, [1, 4, 0, 9])


def blocks(n: int) -> list:
    return [IdentityBlock(n), TotalBlock(n), PrefixBlock(n), SuffixBlock(n), AllRangeBlock(n),
            WidthRangeBlock(n, 5), CircularRangeBlock(n), CircularRangeBlock(n, 3),
            PermutedBlock(AllRangeBlock(n), 0), RandomBlock(n, 7, 0.3, 2)]


@pytest.mark.parametrize("strategy", ["identity", "h2", "wavelet", "hb", "diag"])
def test_factor_trace_equals_generic_pinv(strategy: str) -> None:
    n = 32
    A = {"identity": Identity(n), "h2": Sparse(hierarchy_matrix(n, 2)),
         "wavelet": Sparse(haar_matrix(n)), "hb": Sparse(hierarchy_matrix(n, 4)[1:]),
         "diag": Dense(np.diag(np.arange(1.0, n + 1)))}[strategy]
    solver = FactorInverse(A)
    assert solver.spectrum is not None
    D = A.dense()
    for block in blocks(n):
        V = block.dense().T @ block.dense()
        assert solver.trace(block) == pytest.approx(generic_trace(D, V), rel=1e-10), block
    assert solver.trace(None) == pytest.approx(generic_trace(D, np.ones((n, n))), rel=1e-10)
    np.testing.assert_allclose(solver.pinv(), np.linalg.pinv(D.T @ D), atol=1e-10)


def test_spectral_support_check() -> None:
    # a diagonal strategy that skips cell 2 supports identity-on-other-cells only
    A = Dense(np.diag([1.0, 1.0, 0.0, 1.0]))
    solver = FactorInverse(A)
    assert solver.spectrum is not None and not solver.full_rank()
    assert solver.trace(PrefixBlock(4)) == np.inf
    assert solver.trace(None) == np.inf
    keep = Dense(np.array([[1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]]))
    assert solver.trace(keep) == pytest.approx(3.0)


@pytest.mark.parametrize("n", [64, 128])
def test_kron_error_fast_path_equals_explicit(n: int) -> None:
    for block in (AllRangeBlock(n), PrefixBlock(n), PermutedBlock(AllRangeBlock(n), 0)):
        W = Workload.one_dim(block)
        for A in (Sparse(hierarchy_matrix(n, 2)), Sparse(haar_matrix(n))):
            fast = trace_term(W, Kron([A]))
            slow = trace_term(W, Dense(A.dense()))  # not a Kron: the explicit path
            assert fast == pytest.approx(slow, rel=1e-10)


def test_two_attribute_kron_fast_path() -> None:
    from engine.domain import Domain

    d = Domain.from_sizes([8, 4], kinds=["numeric", "numeric"])
    W = Workload.product(d, {"a1": AllRangeBlock(8), "a2": PrefixBlock(4)})
    A = Kron([Sparse(haar_matrix(8)), Sparse(hierarchy_matrix(4, 2))])
    assert trace_term(W, A) == pytest.approx(trace_term(W, Dense(A.dense())), rel=1e-10)
