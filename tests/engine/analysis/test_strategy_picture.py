"""Aggregated strategy pictures: block means equal the dense matrix's, for every structure,
and a billion-cell Kronecker strategy is pictured from its factors in bounded memory."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp

from engine.analysis.strategy_picture import (
    MATVEC_ENTRIES,
    bin_edges,
    block_image,
    value_count_variances,
)
from engine.linalg.matrix import (
    Dense,
    Identity,
    Kron,
    Matrix,
    Ones,
    Product,
    Scaled,
    Sparse,
    VStack,
)


def dense_block_means(D: np.ndarray, r_edges: np.ndarray, c_edges: np.ndarray,
                      absolute: bool) -> np.ndarray:
    X = np.abs(D) if absolute else D
    return np.array([[X[a:b, c:d].mean() for c, d in zip(c_edges[:-1], c_edges[1:], strict=True)]
                     for a, b in zip(r_edges[:-1], r_edges[1:], strict=True)])


def random_dense(rng: np.random.Generator, m: int, n: int) -> Dense:
    return Dense(rng.standard_normal((m, n)))


def structures(rng: np.random.Generator) -> dict[str, Matrix]:
    k1 = Kron([random_dense(rng, 3, 4), random_dense(rng, 5, 2), random_dense(rng, 2, 3)])
    k2 = Kron([Identity(4), random_dense(rng, 3, 6)])
    return {
        "dense": random_dense(rng, 23, 17),
        "sparse": Sparse(sp.random(19, 29, density=0.2, random_state=3, format="csr",
                                   data_rvs=lambda k: rng.standard_normal(k))),
        "kron": k1,
        "kron_identity": k2,
        "vstack": VStack([Kron([random_dense(rng, 2, 4), random_dense(rng, 3, 6)]),
                          random_dense(rng, 7, 24)], weights=[0.5, -2.0]),
        "scaled_transpose": Scaled(k1.T, -1.5),
        "identity": Identity(13),
        "ones": Ones(5, 9),
        "product": Product(random_dense(rng, 11, 8), random_dense(rng, 8, 14)),
    }


@pytest.mark.parametrize("statistic", ["mean", "mean_abs"])
@pytest.mark.parametrize("name", ["dense", "sparse", "kron", "kron_identity", "vstack",
                                  "scaled_transpose", "identity", "ones", "product"])
@pytest.mark.parametrize("grid", [(4, 5), (7, 3), (100, 100)])
def test_block_means_equal_the_dense_matrix(name, statistic, grid):
    A = structures(np.random.default_rng(7))[name]
    D = A.dense()
    picture = block_image(A, rows=grid[0], cols=grid[1], statistic=statistic)
    expected = dense_block_means(D, picture.row_edges, picture.col_edges,
                                 statistic == "mean_abs")
    assert picture.values.shape == expected.shape
    np.testing.assert_allclose(picture.values, expected, rtol=0, atol=1e-12)
    assert picture.row_edges[0] == 0 and picture.row_edges[-1] == D.shape[0]
    assert picture.col_edges[0] == 0 and picture.col_edges[-1] == D.shape[1]
    assert picture.exact == (grid == (100, 100))


@pytest.mark.parametrize("name", ["kron", "vstack", "sparse", "dense"])
def test_zoomed_ranges_equal_the_dense_submatrix(name):
    A = structures(np.random.default_rng(11))[name]
    D = A.dense()
    m, n = D.shape
    picture = block_image(A, rows=3, cols=4, row_range=(2.4, m - 3.2), col_range=(1, n - 1),
                          statistic="mean")
    assert picture.row_edges[0] == 2 and picture.row_edges[-1] == m - 3
    assert picture.col_edges[0] == 1 and picture.col_edges[-1] == n - 1
    expected = dense_block_means(D, picture.row_edges, picture.col_edges, False)
    np.testing.assert_allclose(picture.values, expected, rtol=0, atol=1e-12)


def test_single_entry_blocks_are_the_entries():
    D = np.array([[1.0, -2.0, 0.0], [0.5, 4.0, -1.0]])
    picture = block_image(D, rows=10, cols=10, statistic="mean")
    assert picture.exact
    np.testing.assert_array_equal(picture.values, D)
    np.testing.assert_array_equal(block_image(D, statistic="mean_abs").values, np.abs(D))


def test_bin_edges_cover_the_range_near_equally():
    edges = bin_edges(0, 10**9, 400)
    assert edges[0] == 0 and edges[-1] == 10**9 and edges.size == 401
    widths = np.diff(edges)
    assert widths.min() == 2_500_000 and widths.max() == 2_500_000
    np.testing.assert_array_equal(bin_edges(3, 7, 400), [3, 4, 5, 6, 7])
    odd = np.diff(bin_edges(0, 1_000_003, 7))
    assert odd.sum() == 1_000_003 and odd.max() - odd.min() <= 1


def test_billion_cell_kronecker_in_bounded_memory():
    # [1000]^3: prefix sums (lower-triangular ones) on three attributes of 1000 values, a
    # 1e9 x 1e9 strategy (1e18 entries); only the factors and the grid are ever formed.
    L = np.tril(np.ones((1000, 1000)))
    A = Kron([Dense(L), Dense(L), Dense(L)])
    assert A.shape == (10**9, 10**9)
    tracemalloc.start()
    try:
        picture = block_image(A, rows=1000, cols=1000, statistic="mean")
        peak_mb = tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()
    assert 10 < peak_mb < 400  # a dense 1e9-cell vector alone would take 7,629 MB
    # One block per value pair of the first attribute: L[a, c] times the mean of L kron L,
    # (500,500 / 10**6)**2 = 0.25050025.
    np.testing.assert_allclose(picture.values, L * 0.25050025, rtol=0, atol=1e-9)
    assert picture.statistic == "mean" and not picture.exact
    # zoomed to the first 4 x 4 entries: the entries themselves
    zoom = block_image(A, rows=4, cols=4, row_range=(0, 4), col_range=(0, 4),
                       statistic="mean")
    np.testing.assert_array_equal(zoom.values, np.tril(np.ones((4, 4))))
    assert zoom.exact


def test_kronecker_picture_matches_a_smaller_dense_model():
    prefix = Dense(np.tril(np.ones((10, 10))))
    A = Kron([prefix, prefix, prefix])
    picture = block_image(A, rows=7, cols=9, statistic="mean_abs")
    expected = dense_block_means(A.dense(), picture.row_edges, picture.col_edges, True)
    np.testing.assert_allclose(picture.values, expected, rtol=0, atol=1e-12)


def test_unstructured_matrices_refuse_beyond_their_limits():
    class Opaque(Matrix):
        def __init__(self, m: int, n: int) -> None:
            self.m, self.n = m, n

        @property
        def shape(self) -> tuple[int, int]:
            return (self.m, self.n)

        def matvec(self, x: np.ndarray) -> np.ndarray:
            return np.zeros((self.m,) + np.shape(x)[1:])

    with pytest.raises(ValueError, match="needs its entries"):
        block_image(Opaque(20_000, 20_000), statistic="mean_abs")
    with pytest.raises(ValueError, match=f"limit {MATVEC_ENTRIES:,}"):
        block_image(Opaque(10**6, 10**6), statistic="mean")
    signed = block_image(Opaque(20_000, 20_000), rows=3, cols=3, statistic="mean")
    np.testing.assert_array_equal(signed.values, np.zeros((3, 3)))


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="statistic must be one of mean, mean_abs"):
        block_image(np.eye(3), statistic="median")
    with pytest.raises(ValueError, match="row range"):
        block_image(np.eye(3), row_range=(5, 9))


def pinv_count_variances(A: np.ndarray, shape: tuple[int, ...]) -> list[np.ndarray]:
    G = np.linalg.pinv(A.T @ A)
    cells = np.indices(shape).reshape(len(shape), -1)
    out = []
    for i, size in enumerate(shape):
        Q = (cells[i][:, None] == np.arange(size)[None, :]).astype(float)
        out.append(np.einsum("nk,nm,mk->k", Q, G, Q))
    return out


def test_value_count_variances_equal_the_pseudo_inverse_formula():
    rng = np.random.default_rng(5)
    shape = (3, 4, 2)
    factors = [random_dense(rng, s + 1, s) for s in shape]
    kron = Kron(factors)
    expected = pinv_count_variances(kron.dense(), shape)
    for got, want in zip(value_count_variances(kron, shape), expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=0)
    # the same matrix without its structure takes the dense route
    dense = Dense(kron.dense())
    for got, want in zip(value_count_variances(dense, shape), expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=0)
    # identity on 2 x 3: the count of one value of the first attribute sums 3 cells
    first, second = value_count_variances(Identity(6), (2, 3))
    np.testing.assert_allclose(first, [3.0, 3.0], rtol=1e-12)
    np.testing.assert_allclose(second, [2.0, 2.0, 2.0], rtol=1e-12)


def test_value_counts_a_strategy_cannot_estimate_are_nan():
    # only the total and the first attribute's counts are measured on a 2 x 2 domain
    A = Dense(np.kron(np.eye(2), np.ones((1, 2))))
    first, second = value_count_variances(A, (2, 2))
    np.testing.assert_allclose(first, [1.0, 1.0], rtol=1e-12)  # each measured once
    assert np.isnan(second).all()
    with pytest.raises(ValueError, match="4 columns for a domain of 6 cells"):
        value_count_variances(A, (2, 3))


def test_a_plan_too_large_to_list_is_plotted_as_block_means():
    pytest.importorskip("holoviews")
    import engine

    spec = {"domain": {"x": {"size": 3000}}, "workload": [{"product": {"x": "identity"}}],
            "privacy": {"noise": "laplace", "epsilon": 1.0}}
    image = engine.plan(spec, "identity").plot()
    assert image.data.shape == (2000, 2000)  # engine.plotting.IMAGE_LIMIT pixels
    assert image.bounds.lbrt() == (0, 0, 3000, 3000)
    assert image.vdims[0].name == "average weight size"
    # 3,000 rows in 2,000 blocks: 1,000 of width 2 and 1,000 of width 1; a diagonal block of
    # width w holds w ones in w * w entries (mean 1 / w), every other block is zero
    widths = np.diff(bin_edges(0, 3000, 2000))
    assert sorted(set(widths.tolist())) == [1, 2] and (widths == 2).sum() == 1000
    assert float(np.asarray(image.data).sum()) == pytest.approx(1500.0, rel=1e-12)
