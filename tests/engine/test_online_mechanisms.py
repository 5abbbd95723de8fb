"""The online (continual release) mechanisms: who they serve, their error against closed
forms and the offline optimum, causality, and a release through the pipeline."""

from __future__ import annotations

import math

import numpy as np
import pytest

from engine.analysis.continual import NOT_PREFIX, HorizonError
from engine.analysis.svd_bound import svd_bound
from engine.data import Dataset
from engine.domain import Domain
from engine.errors import NotApplicable
from engine.linalg.causal import sqrt_coefficients
from engine.mechanisms import get
from engine.privacy import Privacy
from engine.workflows.compare import compare
from engine.workflows.release import release
from engine.workloads import AllRangeBlock, PrefixBlock, Workload

ONLINE = ("online-tree", "online-sqrt", "online-optimal", "online-blt")
ZCDP = Privacy(noise="zcdp", rho=0.5)
GAUSSIAN = Privacy(noise="gaussian", epsilon=1.0, delta=1e-6)


@pytest.mark.parametrize("name", ONLINE)
def test_other_workloads_are_refused_in_one_line(name: str) -> None:
    others = [Workload.one_dim(AllRangeBlock(8)),
              Workload.marginals(Domain.from_sizes([2, 3]), k=1),
              Workload.one_dim(PrefixBlock(8), kind="categorical")]
    for workload in others:
        with pytest.raises(NotApplicable) as caught:
            get(name).plan(workload, ZCDP)
        assert str(caught.value) == NOT_PREFIX


def test_online_sqrt_matches_its_closed_form() -> None:
    """Unit TSE = max column norm**2 of C times sum_t sum_{k<t} c_k**2, computed here from
    the binomials directly (not through the mechanism's helpers)."""
    n = 1024
    c2 = np.array([(math.comb(2 * k, k) / 4**k) ** 2 for k in range(n)])
    per_step = np.cumsum(c2)
    sensitivity2 = c2.sum()
    plan = get("online-sqrt").plan(Workload.one_dim(PrefixBlock(n)), GAUSSIAN)
    assert plan.unit_tse() == pytest.approx(sensitivity2 * per_step.sum(), rel=1e-9)
    np.testing.assert_allclose(plan.unit_variances(), per_step, rtol=1e-9)
    assert plan.sensitivity[2] ** 2 == pytest.approx(sensitivity2, rel=1e-12)
    sigma2 = GAUSSIAN.unit_variance()
    assert plan.tse() == pytest.approx(sigma2 * sensitivity2 * per_step.sum(), rel=1e-9)


def test_weighted_prefix_scales_the_error_by_the_weight_squared() -> None:
    base = get("online-sqrt").plan(Workload.one_dim(PrefixBlock(50)), ZCDP)
    domain = base.workload.domain
    weighted = get("online-sqrt").plan(Workload.product(domain, {"x": PrefixBlock(50)},
                                                        weight=3.0), ZCDP)
    assert weighted.tse() == pytest.approx(9.0 * base.tse(), rel=1e-12)


def test_orderings_on_a_short_horizon() -> None:
    n = 64
    W = Workload.one_dim(PrefixBlock(n))
    tse = {name: get(name).plan(W, ZCDP).tse() for name in ONLINE}
    bound = ZCDP.unit_variance() * svd_bound(W).value
    assert tse["online-optimal"] <= tse["online-blt"] <= tse["online-sqrt"] \
        <= tse["online-tree"]
    assert tse["online-optimal"] >= bound * (1 - 1e-9)
    plan = get("online-optimal").plan(W, ZCDP)
    assert 0.0 <= plan.fact("duality_gap") <= 1e-6
    assert plan.fact("lower_bound") * ZCDP.unit_variance() <= tse["online-optimal"]


@pytest.mark.parametrize("name", ONLINE)
def test_releases_are_causal(name: str) -> None:
    """A change to the strategy answer of step s moves no estimate published before s."""
    n = 32
    plan = get(name).plan(Workload.one_dim(PrefixBlock(n)), ZCDP)
    A = plan.strategy.dense()
    for row in range(A.shape[0]):
        first_step = int(np.flatnonzero(np.abs(A[row]) > 1e-12).max()) + 1
        bump = np.zeros(A.shape[0])
        bump[row] = 1.0
        moved = plan.reconstruct(bump)
        # exactly zero but for the round-off of FFT products (online-sqrt)
        assert np.abs(moved[: first_step - 1]).max(initial=0.0) <= 1e-12, (name, row)


def test_horizon_error_summarises_per_step_variances() -> None:
    plan = get("online-sqrt").plan(Workload.one_dim(PrefixBlock(100)), ZCDP)
    summary = HorizonError.of(plan.variances())
    assert summary.rmse == pytest.approx(plan.rmse(), rel=1e-12)
    c2 = sqrt_coefficients(100) ** 2
    assert summary.max_error == pytest.approx(math.sqrt(c2.sum() * c2.sum()), rel=1e-12)
    assert summary.final_error == summary.max_error
    with pytest.raises(ValueError, match="variances"):
        HorizonError.of(np.zeros(0))


@pytest.mark.parametrize("name", ONLINE)
def test_release_through_the_pipeline(name: str) -> None:
    n = 24
    domain = Domain.from_spec({"month": {"size": n, "kind": "numeric"}})
    data = Dataset.synthetic(domain, 300, rng=3)
    W = Workload.product(domain, {"month": PrefixBlock(n)})
    r = release(name, data=data, workload=W, privacy=ZCDP, seed=11, post_process="raw")
    assert r.record["mechanism"] == name and r.record["seeded"] is True
    truth = np.cumsum(data.datavector())
    estimate = np.asarray(r.result, dtype=float).reshape(-1)
    assert estimate.shape == (n,)
    plan = get(name).plan(W, ZCDP)
    # a seeded draw lies within 6 standard deviations at every step
    assert np.all(np.abs(estimate - truth) <= 6.0 * np.sqrt(plan.variances()) + 1e-9)
    assert not np.allclose(estimate, truth)


@pytest.mark.slow
def test_compare_on_1024_steps_lists_the_online_mechanisms_in_order() -> None:
    """online-optimal <= online-blt <= online-sqrt <= online-tree; the online optimum equals
    the offline one (HDMM OPT_0) to the optimisers' tolerance (Denisov et al. 2022: for single
    participation the optimal factorization can be taken lower triangular) and no mechanism
    is below it or below the SVD bound."""
    W = Workload.one_dim(PrefixBlock(1024))
    rows = ONLINE + ("hdmm-opt0", "eigen-design", "h2")
    result = compare(W, ZCDP, rows)
    rmse = {r.mechanism: r.rmse for r in result.rows}
    assert all(rmse[name] is not None for name in rows), rmse
    assert rmse["online-optimal"] <= rmse["online-blt"] <= rmse["online-sqrt"] \
        <= rmse["online-tree"]
    assert rmse["online-optimal"] == pytest.approx(rmse["hdmm-opt0"], rel=1e-5)
    for name in rows:
        assert rmse[name] >= rmse["online-optimal"] * (1 - 1e-5), name
        assert rmse[name] >= result.bound_rmse * (1 - 1e-9), name
    for name in ("online-tree", "online-sqrt", "online-blt"):
        assert rmse[name] > rmse["hdmm-opt0"], name
    # the price of publishing every period with the square root: within 6 % of the optimum
    assert 1.03 <= rmse["online-sqrt"] / rmse["online-optimal"] <= 1.06


def test_online_blt_fitted_for_max_error_has_the_lower_worst_step() -> None:
    """``error="max"``: the plan's worst-step unit error is the peer jax_privacy's max-error
    optimum at 1,024 steps (10.709812865785876, benchmarks/continual_peers.py --max-error),
    below the mean-error plan's worst step, and its total above the mean-error plan's."""
    workload = Workload.one_dim(PrefixBlock(1024))
    plans = {error: get("online-blt", error=error).plan(workload, ZCDP)
             for error in ("mean", "max")}
    worst = {error: plan.sensitivity[2] ** 2 * float(plan.unit_variances().max())
             for error, plan in plans.items()}
    total = {error: plan.unit_tse() for error, plan in plans.items()}
    assert worst["max"] == pytest.approx(10.709812865785876, rel=1e-6)
    assert worst["max"] < worst["mean"] / 1.04
    assert total["max"] > total["mean"] * 1.03
    assert plans["max"].fact("fitted_for") == "worst step"
