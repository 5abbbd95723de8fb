"""The SVD bound on long 1-D workloads: closed-form singular values of prefix and all-range
(n = 2^11 .. 2^20) against their formulas summed independently, against dense and tridiagonal
eigendecompositions, within the memory budget; and BLT's error bracketed by the bound."""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest
from scipy.linalg import eigvalsh_tridiagonal

from engine.analysis.continual import optimum_bracket
from engine.analysis.cost_model import set_memory_limit
from engine.analysis.svd_bound import svd_bound, svd_bound_factor
from engine.analysis.svd_bound_spectra import (
    SPECTRUM_LIMIT,
    has_closed_form,
    nuclear_norm,
    spectrum_refusal,
)
from engine.domain import Domain
from engine.errors import NotApplicable
from engine.mechanisms.online_blt.fit import fit_blt
from engine.workloads import (
    AllRangeBlock,
    CircularRangeBlock,
    IdentityBlock,
    IdentityTotalBlock,
    MatrixBlock,
    PermutedBlock,
    PrefixBlock,
    SuffixBlock,
    TotalBlock,
    Workload,
)

SIZES = [2**e for e in range(11, 21)]


def prefix_closed_form(n: int) -> float:
    """``(sum_k 1 / (2 sin((2k-1) pi / (4n+2))))**2 / n``, one scalar sine at a time."""
    return math.fsum(0.5 / math.sin((2 * k - 1) * math.pi / (4 * n + 2))
                     for k in range(1, n + 1)) ** 2 / n


def all_range_closed_form(n: int) -> float:
    """All-range Gram ``(n+1) T^-1`` (T = tridiag(-1, 2, -1)): eigenvalues
    ``(n+1) / (4 sin^2(k pi / (2n+2)))``."""
    root = math.sqrt(n + 1)
    return math.fsum(0.5 * root / math.sin(k * math.pi / (2 * n + 2))
                     for k in range(1, n + 1)) ** 2 / n


@pytest.mark.parametrize("n", SIZES)
def test_prefix_and_all_range_bounds_at_every_size(n: int) -> None:
    for block, closed in ((PrefixBlock(n), prefix_closed_form),
                          (AllRangeBlock(n), all_range_closed_form)):
        b = svd_bound(Workload.one_dim(block))
        assert (b.method, b.kind) == ("kronecker", "exact")
        assert b.value == pytest.approx(closed(n), rel=1e-12)


def test_prefix_bound_at_a_million_cells_keeps_half_the_value_a_tolerance_would_drop() -> None:
    n = 2**20
    sigma = 0.5 / np.sin((2 * np.arange(1, n + 1) - 1) * np.pi / (4 * n + 2))
    kept = sigma[sigma ** 2 > 10 * n * np.finfo(float).eps * sigma[0] ** 2].sum()
    exact = svd_bound(Workload.one_dim(PrefixBlock(n))).value
    assert kept ** 2 / n / exact == pytest.approx(0.4867, abs=1e-4)
    assert exact == pytest.approx(27_429_961.155169, rel=1e-12)


@pytest.mark.parametrize("n", [1, 2, 7, 64, 255, 2048])
def test_closed_forms_equal_dense_eigendecompositions(n: int) -> None:
    blocks = [PrefixBlock(n), AllRangeBlock(n)]
    if n < 2048:
        blocks += [SuffixBlock(n), IdentityBlock(n), TotalBlock(n), IdentityTotalBlock(n),
                   PermutedBlock(PrefixBlock(n), seed=3), CircularRangeBlock(n, 1),
                   CircularRangeBlock(n, max(n // 3, 1)), CircularRangeBlock(n, n)]
    for block in blocks:
        assert has_closed_form(block)
        gram = block.gram_array() if n == 2048 else block.dense().T @ block.dense()
        lam = np.linalg.eigvalsh(gram)
        dense = np.sqrt(np.maximum(lam, 0.0)).sum()
        # dense round-off: each of the n eigenvalues carries about eps * lambda_max
        assert nuclear_norm(block) == pytest.approx(dense, rel=1e-10,
                                                    abs=n * math.sqrt(1e-15 * lam.max()))


def test_all_range_gram_is_semiseparable_and_its_spectrum_tridiagonal() -> None:
    # the Gram from the ranges themselves equals (n+1) T^-1 exactly: G T = (n+1) I
    n = 64
    A = AllRangeBlock(n).dense()
    T = 2 * np.eye(n) - np.eye(n, k=1) - np.eye(n, k=-1)
    assert np.array_equal((A.T @ A) @ T, (n + 1) * np.eye(n))
    # so sigma^2 = (n+1) / eig(T): a tridiagonal eigensolver agrees with the closed form (its
    # absolute accuracy, eps * ||T||, leaves 7.6e-9 relative on the sum at n = 16,384)
    n = 4096
    t = eigvalsh_tridiagonal(np.full(n, 2.0), np.full(n - 1, -1.0))
    tridiagonal = np.sqrt((n + 1) / t).sum()
    assert nuclear_norm(AllRangeBlock(n)) == pytest.approx(tridiagonal, rel=1e-10)


@pytest.mark.slow
def test_all_range_at_4096_equals_dense_eigvalsh() -> None:
    n = 4096
    lam = np.linalg.eigvalsh(AllRangeBlock(n).gram_array())
    assert svd_bound_factor(AllRangeBlock(n)) == pytest.approx(
        np.sqrt(lam).sum() ** 2 / n, rel=1e-10)


def test_closed_form_memory_does_not_grow_with_n() -> None:
    n = 2**20 + 1  # a size no other test computes (so not cached)
    svd_bound(Workload.one_dim(PrefixBlock(8)))  # imports warmed
    tracemalloc.start()
    try:
        value = svd_bound(Workload.one_dim(AllRangeBlock(n))).value
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert value == pytest.approx(all_range_closed_form(n), rel=1e-12)
    assert 0 < peak < 4 * 2**20  # one n-vector alone would be 8 MiB


def test_memory_guard_and_size_limits_refuse_in_one_line() -> None:
    block = MatrixBlock(np.tril(np.ones((600, 600))))
    W = Workload.one_dim(block)
    try:
        set_memory_limit("4MiB")
        b = svd_bound(W)
        assert (b.kind, b.value) == ("none", None)
        assert b.reason == ("the explicit eigendecomposition needs 8.24 MiB; the memory limit is "
                            "4 MiB")
        assert spectrum_refusal(block, "attribute 'a1'") == (
            "the spectrum of attribute 'a1' needs 8.24 MiB; the memory limit is 4 MiB")
        # the closed form is summed in chunks: it fits the same budget at a million cells
        big = svd_bound(Workload.one_dim(PrefixBlock(2**20)))
        assert big.value == pytest.approx(27_429_961.155169, rel=1e-12)
    finally:
        set_memory_limit(None)
    assert svd_bound(W).value == pytest.approx(svd_bound_factor(PrefixBlock(600)), rel=1e-10)
    huge = PrefixBlock(SPECTRUM_LIMIT + 1)
    assert spectrum_refusal(huge, "attribute 'x'") == (
        "attribute 'x' has 67,108,865 values; the closed-form spectrum is summed up to "
        "67,108,864 values")
    assert spectrum_refusal(MatrixBlock(np.ones((1, 20000)))) == (
        "an attribute has 20,000 values and its factor has no closed-form spectrum "
        "(eigenvalues are computed up to 16,384 values)")


def test_union_at_a_million_cells_is_a_labelled_certified_floor() -> None:
    n = 2**20
    d = Domain.from_sizes([n], kinds=["numeric"])
    W = Workload(d, Workload.product(d, {"a1": PrefixBlock(n)}).groups
                 + Workload.product(d, {"a1": AllRangeBlock(n)}).groups)
    b = svd_bound(W)
    assert b.kind == "floor" and sorted(b.floor_parts) == [(0,), (1,)]
    assert b.value == pytest.approx(prefix_closed_form(n) + all_range_closed_form(n), rel=1e-12)
    assert b.reason.startswith("a certified floor, not the exact bound: ")


@pytest.mark.parametrize("n,ratio", [(1024, 1.1041), (4096, 1.0906)])
def test_blt_error_bracketed_by_the_bound(n: int, ratio: float) -> None:
    fit = fit_blt(n)
    bracket = optimum_bracket(Workload.one_dim(PrefixBlock(n)), fit.unit_tse)
    assert bracket.bound == pytest.approx(prefix_closed_form(n), rel=1e-12)
    assert bracket.ratio == pytest.approx(ratio, abs=2e-4)
    assert bracket.rmse_ratio == pytest.approx(math.sqrt(ratio), abs=1e-4)
    with pytest.raises(ValueError, match="below the SVD bound"):
        optimum_bracket(Workload.one_dim(PrefixBlock(n)), 0.99 * bracket.bound)
    with pytest.raises(NotApplicable, match="prefix sums"):
        optimum_bracket(Workload.one_dim(AllRangeBlock(n)), fit.unit_tse)
