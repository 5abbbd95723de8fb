"""The implicit workload Gram with O(n) products, and the randomized principal vectors on it."""

from __future__ import annotations

import numpy as np
import pytest
from eigen_examples import range_marginals

from engine.domain import Domain
from engine.mechanisms import get
from engine.mechanisms.eigen_design.design import dense_gram
from engine.mechanisms.eigen_design.gram import GramOperator
from engine.mechanisms.eigen_design.reductions import principal_vectors_partial
from engine.mechanisms.eigen_design.strategy import LazySensitivity
from engine.privacy import Privacy
from engine.workloads import (
    AllRangeBlock,
    CircularRangeBlock,
    IdentityBlock,
    PermutedBlock,
    PrefixBlock,
    RandomBlock,
    SuffixBlock,
    WidthRangeBlock,
    Workload,
)

CASES = {
    "all range": lambda: Workload.one_dim(AllRangeBlock(37)),
    "prefix": lambda: Workload.one_dim(PrefixBlock(20)),
    "suffix": lambda: Workload.one_dim(SuffixBlock(9)),
    "width": lambda: Workload.one_dim(WidthRangeBlock(25, 4)),
    "circular": lambda: Workload.one_dim(CircularRangeBlock(12, 3)),
    "permuted": lambda: Workload.one_dim(PermutedBlock(AllRangeBlock(30), 3)),
    "identity": lambda: Workload.one_dim(IdentityBlock(6)),
    "random rows": lambda: Workload.one_dim(RandomBlock(10, 7, 0.4, seed=2)),
    "range marginals": lambda: range_marginals(Domain.from_sizes([3, 4, 5]), 2),
    "marginals": lambda: Workload.marginals(Domain.from_sizes([3, 4, 5]), upto=2),
}


@pytest.mark.parametrize("case", list(CASES))
def test_fast_products_equal_the_dense_gram(case, rng) -> None:
    W = CASES[case]()
    op, G = GramOperator(W), dense_gram(W)
    X = rng.standard_normal((G.shape[0], 3))
    np.testing.assert_allclose(op.matvec(X), G @ X, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(op.matvec(X[:, 0]), G @ X[:, 0], rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(op.diagonal(), np.diag(G), rtol=1e-12)
    assert op.trace() == pytest.approx(np.trace(G), rel=1e-12)


def test_partial_principal_vectors_need_no_dense_gram() -> None:
    W = Workload.one_dim(AllRangeBlock(400))
    implicit = principal_vectors_partial(GramOperator(W), 0.1, seed=5)
    explicit = principal_vectors_partial(dense_gram(W), 0.1, seed=5)
    assert implicit.unit_error() == pytest.approx(explicit.unit_error(), rel=1e-9)
    assert isinstance(implicit.sensitivity, LazySensitivity)
    assert implicit.sensitivity[2] == pytest.approx(1.0, rel=1e-12)
    A = implicit.strategy.dense()
    assert implicit.sensitivity[1] == pytest.approx(np.abs(A).sum(axis=0).max(), rel=1e-12)
    with pytest.raises(KeyError):
        implicit.sensitivity[3]


def test_mechanism_partial_route_on_a_large_one_dimensional_domain() -> None:
    """5000 cells > max_dense_cells: principal vectors without any n x n matrix."""
    W = Workload.one_dim(AllRangeBlock(5000))
    plan = get("eigen-design", reduction="principal", fraction=0.02).plan(W, Privacy())
    assert plan.fact("structure") == "partial" and plan.fact("principal") == 100
    from engine.analysis.svd_bound import svd_bound

    bound = svd_bound(W).value
    root_ratio = (plan.sensitivity[2] ** 2 * plan.trace / bound) ** 0.5
    assert 1.0 < root_ratio < 1.35  # 1.316 with only 2 % of the eigenvectors


@pytest.mark.parametrize("n", [1, 2, 257, 1024])
def test_all_range_operator_is_the_closed_form_gram_exactly(n) -> None:
    """``G_ij = (min(i,j) + 1)(n - max(i,j))`` (0-based) for every entry, bit for bit: the
    running sums add integers below 2**53, so the O(n) products are exact."""
    op = GramOperator(Workload.one_dim(AllRangeBlock(n)))
    i = np.arange(n)
    closed = (np.minimum.outer(i, i) + 1.0) * (n - np.maximum.outer(i, i))
    np.testing.assert_array_equal(op.matvec(np.eye(n)), closed)
    # the diagonal goes through column norms (a square root, squared): one rounding
    np.testing.assert_allclose(op.diagonal(), np.diag(closed), rtol=4e-16, atol=0)
    np.testing.assert_array_equal(dense_gram(Workload.one_dim(AllRangeBlock(n))), closed)
