"""Expected error: the same strategy in explicit, Kronecker and marginal form gives the same
error; per-query variances add up to the total (and a plan computes them once); Monte Carlo
agrees; support is checked; the reconstruction map equals dense ``W A^+``."""

from __future__ import annotations

import dataclasses
import math
import pickle
import threading
import time

import numpy as np
import pytest

from engine.analysis.expected_error import (
    EXPLICIT_LIMIT,
    expected_tse,
    explicit_trace,
    monte_carlo_tse,
    per_query_variances,
    reconstruction_map,
    rmse,
    trace_term,
)
from engine.domain import Domain
from engine.errors import NotApplicable
from engine.linalg.marginals import MarginalStrategy
from engine.linalg.matrix import DENSE_GUARD, Dense, Identity, Kron, Ones, Sparse
from engine.linalg.trees import hierarchy_matrix
from engine.mechanisms import get
from engine.privacy import Privacy
from engine.scenario import Scenario
from engine.workloads import AllRangeBlock, PrefixBlock, Workload

SHAPE = (2, 3, 4)
PRIVACIES = [Privacy(noise="laplace", epsilon=0.7), Privacy(noise="zcdp", rho=0.3),
             Privacy(noise="gaussian", epsilon=1.0, delta=1e-6)]


def product_workload() -> Workload:
    spec = {"domain": {"a": 2, "b": {"size": 3, "kind": "numeric"},
                       "c": {"size": 4, "kind": "numeric"}},
            "workload": [{"marginals": {"upto": 2}, "weight": 1.5},
                         {"product": {"a": "identity", "c": "prefix"}},
                         {"product": {"b": "all_range"}, "weight": 0.5},
                         {"product": {"c": {"block": "permuted", "of": "prefix", "seed": 2}}}]}
    return Scenario.from_spec(spec).workload


def mixed_workload() -> Workload:
    spec = {"domain": {"a": 2, "b": {"size": 3, "kind": "numeric"},
                       "c": {"size": 4, "kind": "numeric"}},
            "workload": [{"marginals": {"k": 1}}, {"affine": ["c", "b"], "weight": 2.0},
                         {"matrix": {"on": ["a", "c"], "rows": [[1, 0, 0, 2, 0, 1, 0, 0]]}}]}
    return Scenario.from_spec(spec).workload


def three_forms(alpha: list[float], beta: list[float]):
    """One strategy as Kron of [alpha_i I; beta_i T], as M(theta) and as an explicit matrix."""
    factors = [Dense(np.vstack([a * np.eye(n), b * np.ones((1, n))]))
               for a, b, n in zip(alpha, beta, SHAPE, strict=True)]
    kron = Kron(factors)
    theta = np.ones(1)
    for a, b in zip(alpha, beta, strict=True):
        theta = np.kron(theta, [b, a])  # bit clear = total, bit set = identity
    return kron, MarginalStrategy(theta, SHAPE), Dense(kron.dense())


@pytest.mark.parametrize("alpha,beta", [([1, 1, 1], [1, 1, 1]), ([0.8, 1.3, 0.6],
                                                                   [0.2, 0.5, 1.1])])
def test_explicit_kronecker_and_marginal_forms_agree(alpha, beta) -> None:
    W = product_workload()
    kron, marg, dense = three_forms(alpha, beta)
    traces = [trace_term(W, A) for A in (kron, marg, dense)]
    assert traces[1] == pytest.approx(traces[0], rel=1e-10)
    assert traces[2] == pytest.approx(traces[0], rel=1e-10)
    for p in (1, 2):
        sens = [A.sensitivity(p) for A in (kron, marg, dense)]
        assert sens[1] == pytest.approx(sens[0], rel=1e-12)
        assert sens[2] == pytest.approx(sens[0], rel=1e-12)
    for privacy in PRIVACIES:
        tses = [expected_tse(W, A, privacy) for A in (kron, marg, dense)]
        assert tses[1] == pytest.approx(tses[0], rel=1e-10)
        assert tses[2] == pytest.approx(tses[0], rel=1e-10)
        sens = kron.sensitivity(privacy.norm)
        assert tses[0] == pytest.approx(privacy.unit_variance() * sens**2 * traces[0])
    variances = [per_query_variances(W, A) for A in (kron, marg, dense)]
    for v in variances:
        assert v.shape == (W.num_queries,)
        np.testing.assert_allclose(v, variances[2], rtol=1e-9, atol=1e-12)
        assert v.sum() == pytest.approx(traces[0], rel=1e-10)


def test_identity_in_every_form() -> None:
    W = product_workload()
    theta = np.zeros(8)
    theta[-1] = 1.0
    forms = [Kron([Identity(n) for n in SHAPE]), MarginalStrategy(theta, SHAPE),
             Dense(np.eye(24)), Sparse(np.eye(24))]
    traces = [trace_term(W, A) for A in forms]
    assert traces == pytest.approx([W.fro2()] * 4, rel=1e-12)  # tr[I W^T W] = ||W||_F^2


def test_non_product_terms_under_a_kronecker_strategy() -> None:
    W = mixed_workload()
    rng = np.random.default_rng(5)
    kron = Kron([Dense(rng.normal(size=(n + 2, n))) for n in SHAPE])
    dense = Dense(kron.dense())
    assert trace_term(W, kron) == pytest.approx(trace_term(W, dense), rel=1e-10)
    v = per_query_variances(W, kron)
    np.testing.assert_allclose(v, per_query_variances(W, dense), rtol=1e-9)
    assert v.sum() == pytest.approx(trace_term(W, kron), rel=1e-10)


def test_monte_carlo_agrees_with_the_analytic_error() -> None:
    W = product_workload()
    kron, _, _ = three_forms([0.8, 1.3, 0.6], [0.2, 0.5, 1.1])
    for privacy in PRIVACIES:
        rng = np.random.default_rng(7)
        empirical = monte_carlo_tse(W, kron, privacy, 4000, rng)
        assert empirical == pytest.approx(expected_tse(W, kron, privacy), rel=0.05)


def test_support_is_checked() -> None:
    W = product_workload()
    # no identity on attribute c: the prefix queries on c are not in the row space
    no_c = Kron([Identity(2), Identity(3), Ones(1, 4)])
    assert trace_term(W, no_c) == math.inf
    theta = np.zeros(8)
    theta[[1, 2, 4]] = 1.0  # 1-way marginals cannot answer the 2-way ones
    assert trace_term(W, MarginalStrategy(theta, SHAPE)) == math.inf
    assert explicit_trace(np.eye(3), np.diag([1.0, 1.0, 0.0])) == math.inf
    assert explicit_trace(np.diag([2.0, 0.0, 0.0]), np.diag([4.0, 1.0, 0.0])) == 0.5
    W1 = Workload.marginals(Domain.from_sizes(SHAPE), k=1)
    # A = W: tr[(W^T W)^+ W^T W] = rank W = 1 + (2-1) + (3-1) + (4-1)
    assert trace_term(W1, MarginalStrategy(theta, SHAPE)) == pytest.approx(7.0)


def test_one_dimensional_strategies() -> None:
    W = Workload.one_dim(AllRangeBlock(16))
    V = AllRangeBlock(16).gram_array()
    A = Sparse(hierarchy_matrix(16, 2))
    D = A.dense()
    expected = float(np.trace(np.linalg.pinv(D.T @ D) @ V))
    for form in (A, Kron([A]), Dense(D)):
        assert trace_term(W, form) == pytest.approx(expected, rel=1e-10)
    v = per_query_variances(W, Kron([A]))
    Wd = W.dense()
    np.testing.assert_allclose(v, np.einsum("ij,jk,ik->i", Wd, np.linalg.pinv(D.T @ D), Wd),
                               rtol=1e-9)
    assert rmse(400.0, 100) == 2.0


def test_large_domains_need_structure() -> None:
    d = Domain.from_sizes([100, 100])
    W = Workload.product(d, {"a1": PrefixBlock(100), "a2": PrefixBlock(100)})
    A = Dense(np.eye(10))  # any unstructured strategy
    with pytest.raises(NotApplicable) as info:
        trace_term(W, A)
    assert str(info.value) == (f"explicit error needs n <= {EXPLICIT_LIMIT:,} cells; this "
                               "domain has 10,000")
    with pytest.raises(NotApplicable, match="need a Kronecker or marginal strategy"):
        per_query_variances(W, A)
    # structured strategies are fine on any domain
    assert trace_term(W, Kron([Identity(100), Identity(100)])) == pytest.approx(W.fro2())
    big = Workload.marginals(Domain.from_sizes([100] * 8), k=2)
    theta = np.zeros(2**8)
    theta[-1] = 1.0
    assert trace_term(big, MarginalStrategy(theta, (100,) * 8)) == pytest.approx(
        28 * 100.0**8)


# ----- per-query variances cached on the plan ---------------------------------------------------
def count_calls(monkeypatch, delay: float = 0.0) -> list[int]:
    """Count calls of the generic per-query variances (each made ``delay`` seconds slow)."""
    calls = [0]
    original = per_query_variances

    def counted(*args, **kwargs):
        calls[0] += 1
        time.sleep(delay)  # widens the window in which unsynchronised callers would overlap
        return original(*args, **kwargs)

    monkeypatch.setattr("engine.analysis.expected_error.per_query_variances", counted)
    return calls


def test_plan_variances_are_computed_once_and_rescaled(monkeypatch) -> None:
    calls = count_calls(monkeypatch)
    W = Workload.one_dim(AllRangeBlock(16))
    plan = get("h2").plan(W, Privacy(noise="laplace", epsilon=1.0))
    first = plan.variances()
    D, Wd = plan.strategy.dense(), W.dense()
    direct = np.einsum("ij,jk,ik->i", Wd, np.linalg.pinv(D.T @ D), Wd)
    sens = np.abs(D).sum(axis=0).max()
    np.testing.assert_allclose(first, 2.0 * sens**2 * direct, rtol=1e-9)  # Laplace: 2/eps^2
    again = plan.with_privacy(Privacy(noise="laplace", epsilon=2.0)).variances()
    np.testing.assert_allclose(again, first / 4.0, rtol=1e-14)
    gaussian = plan.variances(Privacy(noise="zcdp", rho=0.5))  # sigma = 1, L2 sensitivity
    np.testing.assert_allclose(gaussian, (np.sqrt((D * D).sum(axis=0)).max()) ** 2 * direct,
                               rtol=1e-9)
    assert calls[0] == 1
    with pytest.raises(ValueError, match="read-only"):
        plan.unit_variances()[0] = 0.0  # the cache is shared: it cannot be changed
    # another strategy is another plan: its variances are its own
    other = dataclasses.replace(plan, strategy=Identity(16))
    np.testing.assert_allclose(other.unit_variances(), (Wd * Wd).sum(axis=1), rtol=1e-12)
    assert calls[0] == 2


def test_concurrent_first_calls_compute_once(monkeypatch) -> None:
    calls = count_calls(monkeypatch, delay=0.05)
    plan = get("identity").plan(Workload.one_dim(PrefixBlock(64)), Privacy(noise="laplace"))
    start = threading.Barrier(6)
    results: list[np.ndarray] = []

    def ask() -> None:
        start.wait()
        results.append(plan.variances())

    threads = [threading.Thread(target=ask) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls[0] == 1 and len(results) == 6
    # identity: query i (prefix of length i + 1) sums i + 1 cells of variance 2/eps^2
    expected = 2.0 * np.arange(1, 65)
    for r in results:
        np.testing.assert_allclose(r, expected, rtol=1e-12)


def test_plans_still_pickle_with_their_variances() -> None:
    plan = get("h2").plan(Workload.one_dim(PrefixBlock(16)), Privacy(noise="laplace"))
    fresh = pickle.loads(pickle.dumps(plan))
    np.testing.assert_array_equal(fresh.variances(), plan.variances())
    computed = pickle.loads(pickle.dumps(plan))  # now with the unit variances inside
    assert not computed.unit_variances().flags.writeable
    np.testing.assert_array_equal(computed.unit_variances(), plan.unit_variances())



def test_what_a_plan_computes_once_is_shared_by_its_recalibrations_and_pickled() -> None:
    plan = get("h2").plan(Workload.one_dim(PrefixBlock(16)), Privacy(noise="laplace"))
    calls = []

    def compute() -> float:
        calls.append(1)
        return 2.5

    at_eps_3 = plan.with_privacy(Privacy(noise="laplace", epsilon=3.0))
    assert at_eps_3.noise_free("k", compute) == 2.5
    assert plan.noise_free("k", compute) == 2.5 and len(calls) == 1
    copy = pickle.loads(pickle.dumps(plan))
    assert copy.noise_free("k", compute) == 2.5 and len(calls) == 1
    assert copy.noise_free("another", compute) == 2.5 and len(calls) == 2

# ----- reconstruction map -------------------------------------------------------------------------
def reconstruction_cases():
    W1 = Workload.one_dim(AllRangeBlock(8))
    h2 = Sparse(hierarchy_matrix(8, 2))
    W2 = product_workload()
    kron, _, _ = three_forms([0.8, 1.3, 0.6], [0.2, 0.5, 1.1])
    rng = np.random.default_rng(3)
    rank_deficient = Dense(rng.normal(size=(5, 8)))  # cannot support all ranges of 8 cells
    return [(W1, h2), (W1, Dense(np.eye(8))), (W2, kron), (mixed_workload(), kron),
            (W1, rank_deficient)]


@pytest.mark.parametrize("case", range(5))
def test_reconstruction_map_is_w_times_the_pseudo_inverse(case: int) -> None:
    W, A = reconstruction_cases()[case]
    R = reconstruction_map(W, A)
    Wd, Ad = W.dense(), A.dense()
    assert R.shape == (W.num_queries, A.shape[0])
    np.testing.assert_allclose(R, Wd @ np.linalg.pinv(Ad), rtol=1e-8, atol=1e-10)
    # squared row norms are the unit per-query variances
    np.testing.assert_allclose((R * R).sum(axis=1), per_query_variances(W, Dense(Ad)),
                               rtol=1e-8, atol=1e-10)


def test_reconstruction_map_rebuilds_the_answers_without_noise() -> None:
    W, A = reconstruction_cases()[2]
    x = np.random.default_rng(4).integers(0, 50, size=W.domain.size).astype(float)
    np.testing.assert_allclose(reconstruction_map(W, A) @ A.matvec(x), W.answer(x), rtol=1e-9)


def test_reconstruction_map_is_size_guarded() -> None:
    W = Workload.product(Domain.from_sizes([100, 100]),
                         {"a1": PrefixBlock(100), "a2": PrefixBlock(100)})
    with pytest.raises(NotApplicable) as info:
        reconstruction_map(W, Kron([Identity(100), Identity(100)]))
    assert str(info.value) == (f"reconstruction map: 10,000 queries x 10,000 measurements over "
                               f"10,000 cells is formed explicitly only up to "
                               f"{EXPLICIT_LIMIT:,} cells and {DENSE_GUARD:,} entries per matrix")
