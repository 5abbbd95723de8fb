"""1-D blocks: closed-form Grams, norms, eigenvalues and quadratic forms against dense algebra."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.errors import SpecError
from engine.linalg.matrix import DENSE_GUARD
from engine.workloads.blocks import (
    BLOCKS,
    AllRangeBlock,
    Block,
    CircularRangeBlock,
    IdentityBlock,
    IdentityTotalBlock,
    MatrixBlock,
    PermutedBlock,
    PrefixBlock,
    RandomBlock,
    SuffixBlock,
    TotalBlock,
    WidthRangeBlock,
)


def explicit(block) -> np.ndarray:
    """The block's rows built from its definition (not from the block's own code)."""
    n = block.shape[1]
    j = np.arange(n)
    if isinstance(block, IdentityBlock):
        return np.eye(n)
    if isinstance(block, TotalBlock):
        return np.ones((1, n))
    if isinstance(block, IdentityTotalBlock):
        return np.vstack([np.eye(n), np.ones((1, n))])
    if isinstance(block, PrefixBlock):
        return (j[None, :] <= j[:, None]).astype(float)
    if isinstance(block, SuffixBlock):
        return (j[None, :] >= j[:, None]).astype(float)
    if isinstance(block, AllRangeBlock):
        rows = [(j >= a) & (j <= b) for a in range(n) for b in range(a, n)]
        return np.array(rows, dtype=float)
    if isinstance(block, WidthRangeBlock):
        k = block.width
        return np.array([(j >= a) & (j < a + k) for a in range(n - k + 1)], dtype=float)
    if isinstance(block, CircularRangeBlock):
        widths = [block.width] if block.width is not None else list(range(1, n))
        rows = [np.isin(j, (a + np.arange(k)) % n) for k in widths for a in range(n)]
        if block.width is None:
            rows.append(np.ones(n, dtype=bool))
        return np.array(rows, dtype=float)
    if isinstance(block, PermutedBlock):
        perm = np.random.RandomState(block.seed).permutation(n)
        return explicit(block.base)[:, perm]
    return block.dense()


def blocks_for(n: int, seed: int) -> list:
    out = [IdentityBlock(n), TotalBlock(n), PrefixBlock(n), SuffixBlock(n), AllRangeBlock(n),
           CircularRangeBlock(n), PermutedBlock(AllRangeBlock(n), seed),
           PermutedBlock(PrefixBlock(n), seed + 1), RandomBlock(n, 5, 0.4, seed),
           IdentityTotalBlock(n)]
    out += [WidthRangeBlock(n, w) for w in sorted({1, max(1, n // 3), n})]
    out += [CircularRangeBlock(n, w) for w in sorted({1, max(1, n // 2), n})]
    return out


def test_gram_closed_forms_r2() -> None:
    np.testing.assert_array_equal(PrefixBlock(4).gram_array(),
                                  [[4, 3, 2, 1], [3, 3, 2, 1], [2, 2, 2, 1], [1, 1, 1, 1]])
    np.testing.assert_array_equal(AllRangeBlock(4).gram_array(),
                                  [[4, 3, 2, 1], [3, 6, 4, 2], [2, 4, 6, 3], [1, 2, 3, 4]])
    assert AllRangeBlock(4).fro2() == 20
    assert AllRangeBlock(64).fro2() == 45_760
    assert AllRangeBlock(4096).shape == (8_390_656, 4096)


def test_prefix_singular_values() -> None:
    sv = np.sqrt(PrefixBlock(4).gram_eigenvalues())[::-1]
    np.testing.assert_allclose(sv, [2.879385, 1.0, 0.652704, 0.532089], atol=5e-7)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 24), seed=st.integers(0, 1000))
def test_block_algebra_matches_dense(n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    X = rng.normal(size=(n, 3))
    for block in blocks_for(n, seed):
        D = explicit(block)
        name = repr(block)
        assert block.shape == D.shape, name
        np.testing.assert_array_equal(block.dense(), D, err_msg=name)
        G = D.T @ D
        np.testing.assert_allclose(block.gram_array(), G, atol=1e-12, err_msg=name)
        np.testing.assert_allclose(block.gram().dense(), G, atol=1e-12, err_msg=name)
        np.testing.assert_allclose(block.column_norms(1), np.abs(D).sum(0), err_msg=name)
        np.testing.assert_allclose(block.column_norms(2), np.sqrt((D * D).sum(0)),
                                   err_msg=name)
        assert block.fro2() == pytest.approx(float((D * D).sum()), rel=1e-12), name
        assert block.sensitivity(1) == pytest.approx(np.abs(D).sum(0).max()), name
        np.testing.assert_allclose(block.matvec(x), D @ x, atol=1e-10, err_msg=name)
        np.testing.assert_allclose(block.matvec(X), D @ X, atol=1e-10, err_msg=name)
        y = rng.normal(size=D.shape[0])
        Y = rng.normal(size=(D.shape[0], 2))
        np.testing.assert_allclose(block.rmatvec(y), D.T @ y, atol=1e-10, err_msg=name)
        np.testing.assert_allclose(block.rmatvec(Y), D.T @ Y, atol=1e-10, err_msg=name)
        scale = max(1.0, float(np.abs(G).max()))
        np.testing.assert_allclose(np.sort(block.gram_eigenvalues()), np.linalg.eigvalsh(G),
                                   atol=1e-9 * scale * n, err_msg=name)
        np.testing.assert_allclose(block.gram_quadratic(X), ((D @ X) ** 2).sum(0),
                                   rtol=1e-10, atol=1e-9 * scale, err_msg=name)
        assert block.gram_quadratic(x) == pytest.approx(float(((D @ x) ** 2).sum()),
                                                        rel=1e-10, abs=1e-9 * scale), name


@pytest.mark.parametrize("n,width", [(40, 3), (50, 5), (33, 8), (64, 32)])
def test_width_range_banded_eigenvalues(n: int, width: int) -> None:
    block = WidthRangeBlock(n, width)
    G = explicit(block).T @ explicit(block)
    np.testing.assert_allclose(np.sort(block.gram_eigenvalues()), np.linalg.eigvalsh(G),
                               atol=1e-9 * n * width)


@pytest.mark.parametrize("n", [100, 201])
def test_closed_form_eigenvalues_at_larger_n(n: int) -> None:
    for block in (AllRangeBlock(n), PrefixBlock(n), SuffixBlock(n), CircularRangeBlock(n, 7),
                  PermutedBlock(AllRangeBlock(n), 3)):
        G = block.gram_array()
        np.testing.assert_allclose(np.sort(block.gram_eigenvalues()), np.linalg.eigvalsh(G),
                                   rtol=1e-9, atol=1e-9 * np.abs(G).max(), err_msg=repr(block))


def test_all_range_gram_is_scaled_inverse_second_difference() -> None:
    n = 9
    T = 2 * np.eye(n) - np.eye(n, k=1) - np.eye(n, k=-1)
    np.testing.assert_allclose(AllRangeBlock(n).gram_array(), (n + 1) * np.linalg.inv(T),
                               atol=1e-12)


def test_all_range_quadratic_needs_no_answers() -> None:
    # 8.4M ranges on 4096 cells: the closed form works on the 4097 prefix sums only
    x = np.zeros(4096)
    x[[5, 100]] = 1.0
    both = 6 * 3996  # ranges [a, b] with a <= 5 and b >= 100 count 2
    one = 6 * 95 + 95 * 3996  # ranges that contain exactly one of the two cells
    assert AllRangeBlock(4096).gram_quadratic(x) == pytest.approx(4 * both + one, rel=1e-13)


def test_block_specs() -> None:
    assert IdentityBlock(3).spec() == "identity"
    assert TotalBlock(3).spec() == "total"
    assert PrefixBlock(3).spec() == "prefix"
    assert SuffixBlock(3).spec() == "suffix"
    assert AllRangeBlock(3).spec() == "all_range"
    assert WidthRangeBlock(5, 2).spec() == {"block": "range", "width": 2}
    assert CircularRangeBlock(5).spec() == "circular_range"
    assert CircularRangeBlock(5, 2).spec() == {"block": "circular_range", "width": 2}
    assert PermutedBlock(AllRangeBlock(5), 3).spec() == {"block": "permuted",
                                                        "of": "all_range", "seed": 3}
    assert RandomBlock(5, 4, 0.3, 11).spec() == {"block": "random", "count": 4, "p": 0.3,
                                                  "seed": 11}
    assert MatrixBlock([[1, 0], [1, 1]]).spec() == {"block": "matrix",
                                                    "rows": [[1.0, 0.0], [1.0, 1.0]]}
    assert IdentityTotalBlock(3).spec() == "identity_total"


def test_every_block_is_registered_and_reads_back_its_spec() -> None:
    n = 7
    built = blocks_for(n, 3) + [MatrixBlock(np.eye(n)[:3])]
    assert {type(b) for b in built} == set(BLOCKS.values())
    for name, block_class in BLOCKS.items():
        assert block_class.name == name and block_class.help, name
    for block in built:
        again = Block.from_spec(block.spec(), n, "x")
        assert type(again) is type(block) and again.spec() == block.spec()
        np.testing.assert_array_equal(again.dense(), block.dense())


def test_block_from_spec_names_the_field() -> None:
    with pytest.raises(SpecError, match=r"^a\.b: unknown block 'prefx' \(did you mean "
                                        r"'prefix'\?\); allowed: identity, total, prefix"):
        Block.from_spec("prefx", 4, "a.b")
    with pytest.raises(SpecError, match=r"^a\.of\.width: must be 1\.\.4, got 5$"):
        Block.from_spec({"block": "permuted", "of": {"block": "range", "width": 5}}, 4, "a")


def test_permuted_uses_the_hdmm_permutation() -> None:
    block = PermutedBlock(AllRangeBlock(64), 0)
    np.testing.assert_array_equal(block.perm, np.random.RandomState(0).permutation(64))
    V = AllRangeBlock(64).gram_array()
    idx = np.random.RandomState(0).permutation(64)
    np.testing.assert_array_equal(block.gram_array(), V[idx][:, idx])


def test_random_block_has_no_empty_query() -> None:
    rows = RandomBlock(6, 200, 0.05, 1).dense()
    assert rows.shape == (200, 6)
    assert rows.sum(axis=1).min() >= 1
    np.testing.assert_array_equal(rows, RandomBlock(6, 200, 0.05, 1).dense())


def test_invalid_widths() -> None:
    with pytest.raises(ValueError, match="width must lie in 1..5, got 6"):
        WidthRangeBlock(5, 6)
    with pytest.raises(ValueError, match="width must lie in 1..5, got 0"):
        CircularRangeBlock(5, 0)


def test_dense_guard_message() -> None:
    block = AllRangeBlock(20_000)
    with pytest.raises(ValueError) as info:
        block.dense()
    assert str(info.value) == (
        "refusing to materialise a 200,010,000 x 20,000 matrix (4,000,200,000,000 entries > "
        f"guard {DENSE_GUARD:,}); use the implicit operations instead")
