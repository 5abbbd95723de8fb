"""The SVD lower bound: explicit, Kronecker, marginal and shared-factor forms, in every unit."""

from __future__ import annotations

import itertools
import math

import pytest

from engine.analysis.svd_bound import Bound, svd_bound, svd_bound_explicit, svd_bound_factor
from engine.domain import Domain
from engine.linalg.residuals import privacy_factor
from engine.privacy import Privacy
from engine.scenario import Scenario
from engine.workloads import AllRangeBlock, PrefixBlock, WidthRangeBlock, Workload

LAPLACE = Privacy(noise="laplace", epsilon=1.0)
GAUSS = Privacy(noise="gaussian", epsilon=1.0, delta=1e-6)
COST1 = Privacy(noise="zcdp", rho=0.5)  # ResidualPlanner / QuerySmasher "privacy cost 1"
CPS = [50, 100, 7, 4, 2]
ADULT = [100, 100, 100, 99, 85, 42, 16, 15, 9, 7, 6, 5, 2, 2]


def test_raw_values_r4() -> None:
    assert svd_bound_factor(PrefixBlock(4)) == pytest.approx(6.411474, abs=1e-6)
    assert svd_bound_factor(AllRangeBlock(4)) == pytest.approx(16.312243, abs=1e-6)
    assert svd_bound_factor(PrefixBlock(8)) == pytest.approx(16.551386, abs=1e-6)
    assert svd_bound_factor(AllRangeBlock(8)) == pytest.approx(79.172339, abs=1e-6)
    assert svd_bound_explicit(AllRangeBlock(8).gram_array()) == pytest.approx(79.172339,
                                                                               abs=1e-6)


@pytest.mark.parametrize("block,lap,gau", [(AllRangeBlock(64), 3.22, 9.62),
                                           (PrefixBlock(64), 2.89, 8.62),
                                           (WidthRangeBlock(64, 32), 2.75, 8.23),
                                           (AllRangeBlock(4096), 5.82, 17.38)])
def test_one_dimensional_bounds_as_rmse(block, lap: float, gau: float) -> None:
    W = Workload.one_dim(block)
    b = svd_bound(W)
    assert b.method == "kronecker"
    assert b.rmse(W, LAPLACE) == pytest.approx(lap, abs=0.005)
    assert b.rmse(W, GAUSS) == pytest.approx(gau, abs=0.005)


def test_kronecker_bound_factorises() -> None:
    d = Domain.from_sizes([5, 6], kinds=["numeric", "numeric"])
    W = Workload.product(d, {"a1": PrefixBlock(5), "a2": AllRangeBlock(6)}, weight=2.0)
    b = svd_bound(W)
    assert b.method == "kronecker"
    assert b.value == pytest.approx(4 * svd_bound_factor(PrefixBlock(5))
                                    * svd_bound_factor(AllRangeBlock(6)), rel=1e-12)
    assert b.value == pytest.approx(svd_bound_explicit(W.gram().dense()), rel=1e-10)


def test_marginal_bound_equals_explicit() -> None:
    d = Domain.from_sizes([2, 3, 4])
    W = Workload.marginals(d, sets=[["a1"], ["a2"], ["a3"], ["a1", "a2"], ["a1", "a3"],
                                    ["a2", "a3"]])
    b = svd_bound(W)
    assert b.method == "marginals"
    assert b.value == pytest.approx(85.842331, abs=1e-6)
    assert b.value == pytest.approx(svd_bound_explicit(W.gram().dense()), rel=1e-10)
    # QuerySmasher R4: RP = global optimum = 85.842330816576, RMSE 1.566090043175 at cost 1
    assert b.value == pytest.approx(85.842330816576, rel=1e-12)
    assert b.rmse(W, COST1) == pytest.approx(1.566090043175, rel=1e-11)


def test_shared_factor_bound() -> None:
    spec = {"domain": {"a": {"size": 5, "kind": "numeric"}, "b": {"size": 6, "kind": "numeric"},
                       "c": 3, "d": 2},
            "workload": [{"prefix_marginals": {"sets": [["a", "b"], ["a", "b", "c"],
                                                        ["a", "b", "c", "d"]]}}]}
    W = Scenario.from_spec(spec).workload
    b = svd_bound(W)
    assert b.method == "kronecker-marginals"
    assert b.value == pytest.approx(svd_bound_explicit(W.gram().dense()), rel=1e-10)
    spec["workload"] = [{"product": {"a": "prefix", "c": "prefix"}},
                        {"product": {"a": "prefix", "c": "all_range", "d": "identity"}}]
    spec["domain"]["c"] = {"size": 3, "kind": "numeric"}
    W = Scenario.from_spec(spec).workload
    b = svd_bound(W)
    assert (b.method, b.kind) == ("kronecker-blocks", "exact")
    assert b.value == pytest.approx(svd_bound_explicit(W.gram().dense()), rel=1e-10)


def test_no_bound_without_structure() -> None:
    d = Domain.from_sizes([100, 100], kinds=["numeric", "numeric"])
    spec = {"domain": {"a1": {"size": 100, "kind": "numeric"},
                       "a2": {"size": 100, "kind": "numeric"}},
            "workload": [{"product": {"a1": "prefix"}}, {"affine": ["a1", "a2"]}]}
    W = Scenario.from_spec(spec).workload
    b = svd_bound(W)
    assert b == Bound(None, "none", "no closed form for this union of 2 terms and the domain "
                                    "(10,000 cells) is too large for an explicit "
                                    "eigendecomposition (limit 8,192)")
    assert (b.rmse(W, GAUSS), b.kind) == (None, "none")
    # a union of products with no symmetry: a block of 10,000 cells and 5,150 queries, over
    # the dense limit on both sides: a certified floor, the sum of the two terms' bounds (a
    # total factor has bound 1)
    W = Workload(d, Workload.product(d, {"a1": PrefixBlock(100)}).groups
                 + Workload.product(d, {"a2": AllRangeBlock(100)}).groups)
    b = svd_bound(W)
    assert (b.kind, b.floor_parts) == ("floor", ((1,), (0,)))
    assert b.value == pytest.approx(svd_bound_factor(PrefixBlock(100))
                                    + svd_bound_factor(AllRangeBlock(100)), rel=1e-12)
    small = Domain.from_sizes([10, 10], kinds=["numeric", "numeric"])
    W = Workload(small, Workload.product(small, {"a1": PrefixBlock(10)}).groups
                 + Workload.product(small, {"a2": AllRangeBlock(10)}).groups)
    b = svd_bound(W)
    assert (b.method, b.kind) == ("kronecker-blocks", "exact")
    assert b.value == pytest.approx(svd_bound_explicit(W.gram().dense()), rel=1e-10)


def test_bound_in_every_privacy_unit() -> None:
    W = Workload.one_dim(PrefixBlock(16))
    b = svd_bound(W)
    for p in (LAPLACE, GAUSS, COST1, Privacy(noise="laplace", epsilon=0.25)):
        assert b.rmse(W, p) == pytest.approx(p.sigma() * math.sqrt(b.value / 16), rel=1e-14)


def residual_planner_sse(ns: list[int], k: int) -> float:
    """ResidualPlanner's optimal sum of variances at privacy cost 1 for all k-way marginals
    (QuerySmasher spec 2.2): (sum over residuals of sqrt(v p))**2, written independently."""
    d = len(ns)
    targets = list(itertools.combinations(range(d), k))
    total = 0.0
    for size in range(k + 1):
        for tau in itertools.combinations(range(d), size):
            v = sum(math.prod(ns[i] - 1 for i in tau)
                    * math.prod(1.0 / ns[i] for i in a if i not in tau)
                    for a in targets if set(tau) <= set(a))
            total += math.sqrt(v * privacy_factor(tau, ns))
    return total**2


@pytest.mark.parametrize("ns,expected", [(CPS, (1.744, 2.035, 2.048)),
                                         (ADULT, (3.047, 6.359, 10.515))])
def test_residual_planner_unit_bounds(ns: list[int], expected: tuple[float, ...]) -> None:
    """All k-way marginals at rho = 0.5: the numbers are sqrt(SVDB / m) at sigma = 1, i.e. the
    RMSE of the optimal (ResidualPlanner) mechanism, which attains the SVD bound."""
    assert COST1.sigma() == 1.0
    d = Domain.from_sizes(ns)
    for k, value in zip((1, 2, 3), expected, strict=True):
        W = Workload.marginals(d, k=k)
        b = svd_bound(W)
        assert b.method == "marginals"
        assert b.rmse(W, COST1) == pytest.approx(math.sqrt(b.value / W.num_queries))
        assert round(b.rmse(W, COST1), 3) == value
        assert b.value == pytest.approx(residual_planner_sse(ns, k), rel=1e-10)


def test_table_6_7_bound_columns() -> None:
    cps = Workload.marginals(Domain.from_sizes(CPS), upto=5)
    b = svd_bound(cps)
    assert (round(b.rmse(cps, LAPLACE), 2), round(b.rmse(cps, GAUSS), 2)) == (2.63, 7.85)
    adult = Workload.marginals(Domain.from_sizes(ADULT), upto=3)
    b = svd_bound(adult)
    assert (round(b.rmse(adult, LAPLACE), 2), round(b.rmse(adult, GAUSS), 2)) == (15.08, 45.06)
    loans = Domain.from_sizes([101, 101, 101, 101, 3, 8, 36, 6, 51, 4, 5, 15])
    small = [s for k in range(13) for s in itertools.combinations(loans.names, k)
             if math.prod(loans[n].size for n in s) <= 5000]
    W = Workload.marginals(loans, sets=small)
    assert (len(small), W.num_queries) == (188, 279_751)
    b = svd_bound(W)
    assert (round(b.rmse(W, LAPLACE), 2), round(b.rmse(W, GAUSS), 2)) == (11.61, 34.67)
    prefix = {"a": {"size": 50, "kind": "numeric"}, "b": {"size": 100, "kind": "numeric"},
              "c": 7, "d": 4, "e": 2}
    sets = [["a", "b", *rest] for k in range(4) for rest in itertools.combinations("cde", k)]
    W = Scenario.from_spec({"domain": prefix,
                            "workload": [{"prefix_marginals": {"sets": sets}}]}).workload
    b = svd_bound(W)
    assert b.method == "kronecker-marginals"
    assert (round(b.rmse(W, LAPLACE), 2), round(b.rmse(W, GAUSS), 2)) == (9.32, 27.85)
