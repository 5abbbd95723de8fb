"""HDMM OPT_kron (spec hdmm.md section 4.2; reference cases R8 and R9; Table 3).

Errors in Table 3 and Examples 13/15 are the unit-noise "Expected TSE" with the L1
sensitivity, ``||A||_1**2 tr[(A^T A)^+ W^T W]`` (``plan.unit_tse(1)``).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from engine.analysis.expected_error import trace_term
from engine.domain import Domain
from engine.mechanisms import get
from engine.mechanisms.hdmm.kron import opt_kron
from engine.mechanisms.hdmm.opt0 import opt0
from engine.mechanisms.hdmm.structure import ProductUnion
from engine.privacy import Privacy
from engine.workloads import AllRangeBlock, IdentityBlock, PrefixBlock, Product, Workload

LAPLACE = Privacy(noise="laplace", epsilon=1.0)
GAUSSIAN = Privacy(noise="gaussian", epsilon=1.0, delta=1e-6)


pytestmark = pytest.mark.usefixtures("one_blas_thread")


def table3_workload() -> Workload:
    """All 2-way marginals on (2, 5, 50, 100): 6 products, n = 50,000, m = 6,060."""
    return Workload.marginals(Domain.from_sizes([2, 5, 50, 100]), k=2)


def example13_workload() -> Workload:
    """``P x T + T x P`` on a 100 x 100 domain."""
    dom = Domain.from_sizes([100, 100], ["a", "b"], ["numeric", "numeric"])
    return Workload(dom, (Product((("a", PrefixBlock(100)),)),
                          Product((("b", PrefixBlock(100)),))))


def test_r8_table3_opt_kron() -> None:
    W = table3_workload()
    assert W.num_queries == 6060
    plan = get("hdmm-kron").plan(W, LAPLACE)
    assert plan.unit_tse(1) == pytest.approx(213_270, rel=1e-3)
    names = plan.workload.domain.names
    assert plan.view("factors").column("family")[:2] == ["identity", "identity"]
    # I x I x [0.79 I; 0.21 T] x [0.82 I; 0.18 T] (the paper prints 0.80 / 0.82)
    for name, weight in zip(names[2:], (0.791, 0.822), strict=True):
        assert plan.fact(f"p[{name}]") == 1
        np.testing.assert_allclose(plan.view(f"identity_weights[{name}]").values, weight,
                                   atol=2e-3)
    # the baselines of the same table
    assert get("identity").plan(W, LAPLACE).unit_tse(1) == pytest.approx(300_000, rel=1e-12)
    assert get("workload").plan(W, LAPLACE).unit_tse(1) == pytest.approx(206_964, rel=1e-9)


def test_r9_example13_opt_kron() -> None:
    W = example13_workload()
    result = opt_kron(ProductUnion.of(W), 1)
    # the reported loss is the true error of the returned strategy, recomputed from its
    # explicit factors: ||A1||_1^2 ||A2||_1^2 (tr[P'P X1^-1] tr[J X2^-1] + tr[J X1^-1] tr[P'P
    # X2^-1]) with X_i = A_i^T A_i, so it cannot understate the error
    A1, A2 = (np.asarray(f.matrix.dense()) for f in result.factors)
    PtP, J = PrefixBlock(100).gram_array(), np.ones((100, 100))
    X1inv, X2inv = np.linalg.inv(A1.T @ A1), np.linalg.inv(A2.T @ A2)
    l1 = np.abs(A1).sum(axis=0).max() ** 2 * np.abs(A2).sum(axis=0).max() ** 2
    explicit = l1 * (np.sum(PtP * X1inv) * np.sum(J * X2inv)
                     + np.sum(J * X1inv) * np.sum(PtP * X2inv))
    assert result.loss == pytest.approx(explicit, rel=1e-9)
    # paper 33,385 (spec's implementation 33,362); a Laplace OPT_kron has no certificate, so
    # the floor is the printed value less 3 %: our alternating sweeps stop 1.9 % lower
    assert 0.97 * 33_385 <= result.loss <= 33_385
    assert all(h2 <= h1 for h1, h2 in zip(result.history, result.history[1:], strict=False))
    assert [f.kind for f in result.factors] == ["p-identity", "p-identity"]


def test_single_product_separates_exactly() -> None:
    """One product: OPT_kron is OPT_0 per attribute, and for Gaussian noise the product of
    the per-attribute optima (spec R5: P_8 and R_8)."""
    dom = Domain.from_sizes([8, 8], ["a", "b"], ["numeric", "numeric"])
    W = Workload.product(dom, {"a": PrefixBlock(8), "b": AllRangeBlock(8)})
    result = opt_kron(ProductUnion.of(W), 2)
    assert len(result.history) == 2  # the start and one sweep
    assert result.loss == pytest.approx(17.866177 * 80.464265, rel=1e-6)
    per = [opt0(PrefixBlock(8).gram_array(), 2).loss, opt0(AllRangeBlock(8).gram_array(), 2).loss]
    assert result.loss == pytest.approx(per[0] * per[1], rel=1e-6)  # both certified to 1e-7


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_kron_factor_starts_reach_the_opt0_optima(seed: int) -> None:
    """Prefix(64) x AllRange(64) x Identity(8), one product: the Laplace error separates, so
    the RMSE is Table 4's OPT_0 cells multiplied, 5.32 x 5.55 / sqrt(2) = 20.88 (identity
    is optimal on the third factor). Its factor starts used to stop at 0.73-0.78 of identity
    where the peer's reach 0.70 (21.03 for its KronPIdentity, best of 3 starts); every seed
    of the default plan now lands within the printed cells' rounding, half a percent below
    allowed as for the OPT_0 cells."""
    dom = Domain.from_sizes([64, 64, 8], ["a", "b", "c"], ["numeric"] * 3)
    W = Workload(dom, (Product((("a", PrefixBlock(64)), ("b", AllRangeBlock(64)),
                                ("c", IdentityBlock(8)))),))
    ours = get("hdmm-kron", seed=seed).plan(W, LAPLACE).rmse()
    assert 0.995 * 5.315 * 5.545 / math.sqrt(2) <= ours <= 5.325 * 5.555 / math.sqrt(2)
    assert ours < 21.0257  # the peer's KronPIdentity, best of 3 (benchmarks/README.md)


@pytest.mark.parametrize("privacy", [LAPLACE, GAUSSIAN], ids=["laplace", "gaussian"])
def test_kron_plan_is_consistent_with_the_engine(privacy: Privacy) -> None:
    W = example13_workload()
    plan = get("hdmm-kron").plan(W, privacy)
    assert plan.trace == pytest.approx(trace_term(W, plan.strategy), rel=1e-9)
    assert plan.sensitivity[privacy.norm] == pytest.approx(1.0, rel=1e-12)
    assert plan.unit_tse() == pytest.approx(plan.fact("unit_error"), rel=1e-9)
    assert plan.variances().sum() == pytest.approx(plan.tse(), rel=1e-8)
    assert plan.fact("kind") == "kron"
    assert plan.view("factors").column("attribute") == ["a", "b"]
    assert plan.view("loss_history").values[-1] == pytest.approx(plan.unit_tse(), rel=1e-9)
    # the OPT_kron strategy needs both factors of full rank: 100 x 100 rows at least
    assert plan.strategy.shape[0] >= 100 * 100


def test_kron_refuses_non_product_terms() -> None:
    from engine.errors import NotApplicable
    from engine.scenario import Scenario

    W = Scenario.from_spec({"domain": {"a": 4, "b": 5},
                            "workload": [{"affine": ["a", "b"]}]}).workload
    for name in ("hdmm-kron", "hdmm-union", "hdmm-marginals"):
        with pytest.raises(NotApplicable, match="Kronecker"):
            get(name).plan(W, LAPLACE)
    # OPT_0 serves it (20 cells), and so does hdmm through OPT_0
    plan = get("hdmm").plan(W, LAPLACE)
    assert plan.fact("chosen_operator") == "opt0"
    assert set(plan.view("skipped").column("operator")) == {"kron", "union", "marginals"}
