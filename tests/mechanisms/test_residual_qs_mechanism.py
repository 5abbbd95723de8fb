"""The registered ``querysmasher`` mechanism through the generic Plan API: privacy units,
zero-noise runs, Monte-Carlo variance, weights (Appendix E), huge domains, progress,
executors and refusals."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from engine.analysis.expected_error import per_query_variances, trace_term
from engine.data.dataset import Dataset
from engine.domain import Domain
from engine.errors import Cancelled, NotApplicable
from engine.executor import SerialExecutor, local_pool
from engine.mechanisms import get
from engine.mechanisms.residual import QuerySmasher
from engine.mechanisms.residual.decomposition import decompose, residual_projector
from engine.mechanisms.residual.optimal import solve_optimal
from engine.privacy import Privacy, analytic_gaussian_sigma
from engine.progress import Progress
from engine.workloads import Workload
from engine.workloads.blocks import AllRangeBlock, PrefixBlock
from engine.workloads.groups import (
    Marginals,
    PairQueries,
    PrefixMarginals,
    Product,
    SubsetMatrix,
)

BETA1 = Privacy(noise="zcdp", rho=0.5)


def mixed_workload() -> Workload:
    dom = Domain.from_sizes([3, 4, 3], ["p", "q", "r"], ["numeric"] * 3)
    return Workload(dom, (PrefixMarginals(k=1), Product((("q", AllRangeBlock(4)),
                                                         ("r", PrefixBlock(3))), weight=1.5),
                          PairQueries(attrs=("r", "p"), pair_kind="affine", weight=2.0),
                          SubsetMatrix(on=("r", "q"), count=5, p=0.4, seed=3)))


@pytest.fixture(scope="module")
def mixed_plans() -> dict:
    W = mixed_workload()
    return {s: get("querysmasher", sub_solver=s, workers=0).plan(W, BETA1)
            for s in ("optimal", "residual", "kron_basis", "fourier")}


def test_registered_and_documented() -> None:
    mech = get("querysmasher")
    assert mech.sub_solver == "optimal" and mech.objective == "sum"
    assert set(mech.param["sub_solver"].objects) == {"optimal", "residual", "kron_basis",
                                                      "fourier"}


@pytest.mark.parametrize("sub_solver", ["optimal", "residual", "kron_basis", "fourier"])
def test_plan_matches_the_generic_error_formulas(mixed_plans: dict, sub_solver: str) -> None:
    """The closed-form trace and per-query variances equal the engine's generic
    least-squares formulas applied to the stored (pre-scaled) strategy."""
    W = mixed_workload()
    p = mixed_plans[sub_solver]
    assert p.trace == pytest.approx(trace_term(W, p.strategy), rel=1e-9)
    generic = per_query_variances(W, p.strategy) * p.sensitivity[2] ** 2
    np.testing.assert_allclose(p.variances(), generic, rtol=1e-8, atol=1e-10)
    A = p.strategy.dense()
    assert p.sensitivity[2] ** 2 <= 1.0 + 1e-9
    assert float(np.sqrt((A * A).sum(axis=0)).max()) <= p.sensitivity[2] + 1e-9
    # rmatvec is the adjoint of matvec
    rng = np.random.default_rng(1)
    x, y = rng.random(A.shape[1]), rng.random(A.shape[0])
    assert float(y @ p.strategy.matvec(x)) == pytest.approx(float(p.strategy.rmatvec(y) @ x))


def test_privacy_units_rescale_without_replanning(mixed_plans: dict) -> None:
    p = mixed_plans["optimal"]
    assert p.rmse(Privacy(noise="zcdp", rho=2.0)) == pytest.approx(p.rmse() / 2, rel=1e-12)
    gauss = Privacy(noise="gaussian", epsilon=1.0, delta=1e-6)
    assert p.rmse(gauss) == pytest.approx(analytic_gaussian_sigma(1.0, 1e-6) * p.rmse(),
                                          rel=1e-12)
    assert p.with_privacy(gauss).rmse() == pytest.approx(p.rmse(gauss))
    np.testing.assert_allclose(p.variances(gauss), p.variances() * gauss.sigma() ** 2)
    # the table: shares sum to the privacy cost 1, total = (sum sqrt L)^2
    table = p.view("residual_table").records()
    assert sum(r["privacy_share"] for r in table) == pytest.approx(1.0)
    assert p.tse() == pytest.approx(sum(math.sqrt(r["loss"]) for r in table) ** 2)
    assert {"residual", "loss", "sigma2", "privacy_share"} <= set(table[0])


def test_laplace_is_not_applicable() -> None:
    W = mixed_workload()
    for name in ("querysmasher", "residual-planner"):
        with pytest.raises(NotApplicable, match="Laplace"):
            get(name).plan(W, Privacy(noise="laplace", epsilon=1.0))


@pytest.mark.parametrize("sub_solver", ["optimal", "residual", "kron_basis", "fourier"])
def test_zero_noise_reproduces_every_answer(mixed_plans: dict, sub_solver: str,
                                            noiseless) -> None:
    W = mixed_workload()
    p = mixed_plans[sub_solver]
    x = np.random.default_rng(2).integers(0, 30, W.domain.size).astype(float)
    m = noiseless(p, x)
    np.testing.assert_allclose(p.reconstruct(m), W.answer(x), atol=1e-9)
    np.testing.assert_allclose(m.y, p.strategy.matvec(x), atol=1e-9)
    data = Dataset.synthetic(W.domain, 300, rng=4)
    np.testing.assert_allclose(p.reconstruct(noiseless(p, data)), W.answer(data.datavector()),
                               atol=1e-9)


def test_monte_carlo_variance_matches_analytic(mixed_plans: dict) -> None:
    W = mixed_workload()
    p = mixed_plans["optimal"]
    rng = np.random.default_rng(5)
    x = rng.integers(0, 30, W.domain.size).astype(float)
    truth = W.answer(x)
    trials = 4000
    errors = np.array([p.run(x, rng) - truth for _ in range(trials)])
    analytic = p.variances()
    np.testing.assert_allclose(errors.mean(axis=0), 0.0, atol=4.5 * np.sqrt(analytic / trials)
                               .max())
    empirical = errors.var(axis=0)
    # chi-square spread of a variance estimate: about sqrt(2 / trials) = 2.2 % per query
    assert np.max(np.abs(empirical / analytic - 1)) < 0.12
    assert (errors**2).sum(axis=1).mean() == pytest.approx(p.tse(), rel=0.03)


def test_weighted_queries_appendix_e() -> None:
    """Weights multiply query rows (w(q) = weight**2 in the SSE); the plan minimises the
    weighted SSE (WRMSE) and also reports the unweighted RMSE of the same strategy."""
    dom = Domain.from_sizes([3, 4], ["u", "v"], ["numeric"] * 2)
    groups = [Product((("u", PrefixBlock(3)),), weight=math.sqrt(2.0)),
              Product((("v", AllRangeBlock(4)),), weight=1.0),
              Product((("u", PrefixBlock(3)), ("v", PrefixBlock(4))), weight=math.sqrt(5.0))]
    W = Workload(dom, tuple(groups))
    weighted = QuerySmasher(workers=0).plan(W, BETA1)
    unweighted_W = Workload(dom, tuple(Product(g.blocks) for g in groups))
    plain = QuerySmasher(workers=0).plan(unweighted_W, BETA1)
    # WRMSE = sqrt(sum w Var / m) from the per-query variances of the weighted rows
    assert weighted.rmse() == pytest.approx(math.sqrt(weighted.variances().sum()
                                                      / W.num_queries), rel=1e-10)
    weights = np.concatenate([np.full(t.num_queries, t.weight**2) for t in W.terms])
    unweighted_var = weighted.variances() / weights
    assert weighted.fact("rmse_unweighted") == pytest.approx(
        math.sqrt(unweighted_var.sum() / W.num_queries), rel=1e-10)
    # optimising for the weights beats the unweighted optimum on the weighted objective
    cross = trace_term(W, plain.strategy) * plain.sensitivity[2] ** 2
    assert weighted.tse() < cross * (1 - 1e-3)
    # each residual's loss is the Eq. 4 optimum of its weighted sub-workload Gram
    Gw = W.gram().dense()
    for row in weighted.view("residual_table").records():
        names = [] if row["residual"] == "total" else row["residual"].split(" x ")
        keep = tuple(dom.names.index(n) for n in names)
        Q = residual_projector(dom.shape, keep)
        assert row["loss"] == pytest.approx(solve_optimal(Q.T @ Gw @ Q).loss, rel=1e-8)


def test_huge_domain_never_materialised(noiseless) -> None:
    """[40]^40 (1.2e64 cells): plan, measure by counting, reconstruct, zero-noise exact."""
    n, d = 40, 40
    dom = Domain.from_sizes([n] * d, kinds=["numeric"] * d)
    W = Workload(dom, (PrefixMarginals(k=1), PrefixMarginals(k=2)))
    p = QuerySmasher(workers=0).plan(W, BETA1)
    assert p.strategy.shape[1] == n**d
    assert p.fact("distinct_subproblems") <= 3
    data = Dataset.synthetic(dom, 50, rng=7)
    got = p.reconstruct(noiseless(p, data))
    expected = W.answer_from_marginals(lambda ax: data.marginal([dom.names[i] for i in ax]))
    np.testing.assert_allclose(got, expected, atol=1e-6)
    noisy = p.run(data, np.random.default_rng(0))
    assert np.sqrt(np.mean((noisy - expected) ** 2)) == pytest.approx(p.rmse(), rel=0.05)


def test_identical_residuals_are_solved_once() -> None:
    dom = Domain.from_sizes([5] * 6, kinds=["numeric"] * 6)
    groups = [PrefixMarginals(k=1)] + [PairQueries(attrs=pair, pair_kind="abs_diff")
                                       for pair in itertools.combinations(dom.names, 2)]
    p = QuerySmasher(workers=0).plan(Workload(dom, tuple(groups)), BETA1)
    pairs = [r for r in p.view("residual_table").records() if r["residual"].count(" x ") == 1]
    pair_groups = {r["group"] for r in pairs}
    assert len(pair_groups) == 1
    assert {r["method"] for r in pairs} == {"dense"}
    assert p.fact("distinct_subproblems") == 3  # total, 1-way, 2-way


def test_progress_and_cancellation() -> None:
    W = mixed_workload()
    seen: list[tuple[int, float, str]] = []
    QuerySmasher(workers=0).plan(W, BETA1, Progress(lambda i, loss, msg: seen.append(
        (i, loss, msg))))
    assert any("solved" in msg for _, _, msg in seen)
    progress = Progress()
    progress.cancel()
    with pytest.raises(Cancelled):
        QuerySmasher(workers=0).plan(W, BETA1, progress)


def test_refusals() -> None:
    W = mixed_workload()
    with pytest.raises(NotApplicable, match="max-variance"):
        QuerySmasher(objective="max").plan(W, BETA1)
    with pytest.raises(NotApplicable, match="dense_limit"):
        QuerySmasher(dense_limit=8, workers=0).plan(W, BETA1)
    # the WFF / RP / RP+ sub-solvers need no explicit Gram, whatever the size
    assert QuerySmasher(sub_solver="fourier", dense_limit=8).plan(W, BETA1).tse() > 0


def test_max_objective_delegates_to_residual_planner() -> None:
    W = Workload(Domain.from_sizes([3, 4, 2]), (Marginals(k=2),))
    qs = QuerySmasher(sub_solver="residual", objective="max").plan(W, BETA1)
    rp = get("residual-planner", objective="max").plan(W, BETA1)
    assert qs.mechanism == "querysmasher"
    assert qs.fact("max_variance") == pytest.approx(rp.fact("max_variance"), rel=1e-6)
    assert float(qs.variances().max()) == pytest.approx(qs.fact("max_variance"), rel=1e-5)


@pytest.mark.slow
def test_executor_choice_does_not_change_the_plan() -> None:
    dom = Domain.from_sizes([16, 16, 17], ["x", "y", "z"], ["numeric"] * 3)
    W = Workload(dom, (PrefixMarginals(k=1), PairQueries(attrs=("x", "y"), pair_kind="affine"),
                       PairQueries(attrs=("y", "z"), pair_kind="abs_diff")))
    serial = QuerySmasher(executor=SerialExecutor()).plan(W, BETA1)
    with local_pool(max_workers=2) as pool:
        parallel = QuerySmasher(executor=pool).plan(W, BETA1)
    assert parallel.tse() == pytest.approx(serial.tse(), rel=1e-12)
    assert decompose(W).residuals[(0, 1)].cells == 256
