"""HDMM as a workbench mechanism: registry, refusals, progress and cancellation, and the
strategy views a dashboard draws."""

from __future__ import annotations

import math

import numpy as np
import pytest

from engine.domain import Domain
from engine.errors import Cancelled, NotApplicable
from engine.mechanisms import get, registry_names
from engine.mechanisms.hdmm.blas import blas_available, blas_threads
from engine.privacy import Privacy
from engine.progress import Progress
from engine.scenario import Scenario
from engine.workloads import AllRangeBlock, PrefixBlock, Product, Workload

LAPLACE = Privacy(noise="laplace", epsilon=1.0)
GAUSSIAN = Privacy(noise="gaussian", epsilon=1.0, delta=1e-6)
NAMES = ("hdmm", "hdmm-opt0", "hdmm-kron", "hdmm-union", "hdmm-marginals")


pytestmark = pytest.mark.usefixtures("one_blas_thread")


def small_product_union() -> Workload:
    dom = Domain.from_sizes([8, 6, 3], ["a", "b", "c"], ["numeric", "numeric", "categorical"])
    return Workload(dom, (Product((("a", PrefixBlock(8)), ("c", PrefixBlock(3)))),
                          Product((("b", AllRangeBlock(6)),))))


def test_registered() -> None:
    assert set(NAMES) <= set(registry_names())
    for name in NAMES:
        mech = get(name)
        assert mech.family == "hdmm" and mech.title and mech.description


def test_refusals_say_why() -> None:
    big = Workload.one_dim(PrefixBlock(9000))
    with pytest.raises(NotApplicable, match=r"9,000 cells \(limit 8,192\)"):
        get("hdmm-opt0").plan(big, GAUSSIAN)
    with pytest.raises(NotApplicable, match="up to 8,192|limit 8,192"):
        get("hdmm-kron").plan(Workload.one_dim(PrefixBlock(9000)), GAUSSIAN)
    # a non-product term on a large domain: nothing applies
    W = Scenario.from_spec({"domain": {"a": 100, "b": 100},
                            "workload": [{"affine": ["a", "b"]}]}).workload
    with pytest.raises(NotApplicable, match="no operator applies.*Kronecker"):
        get("hdmm").plan(W, GAUSSIAN)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("privacy", [LAPLACE, GAUSSIAN], ids=["laplace", "gaussian"])
def test_progress_is_reported_and_cancellation_is_clean(name: str, privacy: Privacy) -> None:
    W = small_product_union()
    seen: list[tuple[int, float, str]] = []
    progress = Progress(lambda i, loss, msg: seen.append((i, loss, msg)))
    plan = get(name).plan(W, privacy, progress)
    assert seen, "no progress reported"
    iterations = [i for i, _, _ in seen]
    assert iterations == list(range(1, len(seen) + 1))
    assert all(msg for _, _, msg in seen)
    finite = [loss for _, loss, _ in seen if math.isfinite(loss)]
    assert min(finite) > 0
    # cancel after the third step: the plan call raises Cancelled and nothing is returned
    stop = Progress()
    calls = []

    def cancel_soon(i: int, loss: float, msg: str) -> None:
        calls.append(i)
        if i == 3:
            stop.cancel()

    stop.callback = cancel_soon
    mech = get(name)
    if len(seen) < 3:
        # only Thm. 13's closed form (Gaussian marginals) finishes without iterating
        assert plan.facts().get("closed_form_optimal"), f"{name}: {len(seen)} steps"
        return
    with pytest.raises(Cancelled):
        mech.plan(W, privacy, stop)
    assert calls[-1] == 3
    # the mechanism is reusable after a cancellation and plans identically (seeded)
    again = mech.plan(W, privacy)
    assert again.unit_tse() == pytest.approx(plan.unit_tse(), rel=1e-12)


def test_views_of_an_explicit_strategy() -> None:
    W = Workload.one_dim(AllRangeBlock(256))
    lap = get("hdmm-opt0").plan(W, LAPLACE)
    d = lap.facts()
    assert d["kind"] == "explicit" and d["operator"] == "OPT_0" and d["family"] == "p-identity"
    A = lap.view("strategy").array()
    weights = lap.view("identity_weights").values
    assert A.shape == (256 + 16, 256)
    np.testing.assert_allclose(A[:256], np.diag(weights))
    np.testing.assert_allclose(A[256:], lap.view("theta").array() * weights)
    assert 0 < d["nonzero_rows"] <= 16  # Fig. 1(b): zero rows can be dropped
    assert set(lap.view("opt0_candidates").column("candidate")) == {
        "identity", "total", "p-identity", "id-total", "hb-tree"}
    gau_plan = get("hdmm-opt0").plan(W, GAUSSIAN)
    gau = gau_plan.facts()
    assert gau["family"] == "gaussian" and gau["factorization"] == "cholesky"
    # Fig. 1(a): triangular
    np.testing.assert_allclose(np.tril(gau_plan.view("strategy").array(), -1), 0.0)
    assert gau["gap"] <= 1e-6


def test_views_of_implicit_strategies() -> None:
    W = small_product_union()
    kron = get("hdmm-kron").plan(W, LAPLACE)
    assert kron.view("factors").column("attribute") == ["a", "b", "c"]
    assert all(f"strategy[{a}]" in [v.key for v in kron.views()] and f"family[{a}]" in
               kron.facts() for a in "abc")
    union = get("hdmm-union").plan(W, LAPLACE)
    assert len(union.view("union_weights").values) == 2
    assert union.view("union_groups").column("terms") == ["prefix(a) x prefix(c)",
                                                          "all_range(b)"]
    marg = get("hdmm-marginals").plan(W, GAUSSIAN).view("marginal_weights").as_dict()
    assert all(len(label) == 3 and set(label) <= {"I", "T"} for label in marg)
    assert math.isclose(sum(w * w for w in marg.values()), 1.0)
    best = get("hdmm").plan(W, GAUSSIAN)
    cands = best.view("candidates")
    assert set(cands.column("operator")) == {"opt0", "kron", "union", "marginals"}
    assert best.rmse() == pytest.approx(min(cands.column("rmse")), rel=1e-12)
    # error for another privacy level is a rescale of the same plan
    moved = best.with_privacy(Privacy(noise="gaussian", epsilon=0.5, delta=1e-6))
    assert moved.strategy is best.strategy and moved.rmse() > best.rmse()


def skipped(plan) -> dict[str, str]:
    """HDMM's operators that did not run, with the reason."""
    table = plan.view("skipped")
    return dict(zip(table.column("operator"), table.column("reason"), strict=True))


def test_hdmm_skips_operators_that_repeat_another() -> None:
    one_dim = get("hdmm").plan(Workload.one_dim(PrefixBlock(32)), LAPLACE)
    assert set(one_dim.view("candidates").column("operator")) == {"opt0", "marginals"}
    assert "same problem as OPT_0" in skipped(one_dim)["kron"]
    dom = Domain.from_sizes([40, 40], ["a", "b"], ["numeric", "numeric"])
    product = get("hdmm").plan(Workload.product(dom, {"a": PrefixBlock(40),
                                                      "b": PrefixBlock(40)}), GAUSSIAN)
    # one product, Gaussian noise: OPT_kron's certificate is a lower bound for every
    # strategy, so neither OPT_M nor OPT_0 can beat it
    assert set(product.view("candidates").column("operator")) == {"kron"}
    assert skipped(product)["union"] == "one product: OPT_+ is OPT_kron"
    assert "cannot beat the best so far" in skipped(product)["marginals"]
    assert "cannot beat the best so far" in skipped(product)["opt0"]
    dom = Domain.from_sizes([100, 100], ["a", "b"], ["numeric", "numeric"])
    large = get("hdmm").plan(Workload.product(dom, {"a": PrefixBlock(100),
                                                    "b": PrefixBlock(100)}), GAUSSIAN)
    assert "10,000 cells (limit 8,192)" in skipped(large)["opt0"]


def test_blas_threads_are_restored() -> None:
    from threadpoolctl import threadpool_info

    def blas_counts() -> list[int]:
        return [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]

    assert blas_available()  # numpy and scipy each load a BLAS
    before = blas_counts()
    with blas_threads(1):
        assert blas_counts() and all(count == 1 for count in blas_counts())
    assert blas_counts() == before
