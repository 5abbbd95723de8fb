"""The SVD bound of unions of Kronecker products, block by block, against dense eigvalsh; and
the certified floor where the blocks are too large."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from engine.analysis.block_spectrum import attribute_pieces, gram_of, orbits
from engine.analysis.svd_bound import Bound, svd_bound, svd_bound_explicit, svd_bound_factor
from engine.privacy import Privacy
from engine.scenario import Scenario
from engine.workflows.compare import Comparison
from engine.workloads import IdentityTotalBlock, catalog
from explorer.pages.compare import bound_line

GAUSS = Privacy(noise="gaussian", epsilon=1.0, delta=1e-6)


def _indicators(n: int, predicates) -> dict:
    return {"block": "matrix", "rows": [[1 if p(c) else 0 for c in range(n)] for p in predicates]}


def sf1_like(races: int = 3, ages: int = 14, states: int = 0) -> dict:
    """SF1 persons scaled down: the same 33 products (catalog.SF1_PRODUCTS) over sex (2),
    hispanic (2), 2**races race codes and ages 0..ages-1 (age3: single years below 10, then
    2-year bins; age1: bins with edges 0, 3, 5, 8; adult: 5 and over), optionally per state."""
    codes = 2**races

    def count(c: int) -> int:
        return bin(c).count("1")

    blocks = {
        "race1": _indicators(codes, [*(lambda c, i=i: c == 2**i for i in range(races)),
                                     lambda c: count(c) != 1]),
        "race2": _indicators(codes, [*(lambda c, v=v: c == v for v in range(1, codes)),
                                     *(lambda c, k=k: count(c) == k
                                       for k in range(1, races + 1)),
                                     lambda c: count(c) >= 2]),
        "white": _indicators(codes, [lambda c: c == 1]),
        "isH": {"block": "matrix", "rows": [[1, 0]]},
        "notH": {"block": "matrix", "rows": [[0, 1]]},
        "adult": _indicators(ages, [lambda a: a >= 5]),
        "age1": _indicators(ages, [lambda a, lo=lo, hi=hi: lo <= a < hi
                                   for lo, hi in itertools.pairwise((0, 3, 5, 8, ages))]),
        "age3": _indicators(ages, [*(lambda a, y=y: a == y for y in range(10)),
                                   *(lambda a, lo=lo: lo <= a < lo + 2
                                     for lo in range(10, ages, 2))]),
        "I2": "identity",
        "IT2": "identity_total",
    }
    domain = {"sex": 2, "hispanic": 2, "race": codes, "age": {"size": ages, "kind": "numeric"}}
    if states:
        domain["state"] = states
    workload = []
    for factors, repeats in catalog.SF1_PRODUCTS:
        product = {a: blocks[f] for a, f in zip(catalog.SF1_ATTRIBUTES, factors, strict=True)
                   if f}
        if states:
            product["state"] = "identity_total"
        workload += [{"product": product or {"sex": "total"}} for _ in range(repeats)]
    return {"domain": domain, "workload": workload}


def workload_of(spec: dict, terms: list[int] | None = None):
    items = spec["workload"] if terms is None else [spec["workload"][j] for j in terms]
    return Scenario.from_spec({"domain": spec["domain"], "workload": items}).workload


def test_sf1_analogue_equals_dense_eigvalsh() -> None:
    W = workload_of(sf1_like())
    assert (W.domain.size, len(W.terms)) == (448, 33)
    b = svd_bound(W)
    assert (b.method, b.kind) == ("kronecker-blocks", "exact")
    assert b.value == pytest.approx(svd_bound_explicit(W.gram().dense()), rel=1e-9)
    # race codes 0..7: exchangeable are the non-white single races {2, 4} and the codes with
    # two races {3, 5, 6}; age: single years in the same age1 bin, and 8, 9 in the last one
    products = W.products()
    race = [gram_of(fs[2]) for _, fs in products]
    assert [o.tolist() for o in orbits(race)] == [[0], [1], [2, 4], [3, 5, 6], [7]]
    age = [gram_of(fs[3]) for _, fs in products]
    assert [o.tolist() for o in orbits(age)] == [[0, 1, 2], [3, 4], [5, 6, 7], [8, 9],
                                                 [10, 11], [12, 13]]
    sex = attribute_pieces([fs[0] for _, fs in products])  # marginal-like: total, residual
    assert [(p.multiplicity, p.dimension) for p in sex] == [(1, 1), (1, 1)]


def test_sf1_plus_analogue_equals_dense_eigvalsh() -> None:
    plain = svd_bound(workload_of(sf1_like(races=2, ages=12))).value
    W = workload_of(sf1_like(races=2, ages=12, states=3))
    assert W.domain.size == 2 * 2 * 4 * 12 * 3
    b = svd_bound(W)
    assert b.kind == "exact"
    assert b.value == pytest.approx(svd_bound_explicit(W.gram().dense()), rel=1e-9)
    # state has [I; T] in every product: it factors out (Thm. 5)
    assert b.value == pytest.approx(plain * svd_bound_factor(IdentityTotalBlock(3)), rel=1e-12)


def test_census_sf1_and_sf1_plus() -> None:
    """SF1 (29,440 cells, 33 products) exactly: 9079.620553267972 is the dense value from the
    eigenvalues of the 4,151 x 4,151 W W^T (numpy eigvalsh, 66 s on the benchmark machine).
    SF1+ asks each table per state and nationally: [I; T] on 51 states multiplies the bound by
    (sqrt(52) + 50)**2 / 51."""
    sf1 = svd_bound(catalog.workload("sf1"))
    assert (sf1.method, sf1.kind) == ("kronecker-blocks", "exact")
    assert sf1.value == pytest.approx(9079.620553267972, rel=1e-10)
    plus = svd_bound(catalog.workload("sf1_plus"))
    assert plus.kind == "exact"
    assert plus.value == pytest.approx(sf1.value * (math.sqrt(52) + 50) ** 2 / 51, rel=1e-12)


#: Factors with exchangeable values but no marginal-like Gram: columns 0, 1 swap rows 3 and 4;
#: columns 2..4 are identical (a zero residual).
SYMMETRIC5 = [[1, 1, 0, 0, 0], [0, 0, 1, 1, 1], [1, 0, 0, 0, 0], [0, 1, 0, 0, 0]]


def _random_factor(rng: np.random.Generator, n: int):
    choice = rng.integers(7)
    if choice == 0:
        return "identity"
    if choice == 1:
        return "total"
    if choice == 2:
        return "identity_total"
    if choice == 3:
        return "prefix"
    if choice == 4 and n == 5:
        return {"block": "matrix", "rows": SYMMETRIC5}
    rows = rng.integers(0, 2, size=(int(rng.integers(1, 5)), n))
    rows[0, 0] = 1  # never an all-zero factor
    return {"block": "matrix", "rows": (rows * rng.choice([1.0, 2.0, 0.5])).tolist()}


@pytest.mark.parametrize("seed", range(8))
def test_random_unions_equal_dense_eigvalsh(seed: int) -> None:
    rng = np.random.default_rng(seed)
    sizes = [int(n) for n in rng.choice([2, 3, 4, 5], size=3)]
    domain = {f"a{i}": {"size": n, "kind": "numeric"} for i, n in enumerate(sizes)}
    workload = []
    for _ in range(int(rng.integers(2, 6))):
        product = {f"a{i}": _random_factor(rng, n) for i, n in enumerate(sizes)
                   if rng.random() < 0.8}
        workload.append({"product": product or {"a0": "total"},
                         "weight": float(rng.choice([1.0, 2.0, 0.5]))})
    W = workload_of({"domain": domain, "workload": workload})
    b = svd_bound(W)
    assert b.kind == "exact"
    assert b.value == pytest.approx(svd_bound_explicit(W.gram().dense()), rel=1e-9)


def test_certified_floor_is_the_sum_of_exact_sub_bounds() -> None:
    spec = sf1_like()
    W = workload_of(spec)
    exact = svd_bound(W).value
    floor = svd_bound(W, dense_limit=12)
    assert floor.kind == "floor" and floor.method == "kronecker-blocks"
    parts = floor.floor_parts
    assert sorted(j for part in parts for j in part) == list(range(33))
    assert len(parts) >= 2 and max(len(p) for p in parts) > 1  # a part is a real union
    subs = [svd_bound(workload_of(spec, list(part)), dense_limit=12) for part in parts]
    assert all(s.kind == "exact" for s in subs)
    assert floor.value == pytest.approx(sum(s.value for s in subs), rel=1e-12)
    # SVDB is superadditive over a partition of the rows, so the floor sits under the bound
    # and over each part's bound (interlacing)
    assert max(s.value for s in subs) < floor.value < exact
    # parts for blocks of side <= 6 (the larger of the two greedy partitions here)
    assert floor.value / exact == pytest.approx(0.29724, abs=1e-5)
    assert "certified floor" in floor.reason


def test_floor_and_exact_wording_on_the_page() -> None:
    W = workload_of(sf1_like())
    exact = Comparison(W, GAUSS, svd_bound(W))
    assert bound_line(exact).startswith(f"**SVD lower bound:** {exact.bound_rmse:.4g} per "
                                        "count (exact): ")
    floor = Comparison(W, GAUSS, Bound(100.0, "kronecker-blocks", "...", ((0,), (1,))))
    assert floor.bound.kind == "floor"
    assert bound_line(floor).startswith(
        f"**SVD lower bound (certified floor):** {floor.bound_rmse:.4g} per count: the exact "
        "bound is too large to compute here")
    assert floor.to_json()["svd_bound_kind"] == "floor"
