"""The raw marginals' covariance of a Kronecker strategy, built from per-attribute Grams,
against the dense ``s2 M_T (A'A)^+ M_S'`` of the explicit matrices, and its component basis
(uncorrelated components of the stated variances)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from engine.linalg.matrix import Dense, Identity, Kron
from engine.workflows.marginal_covariance import MarginalCovariance

SHAPE = (3, 4, 2)
TABLES = [(), (0,), (1,), (2,), (0, 1), (0, 2), (1, 2), (0, 1, 2)]
NOISE = 2.5


def _factors() -> list[np.ndarray]:
    rng = np.random.default_rng(11)
    return [rng.normal(size=(n + 2, n)) for n in SHAPE]


def _summing(table: tuple[int, ...]) -> np.ndarray:
    out = np.ones((1, 1))
    for i, n in enumerate(SHAPE):
        out = np.kron(out, np.eye(n) if i in table else np.ones((1, n)))
    return out


def _dense_covariance() -> np.ndarray:
    a = np.ones((1, 1))
    for f in _factors():
        a = np.kron(a, f)
    return NOISE * np.linalg.pinv(a.T @ a)


def _covariance() -> MarginalCovariance:
    return MarginalCovariance([f.T @ f for f in _factors()], NOISE)


@pytest.mark.parametrize(("rows", "columns"), list(itertools.product(TABLES, TABLES)))
def test_every_block_is_the_dense_covariance_of_the_explicit_matrices(rows, columns) -> None:
    dense = _summing(rows) @ _dense_covariance() @ _summing(columns).T
    block = _covariance().block(rows, columns)
    assert block.shape == dense.shape
    assert np.abs(block - dense).max() <= 1e-10 * np.abs(dense).max()


def test_entries_and_products_are_the_blocks() -> None:
    cov = _covariance()
    rows = cov.cell_coordinates((0, 2), np.arange(6))
    assert rows.tolist()[:2] == [[0, 4, 0], [0, 4, 1]]  # the summed attribute is its size
    np.testing.assert_allclose(cov.entries(rows, cov.cell_coordinates((1,), np.arange(4))),
                               cov.block((0, 2), (1,)), rtol=1e-12, atol=0)
    rng = np.random.default_rng(3)
    v = {t: rng.normal(size=[SHAPE[a] for a in t]) for t in TABLES[:-1]}
    product = cov.matvec(v, TABLES)
    for t in TABLES:
        expected = sum(cov.block(t, s) @ v[s].reshape(-1) for s in v)
        np.testing.assert_allclose(product[t].reshape(-1), expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("table", [(0,), (0, 1), (0, 1, 2)])
def test_components_are_uncorrelated_with_the_stated_variances(table) -> None:
    cov = _covariance()
    sizes = [SHAPE[a] for a in table]
    cells = int(np.prod(sizes))
    columns = [cov.components(table, e.reshape(sizes)) for e in np.eye(cells)]
    names = list(columns[0])
    basis = np.array([np.concatenate([c[u] for u in names]) for c in columns]).T
    variances = np.concatenate([np.full(columns[0][u].size, cov.component_variance(u))
                                for u in names])
    assert basis.shape == (cells, cells)
    whitened = basis @ cov.block(table, table) @ basis.T
    assert np.abs(whitened - np.diag(variances)).max() <= 1e-10 * variances.max()


def test_an_identity_strategy_has_the_domain_sizes_as_variances() -> None:
    cov = MarginalCovariance.of_strategy(Kron([Identity(2), Identity(3)]), np.full(6, 2.0))
    assert cov is not None
    # the total sums 6 cells of variance 2; a 1-way cell of attribute 0 sums 3
    assert cov.component_variance(()) == pytest.approx(12.0, rel=1e-12)
    assert cov.component_variance((0,)) == pytest.approx(6.0, rel=1e-12)
    np.testing.assert_allclose(cov.block((0,), (0,)), [[6.0, 0.0], [0.0, 6.0]], rtol=1e-12,
                               atol=1e-12)


def test_where_it_does_not_apply_there_is_none() -> None:
    kron = Kron([Identity(2), Identity(3)])
    assert MarginalCovariance.of_strategy(Identity(6), 1.0) is None  # not a Kronecker product
    assert MarginalCovariance.of_strategy(kron, np.array([1.0, 2.0, 1, 1, 1, 1])) is None
    singular = Kron([Dense(np.array([[1.0, 1.0]])), Identity(3)])  # 1 x 2: rank 1
    assert MarginalCovariance.of_strategy(singular, 1.0) is None
    with pytest.raises(ValueError, match="attribute 0's Gram is not square and of full rank"):
        MarginalCovariance([np.ones((2, 2))], 1.0)
