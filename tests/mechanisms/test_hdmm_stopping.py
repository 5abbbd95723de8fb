"""``hdmm`` knows when to stop (issue 32 item 2): operators run cheapest first and one is
skipped when a lower bound or the cost model shows it cannot pay for itself."""

from __future__ import annotations

import numpy as np
import pytest

from engine.domain import Domain
from engine.mechanisms import get
from engine.mechanisms.hdmm.opt_marginals import opt_marginals
from engine.mechanisms.hdmm.structure import ProductUnion
from engine.privacy import Privacy
from engine.workloads import Workload
from engine.workloads.blocks import AllRangeBlock, IdentityBlock, PrefixBlock

LAPLACE = Privacy(noise="laplace", epsilon=1.0)
GAUSSIAN = Privacy(noise="gaussian", epsilon=1.0, delta=1e-6)

pytestmark = pytest.mark.usefixtures("one_blas_thread")


def skipped(plan) -> dict[str, str]:
    table = plan.view("skipped")
    return dict(zip(table.column("operator"), table.column("reason"), strict=True))


def product(sizes: dict[str, int], blocks) -> Workload:
    dom = Domain.from_sizes(list(sizes.values()), list(sizes), ["numeric"] * len(sizes))
    return Workload.product(dom, {name: blocks[name](n) for name, n in sizes.items()})


def test_one_gaussian_product_stops_at_opt_kron_which_opt0_cannot_beat() -> None:
    """The convex Gaussian problem separates over a product's attributes: OPT_0 on the whole
    domain (run here on its own) finds the same error as OPT_kron, to the certified gap."""
    W = product({"a": 12, "b": 6}, {"a": AllRangeBlock, "b": PrefixBlock})
    plan = get("hdmm").plan(W, GAUSSIAN)
    assert plan.view("candidates").column("operator") == ["kron"]
    reasons = skipped(plan)
    assert "cannot beat the best so far" in reasons["opt0"]
    assert "cannot beat the best so far" in reasons["marginals"]
    kron = get("hdmm-kron").plan(W, GAUSSIAN).unit_tse(2)
    opt0 = get("hdmm-opt0").plan(W, GAUSSIAN).unit_tse(2)
    assert plan.unit_tse(2) == pytest.approx(kron, rel=1e-12)
    assert opt0 == pytest.approx(kron, rel=1e-6)


def test_laplace_opt0_over_many_cells_is_skipped_by_the_cost_model() -> None:
    W = product({"a": 64, "b": 32}, {"a": AllRangeBlock, "b": PrefixBlock})  # 2,048 cells
    plan = get("hdmm").plan(W, LAPLACE)
    assert "cost model puts OPT_0 at" in skipped(plan)["opt0"]
    assert set(plan.view("candidates").column("operator")) == {"kron", "marginals"}
    assert plan.rmse() == pytest.approx(get("hdmm-kron").plan(W, LAPLACE).rmse(), rel=1e-12)


def test_small_domains_and_one_attribute_still_run_opt0() -> None:
    W = product({"a": 16, "b": 8}, {"a": PrefixBlock, "b": IdentityBlock})  # 128 cells
    assert "opt0" in get("hdmm").plan(W, LAPLACE).view("candidates").column("operator")
    one = get("hdmm").plan(Workload.one_dim(AllRangeBlock(64)), LAPLACE)
    assert one.view("candidates").column("operator")[0] == "opt0"  # runs first


def test_without_a_cost_limit_every_operator_runs() -> None:
    W = product({"a": 16, "b": 8}, {"a": PrefixBlock, "b": IdentityBlock})
    plan = get("hdmm", max_cost_ratio=None).plan(W, LAPLACE)
    assert set(plan.view("candidates").column("operator")) == {"kron", "marginals", "opt0"}
    errors = dict(zip(plan.view("candidates").column("operator"),
                      plan.view("candidates").column("unit error"), strict=True))
    assert plan.unit_tse(1) == pytest.approx(min(errors.values()), rel=1e-12)


def test_marginal_starts_stop_at_their_evaluation_budget() -> None:
    W = product({"a": 16, "b": 16, "c": 4},
                {"a": PrefixBlock, "b": AllRangeBlock, "c": IdentityBlock})
    union = ProductUnion.of(W)
    full = opt_marginals(union.marginal_weights, W.domain.shape, 1)
    assert len(full.info["start_losses"]) == 65  # the closed form and 64 random starts
    cut = opt_marginals(union.marginal_weights, W.domain.shape, 1, max_evaluations=100)
    kept = len(cut.info["start_losses"])
    assert 2 <= kept < 65
    assert cut.info["start_losses"] == full.info["start_losses"][:kept]  # the same starts
    assert cut.loss >= full.loss
    one = opt_marginals(union.marginal_weights, W.domain.shape, 1, max_evaluations=1)
    assert len(one.info["start_losses"]) == 1
    assert np.isfinite(one.loss)
