"""Non-negative least squares over implicit strategies, and rounding that keeps a total:
exact against scipy's NNLS and a brute-force KKT solve, on dense, Kronecker and marginal
strategies; the cell labels the published tables use."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.optimize as so

from engine.domain import Domain
from engine.errors import SpecError
from engine.linalg import nonnegative
from engine.linalg.marginals import MarginalStrategy, key_of
from engine.linalg.matrix import Dense, Identity, Kron
from engine.linalg.nonnegative import (
    ShiftedGramSolver,
    nonnegative_fit,
    nonnegative_least_squares,
    round_preserving_total,
    simplex_projection,
    simplex_threshold,
)
from engine.workloads.labels import row_value, run_value
from engine.workloads.workload import Workload


def _weighted_nnls(A: np.ndarray, y: np.ndarray, v: np.ndarray) -> np.ndarray:
    s = 1.0 / np.sqrt(v)
    return so.nnls(A * s[:, None], y * s, maxiter=10_000)[0]


def _constrained_brute_force(A: np.ndarray, y: np.ndarray, v: np.ndarray,
                             total: float) -> np.ndarray:
    """The optimum with sum(x) = total: the best feasible solution of the equality-
    constrained least squares over every support (exact for full column rank A)."""
    n, w = A.shape[1], 1.0 / v
    best, best_x = np.inf, None
    for k in range(1, n + 1):
        for support in itertools.combinations(range(n), k):
            S = list(support)
            H = A[:, S].T @ (w[:, None] * A[:, S])
            kkt = np.block([[H, np.ones((k, 1))], [np.ones((1, k)), np.zeros((1, 1))]])
            sol = np.linalg.solve(kkt, np.concatenate([A[:, S].T @ (w * y), [total]]))
            if sol[:k].min() >= -1e-12:
                x = np.zeros(n)
                x[S] = sol[:k]
                f = float(w @ (A @ x - y) ** 2)
                if f < best:
                    best, best_x = f, x
    return best_x


@pytest.mark.parametrize("seed", range(40))
def test_matches_scipy_nnls_on_dense_full_rank(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 15))
    m = int(rng.integers(n, 30))
    A = rng.normal(size=(m, n))
    y = rng.normal(size=m) * 5
    v = rng.uniform(0.5, 3.0, size=m)
    x = nonnegative_least_squares(Dense(A), y, v)
    ref = _weighted_nnls(A, y, v)
    assert x.min() >= 0.0
    assert np.abs(x - ref).max() <= 1e-8


def test_most_draws_hold_cells_at_zero():
    rng = np.random.default_rng(0)
    zeros = 0
    for _ in range(20):
        A = rng.normal(size=(12, 6))
        zeros += int((_weighted_nnls(A, rng.normal(size=12) * 5, np.ones(12)) == 0).any())
    assert 10 <= zeros <= 20


@pytest.mark.parametrize("seed", range(25))
def test_matches_brute_force_with_a_total(seed):
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(2, 7))
    m = int(rng.integers(n, 14))
    A = rng.normal(size=(m, n))
    y = rng.normal(size=m) * 5
    v = rng.uniform(0.5, 3.0, size=m)
    total = float(rng.uniform(0.5, 10.0))
    x = nonnegative_least_squares(Dense(A), y, v, total=total)
    assert x.min() >= 0.0
    assert x.sum() == pytest.approx(total, rel=1e-12)
    assert np.abs(x - _constrained_brute_force(A, y, v, total)).max() <= 1e-8


def test_identity_with_total_is_the_simplex_projection():
    y = np.array([3.2, -0.4, 5.1, 2.0])
    x = nonnegative_least_squares(Identity(4), y, 2.0, total=10)
    np.testing.assert_allclose(x, [3.1, 0.0, 5.0, 1.9], atol=1e-12)
    np.testing.assert_allclose(simplex_projection(y, 10.0), x, atol=1e-12)


def test_kronecker_strategy_matches_dense_nnls():
    rng = np.random.default_rng(7)
    factors = [np.vstack([np.eye(n), np.ones((1, n))]) for n in (3, 4, 2)]
    A = Kron([Dense(f) for f in factors])
    dense = A.dense()
    truth = rng.poisson(1.0, size=24).astype(float)
    y = dense @ truth + rng.normal(size=dense.shape[0]) * 3
    x = nonnegative_least_squares(A, y, 9.0)
    np.testing.assert_allclose(x, _weighted_nnls(dense, y, np.full(dense.shape[0], 9.0)),
                               atol=1e-8)


def test_heterogeneous_variances_on_a_kronecker_strategy():
    rng = np.random.default_rng(8)
    A = Kron([Dense(np.vstack([np.eye(4), np.ones((1, 4))])) for _ in range(2)])
    dense = A.dense()
    v = rng.uniform(1.0, 10.0, size=dense.shape[0])
    y = dense @ rng.poisson(2.0, size=16) + rng.normal(size=dense.shape[0]) * np.sqrt(v)
    np.testing.assert_allclose(nonnegative_least_squares(A, y, v),
                               _weighted_nnls(dense, y, v), atol=1e-8)


def test_marginal_strategy_fits_the_measured_marginals():
    # 2-way marginals of a 3x3x3 domain do not determine the cells, but the fitted
    # marginals (A x) are unique: compare those with the dense NNLS.
    shape = (3, 3, 3)
    theta = np.zeros(8)
    for axes in itertools.combinations(range(3), 2):
        theta[key_of(axes, 3)] = 1.0
    A = MarginalStrategy(theta, shape)
    dense = A.dense()
    rng = np.random.default_rng(9)
    y = dense @ rng.poisson(1.0, size=27) + rng.normal(size=dense.shape[0]) * 2
    x = nonnegative_least_squares(A, y, 4.0, total=30)
    ref = _weighted_nnls(np.vstack([dense, 1e4 * np.ones((1, 27))]),
                         np.concatenate([y, [1e4 * 30]]), np.full(dense.shape[0] + 1, 4.0))
    assert x.min() >= 0.0 and x.sum() == pytest.approx(30, rel=1e-12)
    np.testing.assert_allclose(dense @ x, dense @ ref, atol=1e-5)


def test_zero_total_and_bad_input():
    assert np.array_equal(nonnegative_least_squares(Identity(3), np.ones(3), 1.0, total=0),
                          np.zeros(3))
    with pytest.raises(SpecError, match="measurements: expected 3"):
        nonnegative_least_squares(Identity(3), np.ones(2), 1.0)
    with pytest.raises(SpecError, match="noise_variances"):
        nonnegative_least_squares(Identity(3), np.ones(3), 0.0)
    with pytest.raises(SpecError, match="total"):
        nonnegative_least_squares(Identity(3), np.ones(3), 1.0, total=-1)


@pytest.mark.parametrize("seed", range(10))
def test_rounding_keeps_the_total_and_stays_within_one(seed):
    rng = np.random.default_rng(seed)
    x = rng.exponential(2.0, size=500) * (rng.random(500) < 0.6)
    total = int(round(x.sum()))
    counts = round_preserving_total(x, total)
    assert counts.dtype == np.int64
    assert int(counts.sum()) == total
    assert counts.min() >= 0
    assert np.abs(counts - x).max() < 1.0
    assert np.array_equal(counts, np.floor(x) + (counts > np.floor(x)))


def test_rounding_gives_the_largest_remainders():
    np.testing.assert_array_equal(round_preserving_total(np.array([0.2, 0.7, 1.6, 2.5]), 5),
                                  [0, 1, 2, 2])
    np.testing.assert_array_equal(round_preserving_total(np.array([2.0, 3.0]), 5), [2, 3])
    with pytest.raises(SpecError, match="total: 9"):
        round_preserving_total(np.array([2.0, 3.0]), 9)
    with pytest.raises(SpecError, match="non-negative"):
        round_preserving_total(np.array([-0.5, 3.0]), 3)


def _sorted_simplex_projection(v: np.ndarray, total: float) -> np.ndarray:
    u = np.sort(v)[::-1]
    excess = np.cumsum(u) - total
    k = np.arange(1, u.size + 1)
    last = int(np.flatnonzero(u - excess / k > 0)[-1])
    return np.maximum(v - excess[last] / (last + 1), 0.0)


@pytest.mark.parametrize("seed", range(10))
def test_simplex_projection_matches_the_sort_formula(seed):
    rng = np.random.default_rng(seed)
    v = rng.normal(size=int(rng.integers(1, 2000))) * 5
    total = float(rng.uniform(0.1, 100.0))
    x = simplex_projection(v, total)
    np.testing.assert_allclose(x, _sorted_simplex_projection(v, total), atol=1e-12)
    assert x.min() >= 0.0 and x.sum() == pytest.approx(total, rel=1e-12)


def test_fit_reports_convergence_and_honours_the_work_budget():
    rng = np.random.default_rng(11)
    A = Kron([Dense(np.vstack([np.eye(5), np.ones((1, 5))])) for _ in range(3)])
    dense = A.dense()
    y = dense @ rng.poisson(0.5, size=125) + rng.normal(size=dense.shape[0]) * 3

    def objective(x: np.ndarray) -> float:
        return float(((dense @ x - y) ** 2).sum())

    exact = nonnegative_fit(A, y, 9.0, total=60)
    assert exact.converged and exact.stationarity <= 1e-10 and exact.products > 10
    start = nonnegative_fit(A, y, 9.0, total=60, max_products=0)
    assert not start.converged and start.iterations == 0
    np.testing.assert_allclose(start.x, simplex_projection(A.pinv().matvec(y), 60), atol=1e-9)
    budgeted = nonnegative_fit(A, y, 9.0, total=60, max_products=12)
    assert budgeted.products <= 12 + 4  # a line search may finish the last step
    assert budgeted.x.min() >= 0 and budgeted.x.sum() == pytest.approx(60, rel=1e-12)
    assert objective(exact.x) <= objective(budgeted.x) <= objective(start.x)
    assert objective(exact.x) < objective(start.x)


def test_labels_name_runs_of_values():
    domain = Domain.from_spec({"age": {"bin_edges": [0, 10, 20, 30.5]},
                               "sex": {"labels": ["female", "male"]}, "n": 5})
    age, sex, n = domain["age"], domain["sex"], domain["n"]
    assert [run_value(age, 0, 0), run_value(age, 0, 1), run_value(age, 2, 2)] == [
        "0-9", "0-19", "[20, 30.5)"]
    assert run_value(sex, 1, 1) == "male" and run_value(n, 1, 3) == "1-3"
    assert row_value(sex, np.array([1.0, 1.0]), 0, "total") == "total"
    assert row_value(n, np.array([0, 1, 1, 0, 0.0]), 2, "range") == "1-2"
    assert row_value(n, np.array([0, 2, 1, 0, 0.0]), 4, "random") == "row 4 of n's random"
    assert row_value(n, np.array([1, 0, 1, 0, 1.0]), 5, "matrix") == "0, 2 or 4"
    assert row_value(sex, np.array([0, 1.0]), 1, "matrix") == "male"


def test_an_identity_strategy_is_fitted_by_the_projection_alone():
    y = np.random.default_rng(12).normal(size=1000) * 4 + 1
    fit = nonnegative_fit(Kron([Identity(10), Identity(100)]), y, 16.0, total=700)
    assert fit.converged and fit.products == 0
    np.testing.assert_allclose(fit.x, _sorted_simplex_projection(y, 700), atol=1e-12)
    scipy_fit = _weighted_nnls(np.eye(1000), y, np.full(1000, 16.0))
    np.testing.assert_allclose(nonnegative_least_squares(Identity(1000), y, 16.0), scipy_fit,
                               atol=1e-12)


def test_shifted_gram_solver_inverts_the_shifted_gram_exactly():
    rng = np.random.default_rng(13)
    factors = [Dense(rng.normal(size=(n + 2, n))) for n in (3, 4, 5)]
    A = Kron(factors)
    solver = ShiftedGramSolver.of(A, np.full(A.shape[0], 0.25))
    H = 0.25 * A.dense().T @ A.dense()
    v = rng.normal(size=60)
    np.testing.assert_allclose(solver.solve(v, 0.7), np.linalg.solve(H + 0.7 * np.eye(60), v),
                               rtol=1e-10, atol=1e-12)
    lam = np.linalg.eigvalsh(H)
    assert solver.rho() == pytest.approx(np.sqrt(lam.min() * lam.max()), rel=1e-8)
    assert ShiftedGramSolver.of(A, np.linspace(1, 2, A.shape[0])) is None  # mixed noise


def test_a_budgeted_fit_on_a_kronecker_strategy_is_near_the_optimum():
    # 4,096 cells, mostly empty: the ADMM stage alone (no Newton polish) gets the objective
    # within 0.1 % of the optimum's excess over the start
    rng = np.random.default_rng(14)
    A = Kron([Dense(np.vstack([np.eye(8), np.ones((1, 8))])) for _ in range(4)])
    truth = np.bincount(rng.integers(0, 4096, 2000), minlength=4096).astype(float)
    y = A.matvec(truth) + rng.normal(size=A.shape[0]) * 4
    target = A.rmatvec(y) / 16

    def objective(x: np.ndarray) -> float:
        r = A.matvec(x) - y
        return float(r @ r) / 32

    exact = nonnegative_fit(A, y, 16.0, total=2000)
    assert exact.converged
    start = nonnegative_fit(A, y, 16.0, total=2000, max_products=0)
    admm = nonnegative_fit(A, y, 16.0, total=2000, max_products=200, max_iter=0)
    assert admm.products <= 200 and admm.iterations == 0
    assert admm.x.min() >= 0 and admm.x.sum() == pytest.approx(2000, rel=1e-12)
    gap = (objective(admm.x) - objective(exact.x)) / (objective(start.x) - objective(exact.x))
    assert 0.0 <= gap <= 1e-3
    assert float(np.linalg.norm(target)) > 0


def test_marginal_gram_solver_is_the_weighted_union_of_marginals_exactly() -> None:
    domain = Domain.from_sizes([3, 1, 4, 2])
    workload = Workload.marginals(domain, upto=2)
    rng = np.random.default_rng(5)
    per_term = rng.uniform(0.5, 4.0, len(workload.terms))
    weights: dict[tuple[int, ...], float] = {}
    for term, w in zip(workload.terms, per_term, strict=True):
        weights[term.attrs] = weights.get(term.attrs, 0.0) + w
    row_weights = np.concatenate([np.full(t.num_queries, w)
                                  for t, w in zip(workload.terms, per_term, strict=True)])
    A = np.asarray(workload.matrix.dense())
    H = A.T @ (row_weights[:, None] * A)
    solver = ShiftedGramSolver.of_marginals(domain.shape, weights)
    v = rng.normal(size=domain.size)
    assert np.allclose(solver.apply(v), H @ v, rtol=0, atol=1e-10 * np.abs(H @ v).max())
    assert np.allclose(solver.solve(v, 0.7), np.linalg.solve(H + 0.7 * np.eye(domain.size), v),
                       rtol=0, atol=1e-10)
    target = A.T @ (row_weights * rng.normal(size=A.shape[0]))
    assert np.allclose(solver.least_squares(target), np.linalg.pinv(H) @ target, rtol=0,
                       atol=1e-9)


def _largest_remainders(x: np.ndarray, total: int) -> np.ndarray:
    """The rounding by definition: floors, then one more to the ``total - sum(floors)``
    cells first in (largest fraction, lowest index) order."""
    floors = np.floor(np.maximum(x, 0.0))
    fractions = np.maximum(x, 0.0) - floors
    order = np.lexsort((np.arange(x.size), -fractions))
    counts = floors.astype(np.int64)
    counts[order[:total - int(counts.sum())]] += 1
    return counts


@pytest.mark.parametrize("seed", range(12))
def test_sparse_rounding_is_the_largest_remainder_rounding(seed):
    # mostly empty estimates with ties, whole values and cells rounded up from zero
    rng = np.random.default_rng(100 + seed)
    x = np.round(rng.exponential(3.0, size=2000), 1) * (rng.random(2000) < 0.05)
    x[rng.integers(0, 2000, 5)] = -1e-10  # round-off below zero counts as zero
    floors = int(np.floor(np.maximum(x, 0.0)).sum())
    fractional = int((np.maximum(x, 0.0) % 1 > 0).sum())
    for total in (floors, floors + 3, floors + fractional, floors + 150):
        np.testing.assert_array_equal(round_preserving_total(x, total),
                                      _largest_remainders(x, total))


def test_single_precision_admm_reaches_the_double_precision_objective(monkeypatch):
    # 160,000 cells (above SINGLE_PRECISION_CELLS): the single-precision ADMM stage lands on
    # the double-precision one's objective within 1e-6, feasible and on the exact total
    rng = np.random.default_rng(21)
    factor = np.vstack([np.eye(20), np.ones((1, 20)), rng.uniform(0, 1, (2, 20))])
    A = Kron([Dense(factor) for _ in range(4)])
    cells = rng.zipf(1.3, size=20_000) % A.shape[1]
    truth = np.bincount(cells, minlength=A.shape[1]).astype(float)
    y = A.matvec(truth) + rng.normal(size=A.shape[0]) * 5
    assert A.shape[1] >= nonnegative.SINGLE_PRECISION_CELLS

    def objective(x: np.ndarray) -> float:
        r = A.matvec(x) - y
        return float(r @ r) / 50

    single = nonnegative_fit(A, y, 25.0, total=20_000, max_products=40, max_iter=0)
    monkeypatch.setattr(nonnegative, "SINGLE_PRECISION_CELLS", 2**40)
    double = nonnegative_fit(A, y, 25.0, total=20_000, max_products=40, max_iter=0)
    assert single.products == double.products == 39  # 19 ADMM iterations, one gradient
    assert single.x.dtype == np.float64 and single.x.min() >= 0
    assert single.x.sum() == pytest.approx(20_000, rel=1e-12)
    start = nonnegative_fit(A, y, 25.0, total=20_000, max_products=0)
    assert objective(double.x) < 0.9 * objective(start.x)  # the stage does work
    assert objective(single.x) == pytest.approx(objective(double.x), rel=1e-6)


def test_shifted_solve_in_single_precision_and_grouped_factors():
    rng = np.random.default_rng(22)
    factors = [Dense(rng.normal(size=(n + 1, n))) for n in (2, 5, 3, 4)]
    A = Kron(factors)
    solver = ShiftedGramSolver.of(A, np.full(A.shape[0], 2.0))
    # 2 x 5 = 10 and 3 x 4 = 12 columns: two merged factors
    assert [u.shape[1] for u in solver.vectors] == [10, 12]
    H = 2.0 * A.dense().T @ A.dense()
    v = rng.normal(size=A.shape[1])
    exact = np.linalg.solve(H + 0.3 * np.eye(A.shape[1]), v)
    np.testing.assert_allclose(solver.solve(v, 0.3), exact, rtol=1e-9, atol=1e-11)
    single = solver.solve(v.astype(np.float32), 0.3)
    assert single.dtype == np.float32
    np.testing.assert_allclose(single, exact, rtol=0, atol=2e-5 * np.abs(exact).max())
    np.testing.assert_allclose(solver.apply(v), H @ v, rtol=0, atol=1e-9 * np.abs(H @ v).max())


@pytest.mark.parametrize("seed", range(6))
def test_a_warm_threshold_guess_gives_the_exact_projection(seed):
    # any guess (below, at, above the threshold, or above every entry) gives the cold result
    rng = np.random.default_rng(200 + seed)
    v = rng.normal(size=5000) * 3.0
    total = float(rng.uniform(10.0, 500.0))
    cold = simplex_threshold(v, total)
    np.testing.assert_allclose(simplex_projection(v, total), _sorted_simplex_projection(v, total),
                               rtol=0, atol=1e-9)
    for guess in (cold - 5.0, cold - 1e-3, cold, cold + 0.5, float(v.max()) + 1.0):
        assert simplex_threshold(v, total, guess) == pytest.approx(cold, rel=1e-12, abs=1e-12)
    single = v.astype(np.float32)
    assert simplex_projection(single, total).dtype == np.float32
