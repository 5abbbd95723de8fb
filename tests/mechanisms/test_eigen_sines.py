"""The closed-form eigen-queries of all ranges (DST-I) and separation on them without eigh."""

from __future__ import annotations

import math

import numpy as np
import pytest

from engine.analysis.expected_error import explicit_trace
from engine.mechanisms.eigen_design.design import eigen_design, eigen_queries
from engine.mechanisms.eigen_design.reductions import default_group_size, eigen_separation
from engine.mechanisms.eigen_design.sines import (
    SineBasis,
    all_range_eigenvalues,
    all_range_separation,
    squared_sine_rows,
)
from engine.workloads import AllRangeBlock


@pytest.mark.parametrize("n", [1, 2, 7, 64, 255])
def test_sine_basis_diagonalises_the_all_range_gram(n, rng) -> None:
    """``Q G Q^T = diag(sigma)`` with the closed-form eigenvalues; Q orthonormal and
    symmetric; the fast transform, the squares and their FFT product equal the dense forms."""
    Q = SineBasis(n)
    D = Q.dense()
    G = AllRangeBlock(n).gram_array()
    np.testing.assert_allclose(D @ D.T, np.eye(n), atol=1e-13)
    np.testing.assert_array_equal(D, D.T)
    sigma = all_range_eigenvalues(n)
    np.testing.assert_allclose(D @ G @ D.T, np.diag(sigma), rtol=1e-12, atol=1e-11 * sigma[0])
    np.testing.assert_allclose(sigma, np.linalg.eigvalsh(G)[::-1], rtol=1e-12)
    assert np.all(np.diff(sigma) < 0)
    X = rng.standard_normal((n, 3))
    np.testing.assert_allclose(Q.matvec(X), D @ X, atol=1e-12)
    np.testing.assert_allclose(Q.rmatvec(X[:, 0]), D.T @ X[:, 0], atol=1e-12)
    np.testing.assert_allclose(squared_sine_rows(n), D * D, atol=1e-15)
    np.testing.assert_allclose(squared_sine_rows(n, slice(1, 3)), (D * D)[1:3], atol=1e-15)
    half = (n + 1) // 2
    np.testing.assert_allclose(squared_sine_rows(n, columns=half), (D * D)[:, :half],
                               atol=1e-15)
    np.testing.assert_allclose((D * D)[:, ::-1], D * D, atol=1e-15)  # mirror cells
    v = rng.random(n)
    np.testing.assert_allclose(Q.squares_rmatvec(v), (D * D).T @ v, atol=1e-14)


def test_all_range_eigenvalue_closed_form() -> None:
    """n = 2: G = [[2, 1], [1, 2]] (eigenvalues 3, 1); the trace is sum_i i (n + 1 - i)."""
    np.testing.assert_allclose(all_range_eigenvalues(2), [3.0, 1.0], rtol=1e-14)
    n = 300
    assert all_range_eigenvalues(n).sum() == pytest.approx(
        sum(i * (n + 1 - i) for i in range(1, n + 1)), rel=1e-12)


def test_separation_in_the_sine_basis_is_separation_on_eigh() -> None:
    """Without completion, the same Program 1 instances as eigen_separation on the dense
    eigen-queries (which are the sines up to sign): the same value."""
    n = 256
    eig = eigen_queries(AllRangeBlock(n).gram_array())
    closed = all_range_separation(n, complete=False)
    dense = eigen_separation(eig, default_group_size(n), complete=False)
    assert closed.unit_error() == pytest.approx(dense.unit_error(), rel=1e-7)
    assert closed.info["svd_bound"] == pytest.approx(eig.svd_bound, rel=1e-12)
    assert closed.sensitivity[2] == pytest.approx(1.0, rel=1e-12)


@pytest.mark.parametrize(("n", "cells", "low", "high"), [
    (1024, None, 1.0105, 1.0115), (1024, 0, 1.0201, 1.0211), (512, None, 1.0115, 1.0130)])
def test_closed_form_separation_within_two_percent_of_the_full_algorithm(n, cells, low,
                                                                        high) -> None:
    """Root-scale error over the full algorithm's (eigh, Program 1, full completion).
    Measured at n = 1024: 1.0110 with the default n / 8 completed cells, 1.0206 without."""
    full = eigen_design(eigen_queries(AllRangeBlock(n).gram_array()))
    design = all_range_separation(n, complete=cells != 0, completion_cells=cells or None)
    assert low <= math.sqrt(design.unit_error() / full.unit_error()) <= high
    assert design.strategy.cells.size == (0 if cells == 0 else n // 8)


def test_partial_completion_error_is_exact() -> None:
    """The implicit basis with a completion goes through Woodbury; it matches the explicit
    trace of the dense strategy, and a weighted workload scales the error by weight**2."""
    n = 96
    design = all_range_separation(n, 4, completion_cells=20)
    A = design.strategy.dense()
    G = AllRangeBlock(n).gram_array()
    assert design.solver.kind == "completion"
    assert design.strategy.cells.size == 20
    assert design.trace == pytest.approx(explicit_trace(G, A.T @ A), rel=1e-9)
    np.testing.assert_allclose(design.strategy.column_norms(2), np.sqrt((A**2).sum(axis=0)),
                               atol=1e-14)
    assert np.sqrt((A**2).sum(axis=0)).max() == pytest.approx(1.0, rel=1e-12)
    heavier = all_range_separation(n, 4, weight=3.0, completion_cells=20)
    assert heavier.unit_error() == pytest.approx(9.0 * design.unit_error(), rel=1e-9)
