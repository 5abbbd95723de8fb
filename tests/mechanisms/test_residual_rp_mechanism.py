"""ResidualPlanner (spec 2.2): closed-form allocation, per-cell marginal variances, the
max-variance program, and measuring in the subtraction basis on data."""

from __future__ import annotations

import math

import numpy as np
import pytest

from engine.data.dataset import Dataset
from engine.domain import Domain
from engine.linalg.residuals import privacy_factor, variance_factor
from engine.mechanisms import get
from engine.privacy import Privacy
from engine.workloads import Workload
from engine.workloads.groups import Marginals, PrefixMarginals

BETA1 = Privacy(noise="zcdp", rho=0.5)
R4_CELL_VAR = {("A",): 4.521332943, ("B",): 3.548222846, ("C",): 3.045542655,
               ("A", "B"): 2.437130446, ("A", "C"): 2.152482304, ("B", "C"): 1.844182055}


def abc_marginals() -> Workload:
    dom = Domain.from_sizes([2, 3, 4], ["A", "B", "C"], ["numeric"] * 3)
    return Workload(dom, (Marginals(k=1), Marginals(k=2)))


def test_r4_closed_form_and_parametrisations() -> None:
    W = abc_marginals()
    plan = get("residual-planner").plan(W, BETA1)
    assert plan.tse() == pytest.approx(85.842330816576, rel=1e-11)
    for names, value in R4_CELL_VAR.items():
        cells = plan.view("marginal_variances").as_dict()
        assert cells[" x ".join(names) or "total"] == pytest.approx(value, rel=1e-9)
    # RP's native noise tau2 = p * sigma2_QS: residual A has sigma2_QS = 10.413089, p = 1/2
    tau2 = plan.view("residual_variances").as_dict()
    assert tau2["A"] == pytest.approx(5.206545, abs=1e-6)
    # tau2 = sqrt(p / v) sum sqrt(v p) with v_A = 19/12 (spec 2.2)
    shape = W.domain.shape
    v = {(): 35 / 24, (0,): 19 / 12}
    p = {a: privacy_factor(a, shape) for a in v}
    assert p[(0,)] == 0.5
    total = math.sqrt(85.842330816576)
    assert tau2["A"] == pytest.approx(
        math.sqrt(p[(0,)] / v[(0,)]) * total, rel=1e-9)
    # per-cell variances also come out of the generic per-query variances
    offset = 0
    variances = plan.variances()
    for term in W.terms:
        names = tuple(W.domain.names[i] for i in term.attrs)
        np.testing.assert_allclose(variances[offset:offset + term.num_queries],
                                   R4_CELL_VAR[names], rtol=1e-9)
        offset += term.num_queries
    assert variance_factor((0,), (0, 1), shape) == pytest.approx(0.5 / 9)


def test_equals_querysmasher_residual_sub_solver_on_any_workload() -> None:
    dom = Domain.from_sizes([2, 3, 4], ["A", "B", "C"], ["numeric"] * 3)
    W = Workload(dom, (PrefixMarginals(k=1), PrefixMarginals(k=2)))
    rp = get("residual-planner").plan(W, BETA1)
    qs = get("querysmasher", sub_solver="residual").plan(W, BETA1)
    assert rp.tse() == pytest.approx(133.012256367, abs=1e-8)
    assert qs.tse() == pytest.approx(rp.tse(), rel=1e-12)
    np.testing.assert_allclose(rp.variances(), qs.variances(), rtol=1e-10)


def test_native_measurement_zero_noise_and_monte_carlo(noiseless) -> None:
    W = abc_marginals()
    plan = get("residual-planner").plan(W, BETA1)
    data = Dataset.synthetic(W.domain, 200, rng=1)
    x = data.datavector().astype(float)
    m = noiseless(plan, data)
    assert m.y.size == sum(math.prod(d - 1 for d in a) if a else 1
                           for a in [(), (2,), (3,), (4,), (2, 3), (2, 4), (3, 4)])
    np.testing.assert_allclose(plan.reconstruct(m), W.answer(x), atol=1e-10)
    rng = np.random.default_rng(0)
    errors = np.array([plan.run(x, rng) - W.answer(x) for _ in range(3000)])
    np.testing.assert_allclose(errors.var(axis=0) / plan.variances(), 1.0, atol=0.12)
    assert (errors**2).sum(axis=1).mean() == pytest.approx(plan.tse(), rel=0.03)


def test_max_variance_objective() -> None:
    W = Workload(Domain.from_sizes([3, 4, 5, 2]), (Marginals(k=1), Marginals(k=2)))
    best = get("residual-planner", objective="max").plan(W, BETA1)
    plain = get("residual-planner").plan(W, BETA1)
    worst = float(best.variances().max())
    assert worst == pytest.approx(best.fact("max_variance"), rel=1e-5)
    assert worst < float(plain.variances().max())
    # privacy cost exactly 1 and every marginal's cells share one variance
    np.testing.assert_allclose(best.strategy.column_norms(2) ** 2, 1.0, rtol=1e-6)
    # weights: a marginal with weight w gets variance bound 1/w (weighted variance <= max)
    heavy = Workload(W.domain, (Marginals(k=1), Marginals(k=2, weight=3.0)))
    wp = get("residual-planner", objective="max").plan(heavy, BETA1)
    assert float(wp.variances().max()) == pytest.approx(wp.fact("max_variance"), rel=1e-5)
