"""Noise allocation over independent Gaussian measurements (``engine.linalg.allocation``): the
closed-form sum split, the max-variance program, and the one split that ResidualPlanner and
AIM+GReM's batch ResidualPlanner baseline share."""

from __future__ import annotations

import numpy as np
import pytest

from engine.domain import Domain
from engine.linalg.allocation import max_allocation, sum_allocation
from engine.linalg.residuals import privacy_factor
from engine.mechanisms import get
from engine.mechanisms.aim_grem.baseline import residual_planner_variances
from engine.privacy import Privacy
from engine.workloads import Workload
from engine.workloads.groups import Marginals


def test_sum_allocation_is_cauchy_schwarz() -> None:
    tau2, total = sum_allocation([1.0, 4.0], [1.0, 1.0])
    assert total == pytest.approx(9.0)
    np.testing.assert_allclose(tau2, [3.0, 1.5])
    assert float((np.array([1.0, 1.0]) / tau2).sum()) == pytest.approx(1.0)


def test_sum_allocation_spends_beta_and_beats_other_splits() -> None:
    v, p, beta = np.array([2.0, 0.5, 3.0]), np.array([0.5, 0.25, 1.0]), 4.0
    tau2, total = sum_allocation(v, p, beta)
    assert float((p / tau2).sum()) == pytest.approx(beta, rel=1e-14)
    assert float(v @ tau2) == pytest.approx(total, rel=1e-14)
    # (sum sqrt(v p))**2 / beta = (1 + sqrt(1/8) + sqrt(3))**2 / 4
    assert total == pytest.approx((1 + np.sqrt(0.125) + np.sqrt(3.0)) ** 2 / 4, rel=1e-14)
    # any other split at the same cost has a larger weighted sum
    other = tau2 * np.array([1.2, 0.9, 1.0])
    other *= float((p / other).sum()) / beta
    assert float(v @ other) > total * (1 + 1e-4)


def test_max_allocation_small_program() -> None:
    # min 1/s1 + 1/s2 s.t. s1 + s2 <= 1, s1 <= 1: optimum s = (1/2, 1/2), cost 4
    tau2, max_var = max_allocation(np.array([1.0, 1.0]), np.array([[1.0, 1.0], [1.0, 0.0]]))
    assert max_var == pytest.approx(4.0, rel=1e-6)
    np.testing.assert_allclose(tau2, [2.0, 2.0], rtol=1e-5)  # rescaled to cost 1


def test_residual_planner_and_aim_grem_baseline_split_alike() -> None:
    """On a marginal workload the registered ResidualPlanner (privacy cost 1 = rho 1/2) and
    AIM+GReM's batch baseline give every residual the same noise variance."""
    domain = Domain.from_sizes([2, 3, 4], ["A", "B", "C"], ["numeric"] * 3)
    workload = Workload(domain, (Marginals(k=1), Marginals(k=2)))
    plan = get("residual-planner").plan(workload, Privacy(noise="zcdp", rho=0.5))
    sets = [t.attrs for t in workload.terms]
    baseline = residual_planner_variances(sets, None, domain.shape, rho=0.5)
    planned = plan.view("residual_variances").as_dict()
    assert len(baseline) == len(planned) == 7  # every subset of size <= 2 of three attributes
    for tau, sigma2 in baseline.items():
        name = " x ".join(domain.names[i] for i in tau) or "total"
        assert planned[name] == pytest.approx(sigma2, rel=1e-12)
    assert baseline[(0,)] == pytest.approx(5.206544388, rel=1e-9)  # spec R4: residual A
    assert sum(privacy_factor(t, domain.shape) / (2 * s) for t, s in baseline.items()) == (
        pytest.approx(0.5, rel=1e-12))
