"""HDMM Tables 4 and 5 (1-D baselines, Identity/H2/Wavelet/HB/SVDB), Table 3 / Example 15, and
the baseline columns of Tables 6 and 7."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from engine.analysis.svd_bound import svd_bound
from engine.domain import Domain
from engine.linalg.trees import haar, hb_branching, hierarchy
from engine.mechanisms import get
from engine.privacy import Privacy
from engine.scenario import Scenario
from engine.workloads import (
    AllRangeBlock,
    PermutedBlock,
    PrefixBlock,
    WidthRangeBlock,
    Workload,
)

LAPLACE = Privacy(noise="laplace", epsilon=1.0)
GAUSS = Privacy(noise="gaussian", epsilon=1.0, delta=1e-6)
COLUMNS = ("identity", "h2", "wavelet", "hb", "svdb")

#: (workload, n) -> (Identity, H2, Wavelet, HB, SVDB) for Table 4 (Laplace), Table 5 (Gaussian).
TABLE4 = {
    ("all-range", 64): (6.63, 11.28, 10.11, 6.63, 3.22),
    ("all-range", 256): (13.11, 16.27, 14.87, 8.90, 4.07),
    ("all-range", 1024): (26.15, 21.83, 20.26, 12.82, 4.94),
    ("prefix", 64): (8.06, 9.42, 9.37, 8.06, 2.89),
    ("prefix", 256): (16.03, 13.16, 13.09, 8.97, 3.50),
    ("prefix", 1024): (32.02, 17.29, 17.20, 12.87, 4.11),
    ("width32", 64): (8.00, 12.02, 11.09, 8.00, 2.75),
    ("width32", 256): (8.00, 15.50, 13.57, 7.41, 3.26),
    ("width32", 1024): (8.00, 18.98, 16.56, 9.50, 3.36),
    ("permuted", 64): (6.63, 25.02, 18.97, 6.63, 3.22),
    ("permuted", 256): (13.11, 66.25, 49.09, 18.48, 4.07),
    ("permuted", 1024): (26.15, 157.50, 117.06, 37.07, 4.94),
}
TABLE5 = {
    ("all-range", 64): (19.82, 12.74, 11.42, 19.82, 9.62),
    ("all-range", 256): (39.18, 16.20, 14.81, 18.80, 12.15),
    ("all-range", 1024): (78.13, 19.66, 18.24, 27.07, 14.75),
    ("prefix", 64): (24.08, 10.64, 10.58, 24.08, 8.62),
    ("prefix", 256): (47.89, 13.11, 13.03, 18.95, 10.44),
    ("prefix", 1024): (95.64, 15.57, 15.49, 27.18, 12.29),
    ("width32", 64): (23.90, 13.57, 12.52, 23.90, 8.23),
    ("width32", 256): (23.90, 15.44, 13.52, 15.65, 9.73),
    ("width32", 1024): (23.90, 17.10, 14.92, 20.08, 10.02),
    ("permuted", 64): (19.82, 28.26, 21.42, 19.82, 9.62),
    ("permuted", 256): (39.18, 65.97, 48.88, 39.04, 12.15),
    ("permuted", 1024): (78.13, 141.86, 105.44, 78.30, 14.75),
}


def one_dim(kind: str, n: int) -> Workload:
    block = {"all-range": lambda: AllRangeBlock(n), "prefix": lambda: PrefixBlock(n),
             "width32": lambda: WidthRangeBlock(n, 32),
             "permuted": lambda: PermutedBlock(AllRangeBlock(n), 0)}[kind]()
    return Workload.one_dim(block)


def ours(W: Workload, column: str) -> tuple[float, float]:
    """(Laplace, Gaussian) RMSE of a column; one plan serves both (a rescale, no re-plan)."""
    if column == "svdb":
        b = svd_bound(W)
        return b.rmse(W, LAPLACE), b.rmse(W, GAUSS)
    plan = get(column).plan(W, LAPLACE)
    return plan.rmse(), plan.rmse(GAUSS)


@pytest.mark.parametrize("kind,n", list(TABLE4), ids=[f"{k}-{n}" for k, n in TABLE4])
def test_tables_4_and_5(kind: str, n: int) -> None:
    check_row(kind, n)


def check_row(kind: str, n: int) -> None:
    W = one_dim(kind, n)
    for column, lap, gau in zip(COLUMNS, TABLE4[kind, n], TABLE5[kind, n], strict=True):
        got_lap, got_gau = ours(W, column)
        # printed to 2 decimals: within half a unit of the last digit
        assert got_lap == pytest.approx(lap, abs=0.005 + 1e-9), (column, "laplace")
        assert got_gau == pytest.approx(gau, abs=0.005 + 1e-9), (column, "gaussian")


def test_identity_closed_forms_r3() -> None:
    for n in (64, 256):
        plan = get("identity").plan(Workload.one_dim(AllRangeBlock(n)), LAPLACE)
        assert plan.rmse() == pytest.approx(math.sqrt(2 * (n + 2) / 3), rel=1e-12)
        plan = get("identity").plan(Workload.one_dim(PrefixBlock(n)), LAPLACE)
        assert plan.rmse() == pytest.approx(math.sqrt(n + 1), rel=1e-12)
        assert plan.rmse(GAUSS) == pytest.approx(math.sqrt(n + 1) * GAUSS.sigma() / math.sqrt(2))
    plan = get("identity").plan(Workload.one_dim(WidthRangeBlock(256, 32)), LAPLACE)
    assert plan.rmse() == pytest.approx(8.0, rel=1e-12)


def test_baseline_strategies_r15() -> None:
    assert hb_branching(64) == 64  # so HB = Identity at n = 64
    assert hb_branching(256) == 16
    np.testing.assert_array_equal(hierarchy(4, 2), [[1, 1, 1, 1], [1, 1, 0, 0], [1, 0, 0, 0],
                                                   [0, 1, 0, 0], [0, 0, 1, 1], [0, 0, 1, 0],
                                                   [0, 0, 0, 1]])
    np.testing.assert_array_equal(hierarchy(5, 2)[:4], [[1, 1, 1, 1, 1], [1, 1, 1, 0, 0],
                                                       [1, 1, 0, 0, 0], [1, 0, 0, 0, 0]])
    assert hierarchy(64, 2).shape == (127, 64)
    np.testing.assert_array_equal(haar(4), [[1, 1, 1, 1], [1, 1, -1, -1], [1, -1, 0, 0],
                                           [0, 0, 1, -1]])
    assert get("h2").plan(Workload.one_dim(AllRangeBlock(64)), LAPLACE).sensitivity[1] == 7


def test_table_3_example_15() -> None:
    """All 2-way marginals on (2, 5, 50, 100): Laplace "Expected TSE" = ||A||_1^2 tr[...]."""
    W = Workload.marginals(Domain.from_sizes([2, 5, 50, 100]), k=2)
    assert W.num_queries == 6_060
    identity = get("identity").plan(W, LAPLACE)
    assert identity.unit_tse(1) == pytest.approx(300_000, rel=1e-12)
    workload = get("workload").plan(W, LAPLACE)
    assert workload.sensitivity[1] == 6
    assert workload.trace == pytest.approx(5_749, rel=1e-12)  # rank W
    assert workload.unit_tse(1) == pytest.approx(206_964, rel=1e-12)
    # Tables 4-7 use the variance 2/eps^2: "Expected TSE" is the error at eps = sqrt(2)
    assert identity.tse(Privacy(noise="laplace", epsilon=math.sqrt(2))) == pytest.approx(
        300_000, rel=1e-12)


def cps_prefix() -> Workload:
    domain = {"a": {"size": 50, "kind": "numeric"}, "b": {"size": 100, "kind": "numeric"},
              "c": 7, "d": 4, "e": 2}
    sets = [["a", "b", *rest] for k in range(4) for rest in itertools.combinations("cde", k)]
    return Scenario.from_spec({"domain": domain,
                               "workload": [{"prefix_marginals": {"sets": sets}}]}).workload


def adult_prefix() -> Workload:
    domain = {f"n{i}": {"size": s, "kind": "numeric"}
              for i, s in enumerate([100, 100, 100, 99, 85])}
    domain.update({f"c{i}": s for i, s in enumerate([42, 16, 15, 9, 7, 6, 5, 2, 2])})
    return Scenario.from_spec({"domain": domain,
                               "workload": [{"prefix_marginals": {"k": 2}}]}).workload


def loans(prefix: bool) -> Workload:
    sizes = [101, 101, 101, 101, 3, 8, 36, 6, 51, 4, 5, 15]
    domain = {f"a{i}": {"size": s, "kind": "numeric" if i < 4 else "categorical"}
              for i, s in enumerate(sizes)}
    small = [list(s) for k in range(13) for s in itertools.combinations(domain, k)
             if math.prod(domain[n]["size"] for n in s) <= 5000]
    kind = "prefix_marginals" if prefix else "marginals"
    return Scenario.from_spec({"domain": domain,
                               "workload": [{kind: {"sets": small}}]}).workload


@pytest.mark.parametrize("name,build,identity,plain", [
    ("CPS marginals", lambda: Workload.marginals(Domain.from_sizes([50, 100, 7, 4, 2]), upto=5),
     (5.38, 16.08), (45.25, 23.90)),
    ("CPS prefix-marginals", cps_prefix, (98.06, 292.93), (56568.54, 844.94)),
    ("Adult <=3D marginals",
     lambda: Workload.marginals(Domain.from_sizes([100, 100, 100, 99, 85, 42, 16, 15, 9, 7,
                                                   6, 5, 2, 2]), upto=3),
     (5352117.26, 15988375.02), (664.68, 91.59)),
    ("Adult 2D prefix-marginals", adult_prefix, (475602516.60, 1420766966.19),
     (138602.83, 1322.58)),
    ("Loans small marginals", lambda: loans(False), (3330650.46, 9949649.11), (265.87, 57.93)),
    ("Loans small prefix-marginals", lambda: loans(True), (15340082.96, 45825415.90),
     (11013.90, 372.83)),
])
def test_tables_6_and_7_baseline_columns(name, build, identity, plain) -> None:
    """Identity, and the plain Laplace/Gaussian mechanisms with the sum of per-product
    sensitivities (R11; Loans Gaussian computes to 57.93 against the printed 57.92)."""
    W = build()
    plan = get("identity").plan(W, LAPLACE)
    assert plan.rmse() == pytest.approx(identity[0], abs=0.005)
    # the paper's sigma differs from the exact root in the 10th digit (4.224678891 against
    # 4.2246788893): visible in the cents of errors of 1e7 and more, so compare relatively
    assert plan.rmse(GAUSS) == pytest.approx(identity[1], abs=0.005, rel=1e-9)
    assert math.sqrt(2) * W.matrix.sensitivity_bound(1) == pytest.approx(plain[0], abs=0.005)
    assert GAUSS.sigma() * W.matrix.sensitivity_bound(2) == pytest.approx(plain[1], abs=0.005)
