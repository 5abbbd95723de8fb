"""HDMM MEASURE and RECONSTRUCT at census scale (spec hdmm.md section 5).

* A 5-attribute census domain of 1.5 million cells (sex, hispanic, race, age, state) with the
  SF1+ workload: plan, measure (from a Dataset and from a data vector), reconstruct, answer.
* Domains whose data vector cannot be stored (Adult, 6.4e17 cells; Loans, 8.3e15): the
  marginal-only path (OPT_M) and per-group blocks (OPT_+) run from the records' marginals;
  a Kronecker strategy over every attribute is refused with the way out in the message.
The 1e8-cell run is in ``benchmarks/hdmm_census_scale.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

from engine.data.dataset import Dataset
from engine.domain import Domain
from engine.errors import NotApplicable
from engine.linalg.matrix import Dense, Ones
from engine.mechanisms import get
from engine.mechanisms.base import Plan
from engine.mechanisms.hdmm.pidentity import PIdentity
from engine.mechanisms.hdmm.reconstruct import data_marginal, kron_estimate, kron_measure
from engine.noise import ExactNoise
from engine.privacy import Privacy
from engine.workloads.catalog import workload
from engine.workloads.workload import Workload

GAUSSIAN = Privacy(noise="gaussian", epsilon=1.0, delta=1e-6)


pytestmark = pytest.mark.usefixtures("one_blas_thread")


class SilentPlan:
    """A plan run without noise (checks that reconstruction is exact): the exact sampler's
    integers are zeroed and real-valued answers go on the grid 2**-40, far below tolerance."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan

    def run(self, data, rng) -> np.ndarray:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(ExactNoise, "integers", lambda self, size, rng: np.zeros(size, int))
            return self.plan.run(data, rng, grid_exponent=40)


def silent(plan: Plan) -> SilentPlan:
    return SilentPlan(plan)


def true_answers(W: Workload, data: Dataset) -> np.ndarray:
    return W.answer_from_marginals(lambda ax: data_marginal(data, ax, W.domain))


def test_r13_kronecker_least_squares_through_factor_pseudo_inverses() -> None:
    rng = np.random.default_rng(13)
    factors = [rng.standard_normal((3, 2)), rng.standard_normal((4, 5)),
               rng.standard_normal((2, 3))]
    dom = Domain.from_sizes([2, 5, 3])
    x = rng.standard_normal(30)
    full = np.kron(np.kron(factors[0], factors[1]), factors[2])
    y = kron_measure([Dense(f) for f in factors], x, dom)
    np.testing.assert_allclose(y, full @ x, rtol=1e-12)
    noisy = y + rng.standard_normal(y.size)
    est = kron_estimate([np.linalg.pinv(f) for f in factors], (0, 1, 2), noisy, dom)
    np.testing.assert_allclose(est((0, 1, 2)).reshape(-1), np.linalg.pinv(full) @ noisy,
                               rtol=1e-9, atol=1e-12)
    # the same with p-Identity factors (Woodbury pseudo-inverses) and a Total factor
    pid = [PIdentity(rng.random((2, 2))), PIdentity(rng.random((1, 5))), Ones(1, 3)]
    full = np.kron(np.kron(pid[0].dense(), pid[1].dense()), pid[2].dense())
    y = kron_measure(pid, x, dom) + rng.standard_normal(full.shape[0])
    est = kron_estimate([f.pinv_matrix() for f in pid[:2]], (0, 1), y, dom)
    xhat = np.linalg.pinv(full) @ y  # spreads evenly over the Total attribute
    np.testing.assert_allclose(est((0, 1)).reshape(-1), xhat.reshape(10, 3).sum(axis=1),
                               rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(est((0, 1, 2)).reshape(-1), xhat, rtol=1e-9, atol=1e-12)


def test_census_domain_end_to_end() -> None:
    W = workload("sf1_plus")
    assert len(W.domain) == 5 and W.domain.size == 1_501_440
    data = Dataset.synthetic(W.domain, 50_000, rng=1, correlation=0.3)
    plan = get("hdmm").plan(W, GAUSSIAN)
    assert plan.fact("chosen_operator") == "kron"
    truth = true_answers(W, data)
    # exact without noise, from the records and from the data vector
    np.testing.assert_allclose(silent(plan).run(data, np.random.default_rng(0)), truth,
                               rtol=1e-9, atol=1e-7)
    x = data.datavector()
    np.testing.assert_allclose(silent(plan).run(x, np.random.default_rng(0)), truth,
                               rtol=1e-9, atol=1e-7)
    # with noise: the error is the analytic one (215,852 queries, 1.5M measurements) at the
    # exact sampler's sigma (for (eps, delta) calibrated through zCDP: variance_factor ~ 1.15)
    measurement = plan.measure(data, np.random.default_rng(1))
    assert measurement.y.size == plan.strategy.shape[0]
    factor = measurement.noise.variance_factor
    assert 1.0 <= factor < 1.2
    error = plan.reconstruct(measurement) - truth
    assert float((error**2).sum()) == pytest.approx(plan.tse() * factor, rel=0.1)
    z2 = error**2 / (plan.variances() * factor)
    assert float(z2.mean()) == pytest.approx(1.0, rel=0.1)


def test_marginal_only_path_without_the_data_vector() -> None:
    dom = workload("adult_marginals").domain
    W = Workload.marginals(dom, upto=2)
    assert dom.size > 6e17
    data = Dataset.synthetic(dom, 20_000, rng=2, correlation=0.3)
    plan = get("hdmm-marginals").plan(W, GAUSSIAN)
    truth = true_answers(W, data)
    answers = silent(plan).run(data, np.random.default_rng(0))
    np.testing.assert_allclose(answers, truth, rtol=1e-9, atol=1e-9 * float(truth.max()))
    measurement = plan.measure(data, np.random.default_rng(3))
    error = plan.reconstruct(measurement) - truth
    assert float((error**2).sum()) == pytest.approx(
        plan.tse() * measurement.noise.variance_factor, rel=0.1)
    # a Kronecker strategy over all 14 attributes needs x: refused, with the way out
    kron = get("hdmm-kron").plan(W, GAUSSIAN)
    with pytest.raises(NotApplicable, match="cannot be stored.*hdmm-marginals"):
        kron.measure(data, np.random.default_rng(0))


def test_union_blocks_measure_small_marginals_only() -> None:
    W = workload("loans_marginals")
    assert W.domain.size > 8e15
    data = Dataset.synthetic(W.domain, 20_000, rng=4, correlation=0.3)
    plan = get("hdmm-union").plan(W, GAUSSIAN)
    assert len(plan.view("union_weights").values) == 188
    truth = true_answers(W, data)
    answers = silent(plan).run(data, np.random.default_rng(0))
    np.testing.assert_allclose(answers, truth, rtol=1e-9, atol=1e-9 * float(truth.max()))


def test_data_vector_of_the_wrong_size_is_refused() -> None:
    W = workload("sf1")
    plan = get("hdmm-kron").plan(W, GAUSSIAN)
    with pytest.raises(ValueError, match="data vector has 10 entries"):
        plan.measure(np.zeros(10), np.random.default_rng(0))
