"""QuerySmasher's symmetry reduction (``residual/symmetry.py``) on a small census-shaped
workload: the reduced SDPs reach the dense SDPs' optimum, the block strategy is the strategy
its operators claim, and the planner gives the same plan either way."""

from __future__ import annotations

import numpy as np
import pytest

import engine.mechanisms.residual.subsolvers as subsolvers
from engine.linalg.pinv import psd_pinv
from engine.linalg.twins import twin_classes
from engine.mechanisms import get
from engine.mechanisms.residual.decomposition import decompose, piece_gram
from engine.mechanisms.residual.optimal import solve_optimal
from engine.mechanisms.residual.symmetry import SymmetricProblem, solve_symmetric
from engine.scenario import Scenario
from engine.workloads.blocks import AllRangeBlock, IdentityBlock, PrefixBlock

RACES = 8  # three race flags as a bit mask, as SF1's 64 codes
AGES = 12


def _indicators(n: int, predicates: list) -> list[list[int]]:
    return [[1 if p(c) else 0 for c in range(n)] for p in predicates]


def census_like() -> dict:
    """SF1 in miniature: sex, Hispanic origin, race codes and age, with SF1's kinds of
    factors (one-race indicators, every race code with counts by number of races, age bins,
    single years with a top bin, adults)."""
    pop = lambda c: bin(c).count("1")  # noqa: E731
    race1 = _indicators(
        RACES, [*(lambda c, i=i: c == 2**i for i in range(3)), lambda c: pop(c) != 1]
    )
    race2 = _indicators(
        RACES,
        [
            *(lambda c, v=v: c == v for v in range(1, RACES)),
            *(lambda c, k=k: pop(c) == k for k in range(1, 4)),
        ],
    )
    bins = _indicators(AGES, [lambda a: a < 2, lambda a: 2 <= a < 5, lambda a: a >= 5])
    years = _indicators(AGES, [*(lambda a, y=y: a == y for y in range(9)), lambda a: a >= 9])
    adult = _indicators(AGES, [lambda a: a >= 4])

    def m(rows: list[list[int]]) -> dict:
        return {"block": "matrix", "rows": rows}

    products = [
        {"sex": "total"},
        {"race": m(race1)},
        {"hispanic": "identity", "race": m(race1)},
        {"race": m(race2), "age": m(adult)},
        {"hispanic": m([[0, 1]]), "race": m(race2), "age": m(adult)},
        {"sex": "identity", "race": m(race1), "age": m(bins)},
        {"sex": "identity_total", "hispanic": m([[1, 0]]), "age": m(bins)},
        {"sex": "identity", "race": m(race1), "age": m(years)},
        {"sex": "identity", "hispanic": m([[0, 1]]), "race": m([[0, 1] + [0] * 6]), "age": m(bins)},
    ]
    return {
        "domain": {
            "sex": 2,
            "hispanic": 2,
            "race": RACES,
            "age": {"size": AGES, "kind": "numeric"},
        },
        "workload": [{"product": p} for p in products],
        "privacy": {"noise": "gaussian", "epsilon": 1.0, "delta": 1e-6},
    }


@pytest.fixture(scope="module")
def decomposition():
    return decompose(Scenario.from_spec(census_like()).workload)


def residual_gram(res, store) -> np.ndarray:
    G = sum(c * piece_gram(store, kind, keys) for (kind, keys), (c, _) in res.pieces.items())
    return G / res.trace


def test_twin_classes_of_the_usual_blocks() -> None:
    # identity plus total: every value is a twin of every other
    assert twin_classes([np.eye(5) + 1.0]).tolist() == [0, 0, 0, 0, 0]
    # prefixes and ranges: no twins
    assert twin_classes([PrefixBlock(6).gram_array()]).tolist() == list(range(6))
    assert twin_classes([AllRangeBlock(5).gram_array()]).tolist() == list(range(5))
    # bins {0,1}, {2,3,4}; with single years 0..3 as well, 4 (no single year) leaves its bin
    bins = np.array([[1, 1, 0, 0, 0], [0, 0, 1, 1, 1]], dtype=float)
    assert twin_classes([bins.T @ bins]).tolist() == [0, 0, 1, 1, 1]
    single = np.array(
        [[1, 0, 0, 0, 0], [0, 1, 0, 0, 0], [0, 0, 1, 0, 0], [0, 0, 0, 1, 0]], dtype=float
    )
    assert twin_classes([bins.T @ bins, single.T @ single]).tolist() == [0, 0, 1, 1, 2]
    assert twin_classes([IdentityBlock(3).gram_array()]).tolist() == [0, 0, 0]


def test_reduced_sdps_reach_the_dense_optimum(decomposition) -> None:
    store = decomposition.store
    reduced = 0
    for res in decomposition:
        if res.single_kron() is not None:
            continue
        problem = SymmetricProblem.build(res, store)
        if problem is None:
            continue
        reduced += 1
        assert problem.constraints < res.cells
        sol = solve_symmetric(problem)
        dense = solve_optimal(residual_gram(res, store))
        assert sol.gap < 1e-9 and dense.gap < 1e-9
        assert sol.lower <= sol.loss * (1.0 + 1e-12)  # a certificate, up to round-off
        assert sol.loss == pytest.approx(dense.loss, rel=1e-9, abs=0)
    # every joint residual here has twins (sex, Hispanic origin, race codes, age bins)
    assert reduced >= 6


def test_block_strategy_is_what_its_operators_say(decomposition) -> None:
    store = decomposition.store
    res = decomposition.residuals[(0, 2, 3)]  # sex x race x age: 192 cells
    problem = SymmetricProblem.build(res, store)
    assert problem is not None and problem.constraints < res.cells
    sol = solve_symmetric(problem)
    sub = sol.mechanism
    c = res.cells
    B = np.stack([sub.release(e) for e in np.eye(c)], axis=1)  # explicit strategy
    assert B.shape == (sub.outputs, c)
    V = B.T @ B
    np.testing.assert_allclose(sub.diag_v().reshape(-1), np.diag(V), atol=1e-12)
    assert float(np.diag(V).max()) == pytest.approx(1.0, abs=1e-12)
    G = residual_gram(res, store)
    Vdag = psd_pinv(V, rcond=1e-12)
    assert float(np.trace(G @ Vdag)) == pytest.approx(sol.loss, rel=1e-9)
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal(c), rng.standard_normal(sub.outputs)
    # adjoint, pseudo-inverse and V^+ agree with the explicit matrices
    assert float(w @ sub.release(x)) == pytest.approx(
        float(x @ sub.release_adjoint(w).reshape(-1)), rel=1e-12
    )
    np.testing.assert_allclose(
        sub.estimate(w).reshape(-1), np.linalg.pinv(B) @ w, atol=1e-9 * np.abs(w).max()
    )
    X = rng.standard_normal((c, 3))
    np.testing.assert_allclose(sub.vdag_apply(X), Vdag @ X, atol=1e-9 * np.abs(Vdag @ X).max())
    # structured quadratic forms and traces
    factors = [rng.standard_normal((k, d)) for k, d in zip((2, 3, 4), res.sizes, strict=True)]
    rows = np.kron(np.kron(factors[0], factors[1]), factors[2])
    np.testing.assert_allclose(
        sub.quad_product(factors).reshape(-1), np.einsum("ij,jk,ik->i", rows, Vdag, rows), rtol=1e-9
    )
    grams = [F.T @ F for F in factors]
    G3 = np.kron(np.kron(grams[0], grams[1]), grams[2])
    assert sub.trace_kron(grams) == pytest.approx(float(np.trace(G3 @ Vdag)), rel=1e-9)


def methods(plan) -> set[str]:
    return {r["method"] for r in plan.view("residual_table").records()}


def test_planner_gives_the_dense_paths_plan(monkeypatch) -> None:
    scenario = Scenario.from_spec(census_like())
    plan = get("querysmasher").plan(scenario.workload, scenario.privacy)
    assert "symmetric" in methods(plan)
    monkeypatch.setattr(subsolvers.SymmetricProblem, "build", lambda res, store: None)
    dense = get("querysmasher").plan(scenario.workload, scenario.privacy)
    assert "symmetric" not in methods(dense) and "dense" in methods(dense)
    assert plan.rmse() == pytest.approx(dense.rmse(), rel=1e-9)
    np.testing.assert_allclose(plan.unit_variances(), dense.unit_variances(), rtol=1e-8)
