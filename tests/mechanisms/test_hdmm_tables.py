"""HDMM Tables 6 and 7 (multi-dimensional RMSE at eps = 1, delta = 1e-6).

* The baseline columns (R11): Identity, the plain Laplace/Gaussian mechanism with the sum of
  per-product sensitivities, and the SVD bound, to the printed precision.
* The OPT_kron, OPT_M and HDMM columns: ours within 2% of the paper's value either side, or,
  in the cells of ``BELOW_PAPER`` (the paper's value is not an optimum), lower; every cell is
  also above a certified floor (the SVD bound, or the sum of the product terms' SVD bounds
  where the union has no closed form).
  The OPT_+ column is not a test oracle (spec section 7.6): the paper's numbers come from
  another grouping or implementation (its Loans small-marginals cell lies below a certified
  floor of Def. 19 with one group per product, ``test_hdmm_union.py``). The HDMM cell that the
  paper took from OPT_+ (Adult 2-D prefix-marginals, Laplace, 484.07) is therefore asserted
  in ``test_hdmm_union.py`` against what is reproducible (ours 1.045x the print, between the
  best known Def. 19 value and the authors' released code), and the benchmark
  ``benchmarks/hdmm_tables.py`` prints the certificate (and times OPT_HDMM on Adult).
"""

from __future__ import annotations

import math
from functools import cache

import pytest
from hdmm_paper import WORKLOADS, plain_rmse, summed_sensitivity

from engine.analysis.svd_bound import svd_bound, svd_bound_factor
from engine.mechanisms import get
from engine.privacy import Privacy
from engine.workloads.workload import Workload

LAPLACE = Privacy(noise="laplace", epsilon=1.0)
GAUSSIAN = Privacy(noise="gaussian", epsilon=1.0, delta=1e-6)
NOISE = {"laplace": LAPLACE, "gaussian": GAUSSIAN}


pytestmark = pytest.mark.usefixtures("one_blas_thread")


@cache
def workload(dataset: str, name: str) -> Workload:
    return WORKLOADS[(dataset, name)]()


#: R11: m, Identity (Laplace, Gaussian), plain mechanism (Laplace, Gaussian), SVDB (L, G).
BASELINES = {
    ("cps", "marginals"): (618_120, (5.38, 16.08), (45.25, 23.90), (2.63, 7.85)),
    ("cps", "prefix"): (600_000, (98.06, 292.93), (56568.54, 844.94), (9.32, 27.85)),
    ("adult", "marginals"): (21_043_262, (5352117.26, 15988375.02), (664.68, 91.59),
                             (15.08, 45.06)),
    ("adult", "prefix"): (148_137, (475602516.60, 1420766966.19), (138602.83, 1322.58), None),
    ("loans", "marginals"): (279_751, (3330650.46, 9949649.11), (265.87, 57.92),
                             (11.61, 34.67)),
    ("loans", "prefix"): (279_751, (15340082.96, 45825415.90), (11013.90, 372.83), None),
    ("census", "sf1"): (4_151, (23.20, 69.33), (70.71, 29.87), None),
    ("census", "sf1+"): (215_852, (32.50, 97.08), (141.42, 42.25), None),
}
#: Where the paper prints no SVD bound (None above): ours, exact (block by block) or a
#: certified floor (the sum of the exact bounds of sub-workloads), Laplace and Gaussian.
NO_PAPER_BOUND = {
    ("adult", "prefix"): ("floor", (9.91, 29.59)),
    ("loans", "prefix"): ("floor", (10.50, 31.37)),
    ("census", "sf1"): ("exact", (2.09, 6.25)),
    ("census", "sf1+"): ("exact", (2.32, 6.94)),
}


@pytest.mark.parametrize("key", list(BASELINES), ids=lambda k: "-".join(k))
def test_r11_baseline_columns(key: tuple[str, str]) -> None:
    W = workload(*key)
    m, identity, plain, svdb = BASELINES[key]
    assert W.num_queries == m
    bound = svd_bound(W)
    for k, privacy in enumerate((LAPLACE, GAUSSIAN)):
        # Gaussian values may differ in the last digit (57.93 vs 57.92): the paper rounds
        # sigma differently, which also shows in the ninth digit of the huge Identity values
        tol = 0.005 if k == 0 else 0.015
        assert plain_rmse(W, privacy) == pytest.approx(plain[k], abs=tol)
        ident = get("identity").plan(W, privacy).rmse()
        assert ident == pytest.approx(identity[k], rel=1e-9, abs=tol)
        if svdb is None:
            kind, ours = NO_PAPER_BOUND[key]
            assert bound.kind == kind
            assert bound.rmse(W, privacy) == pytest.approx(ours[k], abs=0.005)
        else:
            assert bound.rmse(W, privacy) == pytest.approx(svdb[k], abs=tol)


def test_plain_sensitivity_is_the_sum_over_products() -> None:
    # SF1: the paper's 50 sums the products' L1 sensitivities; the true one is 41
    W = workload("census", "sf1")
    assert summed_sensitivity(W, 1) == pytest.approx(50.0)
    assert W.sensitivity(1) == pytest.approx(41.0)


#: (dataset, workload, operator, noise) -> the paper's RMSE.
PAPER = {
    ("cps", "marginals", "kron", "laplace"): 4.85,
    ("cps", "marginals", "marginals", "laplace"): 4.84,
    ("cps", "marginals", "hdmm", "laplace"): 4.84,
    ("cps", "marginals", "kron", "gaussian"): 7.85,
    ("cps", "marginals", "marginals", "gaussian"): 7.86,
    ("cps", "marginals", "hdmm", "gaussian"): 7.85,
    ("cps", "prefix", "kron", "laplace"): 40.59, ("cps", "prefix", "marginals", "laplace"): 69.38,
    ("cps", "prefix", "hdmm", "laplace"): 40.59, ("cps", "prefix", "kron", "gaussian"): 29.48,
    ("cps", "prefix", "marginals", "gaussian"): 104.09,
    ("cps", "prefix", "hdmm", "gaussian"): 29.48,
    ("adult", "marginals", "kron", "laplace"): 872.58,
    ("adult", "marginals", "kron", "gaussian"): 82.42,
    ("adult", "marginals", "marginals", "gaussian"): 46.44,
    ("adult", "prefix", "kron", "gaussian"): 126.17,
    ("adult", "prefix", "marginals", "gaussian"): 296.12,
    ("loans", "marginals", "kron", "laplace"): 654.35,
    ("loans", "marginals", "kron", "gaussian"): 81.51,
    ("loans", "marginals", "marginals", "laplace"): 100.92,
    ("loans", "marginals", "marginals", "gaussian"): 34.91,
    ("loans", "prefix", "kron", "gaussian"): 132.43,
    ("loans", "prefix", "marginals", "laplace"): 288.29,
    ("loans", "prefix", "marginals", "gaussian"): 99.72,
    ("census", "sf1", "kron", "laplace"): 7.30, ("census", "sf1", "kron", "gaussian"): 9.80,
    ("census", "sf1", "marginals", "laplace"): 9.56,
    ("census", "sf1", "marginals", "gaussian"): 14.31,
    ("census", "sf1+", "kron", "laplace"): 10.23, ("census", "sf1+", "kron", "gaussian"): 10.90,
    ("census", "sf1+", "marginals", "laplace"): 12.88,
    ("census", "sf1+", "marginals", "gaussian"): 15.88,
}
#: Cells that take several seconds each (Laplace on 12-14 attributes).
SLOW = {
    ("adult", "marginals", "marginals", "laplace"): 225.35,
    ("adult", "prefix", "kron", "laplace"): 1119.16,
    ("adult", "prefix", "marginals", "laplace"): 553.56,
    ("loans", "prefix", "kron", "laplace"): 1707.67,
}


#: Cells where ours is more than 2 % below the paper, and why that is legitimate: the
#: paper's value is not an optimum. Their lower limit is the certified floor alone.
BELOW_PAPER = {
    ("adult", "marginals", "kron", "gaussian"):
        "Gaussian OPT_kron on a union: the paper's optimiser stopped higher (0.976)",
    ("adult", "prefix", "kron", "gaussian"):
        "Gaussian OPT_kron on a union: the paper's optimiser stopped higher (0.836)",
    ("adult", "prefix", "marginals", "gaussian"):
        "OPT_M Gaussian attains Thm. 13's closed form; the paper's optimiser does not (0.854)",
    ("loans", "marginals", "kron", "gaussian"):
        "Gaussian OPT_kron on a union: the paper's optimiser stopped higher (0.885)",
    ("loans", "marginals", "marginals", "laplace"):
        "OPT_M Laplace: our restarts find a lower local optimum (0.937)",
    ("loans", "prefix", "kron", "gaussian"):
        "Gaussian OPT_kron on a union: the paper's optimiser stopped higher (0.815)",
    ("loans", "prefix", "marginals", "laplace"):
        "OPT_M Laplace: our restarts find a lower local optimum (0.963)",
    ("adult", "prefix", "kron", "laplace"):
        "Laplace OPT_kron on a union: our restarts find a lower local optimum (0.944)",
    ("loans", "prefix", "kron", "laplace"):
        "Laplace OPT_kron on a union: our restarts find a lower local optimum (0.923)",
    ("census", "sf1+", "kron", "laplace"):
        "Laplace OPT_kron on a union: starts smoothed through the workload find a lower "
        "local optimum (0.973)",
}


def certified_floor(W: Workload, privacy: Privacy) -> float:
    """A certified lower bound on any strategy's RMSE: the SVD bound where it has a closed
    form, else the sum over product terms of each term's SVD bound (for any one strategy the
    union's squared error is the sum of its terms' errors, each at least that term's SVD
    bound; Laplace noise only adds, as L1 sensitivity >= L2 sensitivity)."""
    bound = svd_bound(W).rmse(W, privacy)
    if bound is not None:
        return bound
    total = sum(w**2 * math.prod(svd_bound_factor(f) for f in factors)
                for w, factors in W.products())
    return privacy.sigma() * math.sqrt(total / W.num_queries)


def check(key: tuple[str, str, str, str], paper: float) -> None:
    dataset, name, operator, noise = key
    W = workload(dataset, name)
    mechanism = "hdmm" if operator == "hdmm" else f"hdmm-{operator}"
    plan = get(mechanism).plan(W, NOISE[noise])
    ours = plan.rmse()
    assert ours <= 1.02 * paper, f"{key}: ours {ours:.2f} vs paper {paper:.2f}"
    assert ours >= certified_floor(W, NOISE[noise]) * (1 - 1e-9)
    if key not in BELOW_PAPER:  # the printed value is reproduced: within 2 % either side
        assert ours >= 0.98 * paper, f"{key}: ours {ours:.2f} vs paper {paper:.2f}"


@pytest.mark.parametrize("key", list(PAPER), ids=lambda k: "-".join(k))
def test_tables_6_7(key: tuple[str, str, str, str]) -> None:
    check(key, PAPER[key])


@pytest.mark.slow
@pytest.mark.parametrize("key", list(SLOW), ids=lambda k: "-".join(k))
def test_tables_6_7_slow_cells(key: tuple[str, str, str, str]) -> None:
    check(key, SLOW[key])


def test_below_paper_cells_are_table_cells() -> None:
    assert set(BELOW_PAPER) <= set(PAPER) | set(SLOW)
