"""HDMM OPT_+ (spec hdmm.md section 4.3; reference cases R8, R9 and R14).

OPT_+ answers every group from its own block (local least squares); its expected error is
``(sum_j E_j**(1/3))**3`` (Laplace) or ``(sum_j E_j**(1/2))**2`` (Gaussian), which the tests
also check against an explicit computation on a small domain.
"""

from __future__ import annotations

import numpy as np
import pytest
from hdmm_paper import WORKLOADS

from engine.analysis.svd_bound import svd_bound_factor
from engine.domain import Domain
from engine.mechanisms import get
from engine.mechanisms.hdmm.opt0 import opt0
from engine.mechanisms.hdmm.structure import ProductUnion
from engine.mechanisms.hdmm.union import groups_of, union_floor, union_weights
from engine.privacy import Privacy
from engine.workloads import PrefixBlock, Product, Workload

LAPLACE = Privacy(noise="laplace", epsilon=1.0)
GAUSSIAN = Privacy(noise="gaussian", epsilon=1.0, delta=1e-6)


pytestmark = pytest.mark.usefixtures("one_blas_thread")


def test_r14_union_weights() -> None:
    c, total = union_weights(np.array([1.0, 8.0, 27.0]), np.ones(3), 1)
    np.testing.assert_allclose(c, [1 / 6, 1 / 3, 1 / 2], rtol=1e-12)
    assert total == pytest.approx(216.0, rel=1e-12)
    c, total = union_weights(np.array([1.0, 8.0, 27.0]), np.ones(3), 2)
    assert total == pytest.approx(81.443036, rel=1e-8)
    np.testing.assert_allclose(c / c[0], [1.0, 8**0.25, 27**0.25], rtol=1e-12)
    assert float((c * c).sum()) == pytest.approx(1.0, rel=1e-12)  # unit L2 sensitivity
    # blocks of sensitivity s are scaled down by it
    c2, total2 = union_weights(np.array([1.0, 8.0, 27.0]), np.array([2.0, 1.0, 4.0]), 1)
    np.testing.assert_allclose(c2 * [2.0, 1.0, 4.0], [1 / 6, 1 / 3, 1 / 2], rtol=1e-12)
    assert total2 == pytest.approx(216.0, rel=1e-12)


def test_r8_table3_opt_union() -> None:
    W = Workload.marginals(Domain.from_sizes([2, 5, 50, 100]), k=2)
    plan = get("hdmm-union").plan(W, LAPLACE)
    cells = np.array([5000, 500, 250, 200, 100, 10], dtype=float)
    assert plan.unit_tse(1) == pytest.approx(float(np.cbrt(cells).sum() ** 3), rel=1e-9)
    assert plan.unit_tse(1) == pytest.approx(85_070.38, abs=0.01)
    labels = [terms.split("; ")[0] for terms in plan.view("union_groups").column("terms")]
    weights = dict(zip(labels, plan.view("union_weights").values, strict=True))
    # 0.39 TTII, 0.18 TITI, 0.14 TIIT, 0.13 ITTI, 0.11 ITIT, 0.05 IITT
    expected = {"marginal(a3, a4)": 0.39, "marginal(a2, a4)": 0.18, "marginal(a2, a3)": 0.14,
                "marginal(a1, a4)": 0.13, "marginal(a1, a3)": 0.11, "marginal(a1, a2)": 0.05}
    for label, w in expected.items():
        assert weights[label] == pytest.approx(w, abs=0.005)
    assert plan.sensitivity[1] == pytest.approx(1.0, rel=1e-12)


def test_r9_example13_opt_union() -> None:
    dom = Domain.from_sizes([100, 100], ["a", "b"], ["numeric", "numeric"])
    W = Workload(dom, (Product((("a", PrefixBlock(100)),)), Product((("b", PrefixBlock(100)),))))
    plan = get("hdmm-union").plan(W, LAPLACE)
    E = np.array(plan.view("union_groups").column("error"))
    # each block is OPT_0(P_100) x T (spec: E(P_100) = 1781.14; a Laplace OPT_0 has no
    # certificate, so the floor is the spec's value less 1 %: our restarts end 0.4 % lower) ...
    assert np.all((E >= 0.99 * 1781.14) & (E <= 1781.14 + 0.01))
    assert E.min() == pytest.approx(opt0(PrefixBlock(100).gram_array(), 1).loss, rel=0.01)
    # ... and the union costs (E_1^(1/3) + E_2^(1/3))^3 = 8 E: 14,249 in the spec
    assert plan.unit_tse(1) == pytest.approx(float(np.cbrt(E).sum() ** 3), rel=1e-9)
    assert 0.99 * 14_249 <= plan.unit_tse(1) <= 14_252
    assert plan.strategy.shape[0] == 212  # 2 x (100 + 6) rows
    kron = get("hdmm-kron").plan(W, LAPLACE)
    assert kron.unit_tse(1) / plan.unit_tse(1) > 2.2  # the paper's ratio is 2.34


@pytest.mark.parametrize("privacy", [LAPLACE, GAUSSIAN], ids=["laplace", "gaussian"])
def test_local_least_squares_error_is_explicit(privacy: Privacy) -> None:
    """On a small domain: the error of answering each group from its own block equals the
    explicit ``sum_j ||W_j (c_j A_j)^+||_F^2`` times the union's noise variance."""
    dom = Domain.from_sizes([6, 5, 3], ["a", "b", "c"], ["numeric", "numeric", "categorical"])
    W = Workload(dom, (Product((("a", PrefixBlock(6)), ("c", PrefixBlock(3)))),
                       Product((("b", PrefixBlock(5)),)), Product((("a", PrefixBlock(6)),))))
    plan = get("hdmm-union").plan(W, privacy)
    blocks = plan.strategy.blocks
    weights = plan.strategy.weights
    explicit = 0.0
    for term, block, c in zip(W.terms, blocks, weights, strict=True):
        Wj = term.weight * term.full_matrix().dense()
        explicit += float(((Wj @ np.linalg.pinv(c * block.dense())) ** 2).sum())
    assert plan.trace == pytest.approx(explicit, rel=1e-8)
    # the sensitivity is the exact one of the whole stack
    assert plan.sensitivity[privacy.norm] == pytest.approx(
        plan.strategy.sensitivity(privacy.norm), rel=1e-12)
    assert plan.variances().sum() == pytest.approx(plan.tse(), rel=1e-8)
    x = np.arange(dom.size, dtype=float)
    np.testing.assert_allclose(plan.reconstruct(plan.strategy.matvec(x)), W.answer(x),
                               rtol=1e-9, atol=1e-9)


def test_groupings() -> None:
    dom = Domain.from_sizes([6, 5], ["a", "b"], ["numeric", "numeric"])
    W = Workload(dom, (Product((("a", PrefixBlock(6)),)), Product((("b", PrefixBlock(5)),))))
    single = get("hdmm-union", grouping="single").plan(W, GAUSSIAN)
    kron = get("hdmm-kron").plan(W, GAUSSIAN)
    assert len(single.view("union_weights").values) == 1
    assert single.unit_tse() == pytest.approx(kron.unit_tse(), rel=1e-9)
    per_product = get("hdmm-union").plan(W, GAUSSIAN)
    assert len(per_product.view("union_weights").values) == 2


def test_union_floor_example13() -> None:
    """P x T + T x P: every block's error is at least SVDB(P_100) (T's bound is 1), so the
    floor is (2 SVDB^(1/3))^3 = 8 SVDB(P_100), below OPT_+'s 8 E(P_100)."""
    dom = Domain.from_sizes([100, 100], ["a", "b"], ["numeric", "numeric"])
    W = Workload(dom, (Product((("a", PrefixBlock(100)),)), Product((("b", PrefixBlock(100)),))))
    union = ProductUnion.of(W)
    floor = union_floor(union, 1, groups_of(W, "product"))
    assert floor == pytest.approx(8 * svd_bound_factor(PrefixBlock(100)), rel=1e-9)
    assert floor == pytest.approx(union_floor(union, 2, groups_of(W, "product")) * 2, rel=1e-9)
    # one group: the sum of both products' bounds
    assert union_floor(union, 1, groups_of(W, "single")) == pytest.approx(floor / 4, rel=1e-9)
    assert floor < get("hdmm-union").plan(W, LAPLACE).unit_tse(1)


#: Table 6, Loans small marginals, OPT_+ (Laplace).
PAPER_LOANS_MARGINALS_OPT_PLUS = 204.17


@pytest.mark.slow
def test_union_floor_is_attained_on_marginals_and_exceeds_the_print() -> None:
    """Loans small marginals (188 products of I and T, as the authors' code builds them): the
    floor is attained, sqrt(2 (sum_j cells_j^(1/3))^3 / m) = 211.36 (spec 7.6), and lies above
    the paper's OPT_+ cell: that column is not Def. 19 with one group per product."""
    W = WORKLOADS[("loans", "marginals")]()
    union = ProductUnion.of(W)
    floor = union_floor(union, 1, groups_of(W, "product"))
    plan = get("hdmm-union").plan(W, LAPLACE)
    assert plan.unit_tse(1) == pytest.approx(floor, rel=1e-9)
    rmse = LAPLACE.sigma() * np.sqrt(floor / W.num_queries)
    assert rmse == pytest.approx(211.36, abs=0.005)
    assert plan.rmse() == pytest.approx(rmse, rel=1e-9)
    assert 0.97 * rmse > PAPER_LOANS_MARGINALS_OPT_PLUS


#: Table 6, Adult 2-D prefix-marginals, OPT_+ = HDMM (Laplace): not reproducible.
PAPER_ADULT_PREFIX_OPT_PLUS = 484.07
#: Def. 19 with one group per product on that row at the best prefix factors of an
#: extended OPT_0 search (benchmarks/hdmm_tables.py, 2026-11-24: P_100 1767.8, P_99 1741.7,
#: P_85 1389.1), and the authors' released code's best of 40 runs there (same date).
BEST_KNOWN_ADULT_PREFIX_OPT_PLUS = 505.35
PEER_BEST_ADULT_PREFIX_OPT_PLUS = 507.99


@pytest.mark.slow
def test_adult_prefix_opt_union_cell() -> None:
    """Ours between the best Def. 19 value known (extended factor search) and the authors'
    released code's best; both 1.04-1.05 x the print (the benchmark prints the certificate:
    the print needs every prefix factor 5.7 % below any strategy found)."""
    W = WORKLOADS[("adult", "prefix")]()
    union = ProductUnion.of(W)
    groups = groups_of(W, "product")
    plan = get("hdmm-union").plan(W, LAPLACE)
    ours = plan.rmse()
    assert 0.999 * BEST_KNOWN_ADULT_PREFIX_OPT_PLUS <= ours <= PEER_BEST_ADULT_PREFIX_OPT_PLUS
    assert ours / PAPER_ADULT_PREFIX_OPT_PLUS == pytest.approx(1.045, abs=0.005)
    floor = LAPLACE.sigma() * np.sqrt(union_floor(union, 1, groups) / W.num_queries)
    assert floor == pytest.approx(203.30, abs=0.005)
