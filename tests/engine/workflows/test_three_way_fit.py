"""The 3-way fit (engine/workflows/three_way_fit.py): its ADMM optimum against Clarabel on the
same programme, exact tables back without noise, and tables that agree."""

from __future__ import annotations

import hashlib
import math
from itertools import combinations

import clarabel
import numpy as np
import pytest
import scipy.sparse as sp

from engine.domain import Domain
from engine.linalg.matrix import Dense, Kron
from engine.workflows.marginal_fit import fit_marginals
from engine.workflows.tables import forget_workloads, publishable_tables
from engine.workflows.three_way_fit import (
    Pull,
    clear_cache,
    fit_index,
    fit_three_way,
    kronecker_cubes,
    margin_factors,
    pseudo_inverse,
    three_way_cells,
)
from engine.workloads.workload import Workload

SHAPE = (3, 3, 3, 3)


def _margin(x: np.ndarray, onto: tuple[int, ...]) -> np.ndarray:
    return x.sum(axis=tuple(a for a in range(x.ndim) if a not in onto)).reshape(-1)


def _measured(x: np.ndarray, noise: float, seed: int):
    rng = np.random.default_rng(seed)
    out = {}
    for q in [*combinations(range(x.ndim), 2), *((a,) for a in range(x.ndim))]:
        table = _margin(x, q)
        weights = 1.0 / (1.0 + rng.random(table.size))  # unequal weights
        out[q] = (table + noise * rng.standard_normal(table.size), weights)
    return out


def _clarabel(shape, measured, total, cubes=None, cube_weight=None):
    """The same programme as a dense QP: unknowns the 3-way tables, agreeing pairwise, >= 0,
    the total; objective the weighted squares (and those of the 3-way tables' interactions
    against the cubes')."""
    k = len(shape)
    triples = list(combinations(range(k), 3))
    sizes = [math.prod(shape[a] for a in c) for c in triples]
    n = sum(sizes)
    starts = np.concatenate([[0], np.cumsum(sizes)]).astype(int)

    def summing(c, onto):
        dims = [shape[a] for a in c]
        coords = np.unravel_index(np.arange(math.prod(dims)), dims)
        target = (np.ravel_multi_index([coords[c.index(a)] for a in onto],
                                       [shape[a] for a in onto]) if onto
                  else np.zeros(math.prod(dims), dtype=int))
        out = np.zeros((math.prod(shape[a] for a in onto), math.prod(dims)))
        out[target, np.arange(math.prod(dims))] = 1.0
        return out

    rows, rhs = [], []
    for p in combinations(range(k), 2):
        holders = [i for i, c in enumerate(triples) if set(p) <= set(c)]
        for i, j in zip(holders, holders[1:], strict=False):
            block = np.zeros((math.prod(shape[a] for a in p), n))
            block[:, starts[i]:starts[i + 1]] = summing(triples[i], p)
            block[:, starts[j]:starts[j + 1]] -= summing(triples[j], p)
            rows.append(block)
            rhs.append(np.zeros(block.shape[0]))
    rows.append(np.concatenate([np.zeros(0), np.ones(sizes[0]), np.zeros(n - sizes[0])])[None])
    rhs.append([float(total)])
    equal = np.vstack(rows)
    hessian, linear = np.zeros((n, n)), np.zeros(n)
    for q, (target, weight) in measured.items():
        i = next(i for i, c in enumerate(triples) if set(q) <= set(c))
        block = np.zeros((target.size, n))
        block[:, starts[i]:starts[i + 1]] = summing(triples[i], q)
        hessian += block.T @ (weight[:, None] * block)
        linear -= block.T @ (weight * target)
    if cubes is not None:
        # each table's 3-way interaction (the table less its projection onto sums of 2-way
        # terms), weighted by the mean weight of its cells
        for i, c in enumerate(triples):
            cells = slice(starts[i], starts[i + 1])
            pairs = np.vstack([summing(c, p) for p in combinations(c, 2)]).T
            interaction = np.eye(sizes[i]) - pairs @ np.linalg.pinv(pairs)
            omega = float(np.mean(cube_weight[cells]))
            hessian[cells, cells] += omega * interaction
            linear[cells] -= omega * interaction @ cubes[cells]
    A = sp.csc_matrix(np.vstack([equal, -np.eye(n)]))
    b = np.concatenate([np.concatenate(rhs), np.zeros(n)])
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    settings.tol_gap_abs = settings.tol_gap_rel = settings.tol_feas = 1e-10
    cones = [clarabel.ZeroConeT(equal.shape[0]), clarabel.NonnegativeConeT(n)]
    solution = clarabel.DefaultSolver(sp.csc_matrix(np.triu(hessian)), linear, A, b, cones,
                                      settings).solve()
    x = np.asarray(solution.x)
    return {p: summing(triples[next(i for i, c in enumerate(triples) if set(p) <= set(c))], p)
            @ x[starts[next(i for i, c in enumerate(triples) if set(p) <= set(c))]:
                starts[next(i for i, c in enumerate(triples) if set(p) <= set(c)) + 1]]
            for p in measured}


@pytest.mark.parametrize("seed", [0, 1])
def test_the_admm_optimum_is_clarabels(seed) -> None:
    rng = np.random.default_rng(10 + seed)
    x = rng.poisson(1.0, size=SHAPE).astype(float)
    x[rng.random(SHAPE) < 0.5] = 0.0
    measured = _measured(x, noise=2.0, seed=seed)
    total = int(x.sum())
    reference = _clarabel(SHAPE, measured, total)
    fit = fit_three_way(SHAPE, measured, total=total, iterations=5_000, tolerance=1e-9)
    assert fit.converged and fit.unknowns == three_way_cells(SHAPE, [0, 1, 2, 3]) == 108
    gap = max(np.abs(fit.tables[q] - reference[q]).max() for q in measured)
    assert gap <= 1e-4, gap
    # the noisy answers are not feasible: the optimum moves them
    assert max(np.abs(reference[q] - measured[q][0]).max() for q in measured) >= 0.5


def test_the_optimum_with_the_estimates_3_way_tables_is_clarabels() -> None:
    rng = np.random.default_rng(7)
    x = rng.poisson(1.0, size=SHAPE).astype(float)
    measured = _measured(x, noise=2.0, seed=3)
    triples = list(combinations(range(4), 3))
    cubes = np.concatenate([_margin(x, c) for c in triples]) + 3.0 * rng.standard_normal(108)
    weight = 0.2 + rng.random(108)
    # with the estimate's tables, the 1-way tables weigh their margin factors more
    factors = margin_factors(SHAPE, measured)
    assert all(f > 1.0 for f in factors.values()) and len(factors) == 4
    weighted = {q: (t, w * factors[q[0]] if len(q) == 1 else w)
                for q, (t, w) in measured.items()}
    reference = _clarabel(SHAPE, weighted, int(x.sum()), cubes, weight)
    fit = fit_three_way(SHAPE, measured, total=int(x.sum()), iterations=5_000,
                        tolerance=1e-9, cubes=cubes, cube_weight=weight)
    assert fit.converged and fit.with_estimate
    gap = max(np.abs(fit.tables[q] - reference[q]).max() for q in measured)
    assert gap <= 1e-4, gap
    without = _clarabel(SHAPE, measured, int(x.sum()))
    # the 3-way cells move the optimum
    assert max(np.abs(without[q] - reference[q]).max() for q in measured) >= 0.1


def test_kronecker_cubes_are_the_least_squares_estimates_3_way_tables() -> None:
    rng = np.random.default_rng(4)
    factors = [Dense(np.triu(1.0 + rng.random((n, n)))) for n in (2, 3, 2, 3)]
    strategy = Kron(factors)
    y = rng.standard_normal(strategy.shape[0])
    cubes, weights = kronecker_cubes(strategy, y, 2.5, [0, 1, 2, 3])
    estimate = np.linalg.solve(np.asarray(strategy.dense()), y).reshape(2, 3, 2, 3)
    expected = np.concatenate([_margin(estimate, c) for c in combinations(range(4), 3)])
    np.testing.assert_allclose(cubes, expected, rtol=0, atol=1e-10)
    # each cell's variance: 2.5 times the estimate's covariance summed over the cell
    covariance = 2.5 * np.linalg.inv(np.asarray(strategy.dense()).T
                                     @ np.asarray(strategy.dense()))
    first = np.zeros((2, 3, 2, 3))
    first[0, 0, 0, :] = 1.0  # the first cell of the table over (0, 1, 2)
    assert weights[0] == pytest.approx(1.0 / (first.reshape(-1) @ covariance
                                              @ first.reshape(-1)), rel=1e-10)
    assert kronecker_cubes(strategy, y, np.array([1.0, 2.0]), [0, 1, 2, 3]) is None


def _assert_cubes_of_least_squares(strategy: Kron, y: np.ndarray) -> None:
    """``kronecker_cubes`` of a 3 x 2 x 4 x 2 domain are the 3-way tables of ``A^+ y``."""
    cubes, _ = kronecker_cubes(strategy, y, 1.0, [0, 1, 2, 3])
    estimate = np.linalg.lstsq(np.asarray(strategy.dense()), y, rcond=None)[0]
    expected = np.concatenate([_margin(estimate.reshape(3, 2, 4, 2), c)
                               for c in combinations(range(4), 3)])
    np.testing.assert_allclose(cubes, expected, rtol=0, atol=1e-10)


def test_kronecker_cubes_of_tall_factors_are_the_least_squares_estimates_3_way_tables() -> None:
    # more measurements than cells along every axis (each cube axis mapped from the
    # factor's rows to its columns): still the 3-way tables of A^+ y
    rng = np.random.default_rng(6)
    strategy = Kron([Dense(np.vstack([np.eye(n), np.triu(0.5 + rng.random((n, n)))]))
                     for n in (3, 2, 4, 2)])
    y = rng.standard_normal(strategy.shape[0])
    _assert_cubes_of_least_squares(strategy, y)


def test_kronecker_cubes_with_identity_factors_are_the_estimates_3_way_tables() -> None:
    # an identity factor's axis is left as it is (no product): the same tables; with every
    # factor an identity, y's own 3-way sums
    rng = np.random.default_rng(9)
    strategy = Kron([Dense(np.eye(3)), Dense(np.triu(1.0 + rng.random((2, 2)))),
                     Dense(np.eye(4)),
                     Dense(np.vstack([np.eye(2), np.triu(0.5 + rng.random((2, 2)))]))])
    y = rng.standard_normal(strategy.shape[0])
    _assert_cubes_of_least_squares(strategy, y)
    plain = Kron([Dense(np.eye(n)) for n in (3, 2, 4, 2)])
    cubes, _ = kronecker_cubes(plain, y[:48], 1.0, [0, 1, 2, 3])
    sums = np.concatenate([_margin(y[:48].reshape(3, 2, 4, 2), c)
                           for c in combinations(range(4), 3)])
    np.testing.assert_allclose(cubes, sums, rtol=1e-14, atol=1e-14)


def test_a_pseudo_inverse_through_the_gram_is_the_svds_where_it_is_well_conditioned() -> None:
    rng = np.random.default_rng(8)
    for factor in (rng.random((85, 85)) + 3 * np.eye(85), rng.random((9, 4)),
                   np.triu(1.0 + rng.random((5, 5)))):
        inverse = pseudo_inverse(factor)
        reference = np.linalg.pinv(factor)
        gap = float(np.abs(inverse - reference).max() / np.abs(reference).max())
        assert 0.0 <= gap <= 1e-12, gap
        assert inverse.flags.c_contiguous
        np.testing.assert_allclose(inverse @ factor, np.eye(factor.shape[1]), atol=1e-12)
    # ill-conditioned (Gram condition 1e10), rank-deficient or wide: the SVD's, bit for bit
    for factor in (np.diag([1.0, 1e-5]), np.ones((3, 3)), rng.random((4, 7))):
        assert np.array_equal(pseudo_inverse(factor), np.linalg.pinv(factor))
    assert np.abs(pseudo_inverse(np.diag([1.0, 1e-5])) - np.diag([1.0, 1e5])).max() <= 1e-6


DOMAIN = Domain.from_sizes([3, 2, 4, 2])
WORKLOAD = Workload.marginals(DOMAIN, upto=2)


def test_noise_free_answers_return_the_datas_tables() -> None:
    rng = np.random.default_rng(5)
    x = rng.poisson(2.0, size=DOMAIN.size).astype(float)
    x[rng.random(DOMAIN.size) < 0.5] = 0.0
    answers = WORKLOAD.answer(x)
    cubes = np.concatenate([_margin(x.reshape(DOMAIN.shape), c)
                            for c in combinations(range(4), 3)])
    fitted = fit_marginals(WORKLOAD, answers, np.ones(answers.size), total=int(x.sum()),
                           three_way=True, cubes=(cubes, np.ones(cubes.size)))
    assert fitted.three_way is not None and fitted.three_way.with_estimate
    for term in WORKLOAD.terms:
        if term.attrs:
            np.testing.assert_array_equal(fitted.tables[term.attrs].reshape(-1),
                                          _margin(x.reshape(DOMAIN.shape), term.attrs))


#: The index's operators kept as other sparse forms since the digests were pinned (the lift
#: written column by column, the (c, a) and triple sums Sa, S0 stacked as the rows of Q, the
#: transposes as CSC views): pinned by their dense entries; and the operators added since
#: (where each pair starts, G and its weights: checked against their definitions).
REWRITTEN = ("lift", "Q", "QT", "PT", "endsT", "pair_starts", "G", "GT", "q_weight",
             "q_sign")


def _index_digest(system) -> str:
    """SHA-256 of every array and sparse matrix (structure and entries) of a fit's index,
    but :data:`REWRITTEN`."""
    digest = hashlib.sha256()
    for name in sorted(vars(system)):
        if name in REWRITTEN:
            continue
        value = getattr(system, name)
        if sp.issparse(value):
            parts = [value.indptr.astype(np.int64), value.indices.astype(np.int64),
                     value.data.astype(np.float64)]
        elif isinstance(value, np.ndarray):
            parts = [value.astype(np.float64 if value.dtype.kind == "f" else np.int64)]
        else:
            continue
        digest.update(name.encode())
        for part in parts:
            digest.update(np.ascontiguousarray(part).tobytes())
    return digest.hexdigest()


@pytest.mark.parametrize(("shape", "measured", "expected", "lift", "stacked"), [
    ((3, 4, 2, 5), (*combinations(range(4), 2), *((a,) for a in range(4))),
     "317a658be734e53cd765d1644ddf2a310785143fe1a8127f11b281eb195f3ebf",
     "2a577363c2076f3e9529fd1d0bdc8b69ba1d5ba035782a84f4419ddb9850e1ac",
     "9ee6e360236ae50a081e9f4fbfda25cd318b33de8cc948bf8423f3132f4363dd"),
    ((2, 3, 4, 2, 3), ((0, 1), (0, 3), (1, 2), (2, 4), (3, 4), (0,), (2,), (4,), ()),
     "c0c2ef72699bb10e067620e48255b972aa335ae456826c11154350f3fffaedaa",
     "a2521d8670eb1584aba77199dde7f960426fb4f041586ae285eaca06213765be",
     "07722260adc9aee3ac6a474fe5f6974cf889d740c1ff73d2ae44c821898c1593"),
    ((1, 3, 1, 2), ((0, 1), (0, 2), (1, 3), (2, 3), (1,), ()),
     "8c75e461233f9b6125d746ed4459772b1b36850485a55327cfb5146d64e2658c",
     "87612b96bc1cdf2cd101df7d79d2c0d3377b9bcc299a623d4303d593484c422c",
     "2291683ae94c3c7ab3502ba8e27f8c757a5123cc14fa3aa27801b71d72a3cb6a"),
])
def test_the_fits_index_is_the_one_built_triple_by_triple(shape, measured, expected, lift,
                                                          stacked) -> None:
    # the digests of the index the per-triple construction built (main at 2a4b87d, every
    # operator but the rewritten ones; the lift's dense entries, and Sa's stacked on S0's):
    # every sparse operator has the same entries, each row's in the same order, so every
    # sum is the same
    clear_cache()
    attrs = tuple(range(len(shape)))
    system = fit_index(shape, attrs, measured)
    assert system.PT.shape == (three_way_cells(shape, list(attrs)), system.P.shape[0])
    assert _index_digest(system) == expected
    assert hashlib.sha256(system.lift.toarray().tobytes()).hexdigest() == lift
    assert hashlib.sha256(system.Q.toarray().tobytes()).hexdigest() == stacked
    assert system.Q.has_sorted_indices
    assert system.pair_starts.tolist() == [system.offset[p] for p in system.pairs]
    # G sums every (c, p), (c, a) entry and triple onto its component, times 1 / its cells
    rng = np.random.default_rng(4)
    d1, q = rng.random(system.P.shape[0]), rng.random(system.Q.shape[0])
    n_pairs, n_single, n_ca = system.n_pairs, system.n_single, system.n_ca
    np.testing.assert_array_equal(system.G @ np.concatenate([d1, q]), np.concatenate([
        np.bincount(system.cp_to_pair, weights=d1 * system.cp_inv, minlength=n_pairs),
        np.bincount(system.ca_to_single, weights=q[:n_ca] * system.ca_inv,
                    minlength=n_single),
        [sum(q[n_ca:] * system.c_inv)]]))
    np.testing.assert_array_equal(system.GT.toarray(), system.G.toarray().T)
    assert system.q_sign.tolist() == [-1.0] * n_ca + [1.0] * (q.size - n_ca)
    for transposed, operator in [("PT", "P"), ("QT", "Q"), ("endsT", "ends")]:
        np.testing.assert_array_equal(getattr(system, transposed).toarray(),
                                      getattr(system, operator).toarray().T)
        assert getattr(system, transposed).format == "csc"  # rows summed in column order
    # and its products are what the definitions say: each 3-way cell's three 2-way sums
    x = np.random.default_rng(1).random(system.PT.shape[0])
    d1 = system.P @ x
    start = 0
    for c in combinations(attrs, 3):
        cube = x[start:start + math.prod(shape[a] for a in c)].reshape([shape[a] for a in c])
        start += cube.size
        sums = np.concatenate([cube.sum(axis=2 - i).reshape(-1) for i in range(3)])
        np.testing.assert_allclose(d1[:sums.size], sums, rtol=1e-12, atol=0)
        d1 = d1[sums.size:]


PINNED = Domain.from_spec({
    "age": {"bin_edges": [0, 20, 40, 60, 80], "kind": "numeric"},
    "sex": {"labels": ["female", "male"]},
    "race": {"labels": ["a", "b", "c"]},
    "region": {"labels": ["north", "east", "south", "west", "centre"]},
})


def _pinned_release():
    """A seeded release of PINNED's 1- and 2-way marginals through a Kronecker strategy."""
    rng = np.random.default_rng(28)
    x = rng.poisson(3.0, size=PINNED.size).astype(float)
    x[rng.random(PINNED.size) < 0.4] = 0.0
    strategy = Kron([Dense(np.vstack([np.eye(n), np.triu(0.5 + rng.random((n, n)))]))
                     for n in PINNED.shape])
    y = strategy.matvec(x) + 2.0 * rng.standard_normal(strategy.shape[0])
    workload = Workload.marginals(PINNED, upto=2)
    inverse = np.linalg.pinv(np.asarray(strategy.dense()))
    w = np.asarray(workload.matrix.dense())
    variance = 4.0 * np.einsum("ij,jk,ik->i", w, inverse @ inverse.T, w)
    return x, workload, strategy, y, w @ (inverse @ y), variance


def test_a_first_and_a_repeated_release_publish_the_pinned_tables() -> None:
    # pinned from main at 2a4b87d (index built triple by triple, labels inferred by pandas):
    # a faster first release must publish the very same counts and fit the same floats
    x, workload, strategy, y, raw, variance = _pinned_release()
    total = int(x.sum())
    assert total == 250
    for _ in range(2):  # a first release (caches emptied), then a repeated one
        forget_workloads()
        tables = publishable_tables(workload, strategy=strategy, measurements=y,
                                    noise_variances=4.0, total=total,
                                    per_query_variance=variance, raw=raw,
                                    fit_space="three-way")
        assert list(tables.frames) == ["total", "age", "sex", "race", "region", "age x sex",
                                       "age x race", "age x region", "sex x race",
                                       "sex x region", "race x region"]
        counts = np.concatenate([f["estimate"].to_numpy() for f in tables.frames.values()])
        assert counts.size == 86 and counts.sum() == 11 * 250
        assert int(np.sum(np.arange(1, 87) * counts)) == 82362
        assert tables.frames["age"]["estimate"].tolist() == [64, 83, 56, 47]
        assert tables.frames["age x sex"]["estimate"].tolist() == [30, 34, 42, 41, 34, 22,
                                                                   23, 24]
        assert tables.frames["race x region"]["estimate"].tolist() == [
            30, 5, 6, 16, 22, 21, 20, 7, 21, 20, 23, 17, 8, 16, 18]
        region = tables.frames["age x region"]
        assert [str(d) for d in region.dtypes] == ["str", "str", "int64", "float64"]
        assert region["age"].tolist()[:6] == ["0-19"] * 5 + ["20-39"]
        assert region["region"].tolist()[:6] == ["north", "east", "south", "west", "centre",
                                                 "north"]
    cubes = kronecker_cubes(strategy, y, 4.0, [0, 1, 2, 3])
    fit = fit_marginals(workload, raw, variance, total=total, three_way=True, cubes=cubes)
    assert fit.three_way is not None and fit.three_way.iterations == 10
    floats = fit.three_way.tables
    values = np.concatenate([floats[q] for q in sorted(floats, key=lambda q: (len(q), q))])
    assert values.size == 86
    assert float(np.sum(np.sin(np.arange(86)) * values)) == pytest.approx(98.64017400575915,
                                                                          rel=1e-12)
    np.testing.assert_allclose(floats[(0, 3)][:6], [
        22.051004686528884, 10.826582188168487, 11.024592124183684, 11.572587653637873,
        8.982155159482518, 26.603928799717167], rtol=1e-12, atol=0)


def _reference_admm(shape, measured, total, cubes=None, cube_weight=0.0, iterations=10,
                    tolerance=1e-7):
    """The ADMM as written before v's one-vector update (main at 49dd9cd): explicit copy z
    and scaled dual u, x-step, relaxation, clipping and dual update pass by pass."""
    if cubes is not None:
        factors = margin_factors(shape, measured)
        measured = {q: (t, w * factors[q[0]]) if len(q) == 1 else (t, w)
                    for q, (t, w) in measured.items()}
    attrs = sorted({a for key in measured for a in key})
    system = fit_index(tuple(shape), tuple(attrs),
                       tuple(sorted(measured, key=lambda q: (-len(q), q))))
    targets = np.concatenate([measured[q][0] for q in system.measured]).astype(float)
    weights = np.concatenate([measured[q][1] for q in system.measured]).astype(float)
    rho = float(weights.mean())
    relax = 1.6
    pull, cell, target = None, 1.0, 0.0
    if cubes is None:
        start = np.repeat(system.triple_totals(total), system.triple_sizes)
        x, m = system.consistent(start, targets, 1e6, total)
    else:
        x, m = system.consistent(cubes, targets, 1.0, total)
        cells = np.broadcast_to(np.asarray(cube_weight, dtype=float), cubes.shape)
        omega = np.add.reduceat(cells, system.triple_starts) / system.triple_sizes
        share = omega / (omega + rho)
        keep = 1.0 - share
        pull = Pull(np.repeat(keep, system.cp_sizes) * system.cp_inv,
                    np.concatenate([np.repeat(keep, system.ca_sizes), keep]) * system.q_weight)
        cell = np.repeat(keep, system.triple_sizes)
        target = np.repeat(share, system.triple_sizes) * (cubes - system.pair_part(cubes))
    z, u = np.clip(x, 0.0, None), np.zeros_like(x)
    y, s = targets.copy(), np.zeros_like(targets)
    scale = max(float(total), float(np.abs(targets).max()), 1.0)
    for done in range(1, iterations + 1):
        w = z - u
        alpha, m = system.agree(w, y - s, 1.0, total, pull)
        x = system.PT @ alpha + cell * w + target
        mm = m[system.measured_cells]
        xh = relax * (x - z) + z + u
        mh = relax * mm + (1 - relax) * y
        z_old, y_old = z, y
        z = np.maximum(xh, 0.0)
        u = xh - z
        y = (weights * targets + rho * (mh + s)) / (weights + rho)
        s += mh - y
        if done % 10 == 0:
            primal = math.sqrt(float(np.dot(x - z, x - z)) + float(np.dot(mm - y, mm - y)))
            dual = math.sqrt(float(np.dot(z - z_old, z - z_old))
                             + float(np.dot(y - y_old, y - y_old)))
            if max(primal, dual) <= tolerance * scale * math.sqrt(z.size):
                return system.tables(m), done, True
    return system.tables(m), iterations, False


@pytest.mark.parametrize(("with_cubes", "iterations", "tolerance", "stops"), [
    (False, 10, 1e-12, 10), (True, 10, 1e-12, 10), (False, 200, 1e-6, 10),
    (True, 200, 1e-6, 30)])
def test_the_one_vector_admm_is_the_pass_by_pass_one(with_cubes, iterations, tolerance,
                                                     stops) -> None:
    # z - u = |v| exactly and the relaxed step is affine in |v| and v: the same iterates up
    # to round-off (the published counts of the benchmark's cases are unchanged)
    shape = (4, 3, 5, 2, 3)
    rng = np.random.default_rng(11)
    x = rng.poisson(1.5, size=shape).astype(float)
    x[rng.random(shape) < 0.5] = 0.0
    measured = _measured(x, 1.5, seed=3)
    cubes = weight = None
    if with_cubes:
        cubes = np.concatenate([_margin(x, c) for c in combinations(range(5), 3)])
        cubes = cubes + rng.standard_normal(cubes.size)  # negative cells: clipping matters
        weight = 0.2 + rng.random(cubes.size)
    clear_cache()
    fit = fit_three_way(shape, measured, total=int(x.sum()), cubes=cubes,
                        cube_weight=0.0 if weight is None else weight,
                        iterations=iterations, tolerance=tolerance)
    reference, done, converged = _reference_admm(shape, measured, int(x.sum()), cubes, weight,
                                                 iterations, tolerance)
    assert fit.iterations == done == stops
    assert fit.converged == converged == (stops < iterations)
    assert set(fit.tables) == set(reference)
    for q, table in reference.items():
        np.testing.assert_allclose(fit.tables[q], table, rtol=1e-12, atol=1e-10)
