"""The registered eigen-design mechanism: HDMM Table 5's 1-D workloads, never worse than the
identity, the eps-DP variant (section 3.5), strategy views, progress, routing and refusals."""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest
from eigen_examples import FIG1_ROWS, fig1_workload, range_marginals

from engine.analysis.expected_error import explicit_trace
from engine.analysis.svd_bound import svd_bound
from engine.domain import Domain
from engine.errors import Cancelled, NotApplicable
from engine.mechanisms import get
from engine.mechanisms.eigen_design.design import dense_gram, eigen_design, eigen_queries
from engine.mechanisms.eigen_design.reductions import principal_vectors_partial
from engine.mechanisms.eigen_design.strategy import EigenStrategy, NormalSolver
from engine.privacy import Privacy
from engine.progress import Progress
from engine.scenario import Scenario
from engine.workloads import (
    AllRangeBlock,
    MatrixBlock,
    PermutedBlock,
    PrefixBlock,
    Product,
    RandomBlock,
    WidthRangeBlock,
    Workload,
)

GAUSS = Privacy(noise="gaussian", epsilon=1.0, delta=1e-6)  # HDMM Table 5's level
LAPLACE = Privacy(noise="laplace", epsilon=1.0)
ZCDP = Privacy(noise="zcdp", rho=0.5)


def E(plan, norm: int = 2) -> float:
    return plan.sensitivity[norm] ** 2 * plan.trace


# n, workload, our RMSE, HDMM's SVDB column, bound ratio (root scale)
TABLE5 = [
    (64, "all-range", 9.814, 9.62, 1.0201), (64, "prefix", 10.432, 8.62, 1.2103),
    (64, "width32", 8.816, 8.23, 1.0718), (64, "permuted", 9.814, 9.62, 1.0201),
    (256, "all-range", 12.364, 12.15, 1.0175), (256, "prefix", 13.013, 10.44, 1.2464),
    (256, "width32", 10.072, 9.73, 1.0349), (256, "permuted", 12.364, 12.15, 1.0175),
]


def table5_workload(kind: str, n: int) -> Workload:
    block = {"all-range": lambda: AllRangeBlock(n), "prefix": lambda: PrefixBlock(n),
             "width32": lambda: WidthRangeBlock(n, 32),
             "permuted": lambda: PermutedBlock(AllRangeBlock(n), 0)}[kind]()
    return Workload.one_dim(block)


@pytest.mark.parametrize(("n", "kind", "rmse", "svdb", "ratio"), TABLE5)
def test_hdmm_table5_one_dimensional_workloads(n, kind, rmse, svdb, ratio) -> None:
    """Within 1.03 of the SVD bound on all-range and permuted range (the paper's target).

    Not on prefix (the known CDF gap, spec R4 and 8.5: 1.21 / 1.25) nor on width-32, where
    the bound itself is not attained: HDMM's OPT_0 reaches 8.74 / 9.93 (1.062 / 1.021 over
    the bound) against our 8.816 / 10.072 (1.072 / 1.035).
    """
    W = table5_workload(kind, n)
    plan = get("eigen-design").plan(W, GAUSS)
    bound = svd_bound(W).rmse(W, GAUSS)
    assert bound == pytest.approx(svdb, abs=0.005)
    assert plan.rmse() == pytest.approx(rmse, abs=0.001)
    assert plan.rmse() / bound == pytest.approx(ratio, abs=1e-4)
    assert plan.fact("bound_ratio") == pytest.approx(plan.rmse() / bound, rel=1e-9)
    if kind in ("all-range", "permuted"):
        assert plan.rmse() <= 1.03 * bound
    assert plan.rmse() < get("identity").plan(W, GAUSS).rmse()


def test_permuted_range_has_exactly_the_range_error() -> None:
    W, Wp = table5_workload("all-range", 64), table5_workload("permuted", 64)
    assert E(get("eigen-design").plan(Wp, GAUSS)) == pytest.approx(
        E(get("eigen-design").plan(W, GAUSS)), rel=1e-9)


def never_worse_cases() -> dict[str, Workload]:
    rng = np.random.default_rng(3)
    dom = Domain.from_sizes([3, 4, 2])
    return {
        "fig1": fig1_workload(),
        "random predicates": Workload.one_dim(RandomBlock(20, 30, 0.3, seed=1)),
        "gaussian rows": Workload.one_dim(MatrixBlock(rng.standard_normal((15, 12)))),
        "low rank": Workload.one_dim(MatrixBlock(rng.standard_normal((3, 16)))),
        "marginals": Workload.marginals(dom, upto=2),
        "range marginals": range_marginals(dom, 2),
        "pair queries": Scenario.from_spec({
            "domain": {"a": {"size": 6, "kind": "numeric"}, "b": {"size": 5,
                                                                  "kind": "numeric"}},
            "workload": [{"affine": ["a", "b"]}, {"abs_diff": ["a", "b"]},
                         {"marginals": {"k": 1}}]}).workload,
    }


@pytest.mark.parametrize("case", list(never_worse_cases()))
@pytest.mark.parametrize("privacy", [GAUSS, ZCDP, LAPLACE], ids=["gaussian", "zcdp", "laplace"])
def test_never_worse_than_identity(case, privacy) -> None:
    W = never_worse_cases()[case]
    ours = get("eigen-design").plan(W, privacy)
    identity = get("identity").plan(W, privacy)
    assert ours.tse() <= identity.tse() * (1 + 1e-9)
    bound = svd_bound(W).value
    assert E(ours, privacy.norm) >= bound * (1 - 1e-9)


def test_laplace_variant_tries_every_design_set() -> None:
    """Section 3.5: no design set is universally good under L1, so auto keeps the best."""
    W = Workload.one_dim(AllRangeBlock(64))
    plan = get("eigen-design").plan(W, LAPLACE)
    table = plan.view("candidates")
    candidates = dict(zip(table.column("design set"), table.column("error at unit noise"),
                          strict=True))
    assert plan.fact("norm") == 1 and set(candidates) == {"eigen", "wavelet", "fourier",
                                                          "identity"}
    assert E(plan, 1) == pytest.approx(min(candidates.values()), rel=1e-12)
    # eigen-queries are poor under L1 on ranges; the weighted Haar basis beats plain Haar
    assert candidates["eigen"] > candidates["identity"]
    plain = E(get("wavelet").plan(W, LAPLACE), 1)
    weighted = candidates["wavelet"]
    assert math.sqrt(plain / weighted) == pytest.approx(1.034, abs=1e-3)  # paper: 1.1
    # the L1 weights beat the L2 weights under L1, and vice versa
    for norm, privacy in ((1, LAPLACE), (2, GAUSS)):
        own = get("eigen-design", design_set="eigen").plan(W, privacy)
        other = get("eigen-design", design_set="eigen",
                    noise_handling="l2" if norm == 1 else "l1").plan(W, privacy)
        assert E(own, norm) < E(other, norm)
    # the measurement uses Laplace noise scaled to the L1 sensitivity
    assert plan.noise_std() == pytest.approx(math.sqrt(2) * plan.sensitivity[1], rel=1e-12)


def test_strategy_views_for_the_dashboard() -> None:
    plan = get("eigen-design").plan(fig1_workload(), GAUSS)
    d = plan.facts()
    assert d["kind"] == "eigen-design" and d["structure"] == "dense" and d["rank"] == 4
    assert d["design_set"] == "eigen" and d["norm"] == 2
    eigenvalues = plan.view("eigenvalues").values
    np.testing.assert_allclose(eigenvalues, np.sort(eigenvalues)[::-1])
    assert plan.view("weights").values.shape == (4,)
    assert plan.view("completion").values.shape == (8,)
    assert d["completed_cells"] == 4 and d["strategy_rows"] == 8
    A = plan.view("strategy_matrix").array()
    assert A.shape == (8, 8)
    np.testing.assert_allclose(A, plan.strategy.dense())
    np.testing.assert_allclose((A**2).sum(axis=0), 1.0, atol=1e-9)  # completed columns
    Q = plan.view("design_queries").array()
    np.testing.assert_allclose(Q @ Q.T, np.eye(4), atol=1e-12)
    assert plan.view("program1").column("gap")[0] <= 1e-8
    assert set(plan.view("timings").column("stage")) == {"gram", "eigh", "design"}
    assert d["calibration"] == "analytic"
    assert d["unit_error"] == pytest.approx(E(plan), rel=1e-12)
    big = get("eigen-design").plan(Workload.one_dim(AllRangeBlock(128)), GAUSS)
    assert "strategy_matrix" not in [v.key for v in big.views()]  # only for small n


def test_reconstruction_and_variances() -> None:
    W = range_marginals(Domain.from_sizes([3, 4, 5]), 2)
    plan = get("eigen-design").plan(W, GAUSS)
    x = np.arange(60, dtype=float) % 7
    y = plan.strategy.matvec(x)
    np.testing.assert_allclose(plan.reconstruct(y), W.answer(x), rtol=1e-9, atol=1e-9)
    var = plan.variances()
    assert var.shape == (W.num_queries,)
    assert var.sum() == pytest.approx(plan.tse(), rel=1e-9)


def solver_case(kind: str, rng) -> tuple[EigenStrategy, np.ndarray, np.ndarray]:
    """A strategy whose NormalSolver takes the given route, its G and eigen-queries."""
    n = 24
    # eigh: rank 4 with a completion on 4 cells, a singular A^T A
    W = FIG1_ROWS if kind == "eigh" else rng.standard_normal((40, n))
    G = W.T @ W
    eig = eigen_queries(G)
    if kind == "woodbury":
        return principal_vectors_partial(G, 0.25).strategy, G, eig
    if kind == "cholesky":  # one unweighted eigen-query, every cell completed
        weights = np.sqrt(rng.uniform(0.2, 1.0, n))
        weights[3] = 0.0
        return EigenStrategy(eig.vectors, weights, completion=np.full(n, 0.5)), G, eig
    return eigen_design(eig, complete=kind != "orthonormal").strategy, G, eig


@pytest.mark.parametrize("kind", ["cholesky", "eigh", "orthonormal", "woodbury", "completion"])
def test_normal_solver_matches_an_explicit_pseudo_inverse(kind, rng) -> None:
    A, G, eig = solver_case(kind, rng)
    solver = NormalSolver(A)
    assert solver.kind == kind
    X = A.dense().T @ A.dense()
    ref = explicit_trace(G, X)
    assert solver.trace(G=G) == pytest.approx(ref, rel=1e-9)
    if kind != "woodbury":
        assert solver.trace(F=eig.factor()) == pytest.approx(ref, rel=1e-9)
        if A.queries.shape[0] == eig.rank:  # the strategy's queries are the eigen-queries
            assert solver.trace(diagonal=eig.values) == pytest.approx(ref, rel=1e-9)
    v = G @ rng.standard_normal(G.shape[0])  # inside the workload's row space
    np.testing.assert_allclose(X @ solver.apply(v), v, rtol=1e-8, atol=1e-8 * np.abs(v).max())


def test_unsupported_workload_gives_infinite_error() -> None:
    Q = np.eye(4)[:2]
    solver = NormalSolver(EigenStrategy(Q, np.ones(2)))
    assert solver.trace(G=np.eye(4)) == math.inf
    assert solver.trace(G=np.diag([1.0, 2, 0, 0])) == pytest.approx(3.0)


def test_progress_and_cancel() -> None:
    W = Workload.one_dim(AllRangeBlock(128))
    seen: list[tuple[int, str]] = []
    get("eigen-design").plan(W, GAUSS, Progress(lambda i, loss, msg: seen.append((i, msg))))
    messages = {m for _, m in seen}
    assert {"workload Gram", "eigendecomposition", "Program 1 (dual)"} <= messages
    progress = Progress()
    progress.cancel()
    with pytest.raises(Cancelled):
        get("eigen-design").plan(W, GAUSS, progress)


def test_routes_and_refusals() -> None:
    big = Workload.one_dim(AllRangeBlock(300))
    small_cap = {"max_dense_cells": 256}
    with pytest.raises(NotApplicable, match="max_dense_cells = 256"):
        get("eigen-design", **small_cap).plan(big, GAUSS)
    partial = get("eigen-design", reduction="principal", **small_cap).plan(big, GAUSS)
    assert partial.fact("structure") == "partial"
    assert E(partial) >= svd_bound(big).value
    with pytest.raises(NotApplicable, match="L2"):
        get("eigen-design", reduction="principal", eigensolver="partial").plan(big, LAPLACE)
    with pytest.raises(NotApplicable, match="eigen-query design set"):
        get("eigen-design", reduction="separation", design_set="wavelet").plan(big, GAUSS)
    # separation above the cap: iterative top eigen-queries, the rest one shared weight;
    # measured 1.0131x the full algorithm's RMSE (25 % of the eigen-queries, groups of 8)
    separated = get("eigen-design", reduction="separation", eigensolver="partial",
                    **small_cap).plan(big, GAUSS)
    assert separated.fact("structure") == "partial"
    assert separated.fact("eigenqueries_computed") == 75
    assert separated.fact("group_size") == 8
    full = get("eigen-design").plan(big, GAUSS)
    assert 1.010 <= math.sqrt(E(separated) / E(full)) <= 1.016
    # one all-range block: the closed-form sine eigenbasis, no eigensolver at all
    closed = get("eigen-design", reduction="separation", **small_cap).plan(big, GAUSS)
    assert closed.fact("structure") == "closed-form"
    assert closed.fact("exact_eigenbasis") is True
    assert closed.fact("completed_cells") == 300 // 8
    assert 1.0 <= math.sqrt(E(closed) / E(full)) <= 1.02
    assert closed.fact("bound_ratio") == pytest.approx(
        math.sqrt(E(closed) / svd_bound(big).value), rel=1e-9)
    x = np.arange(300.0)
    np.testing.assert_allclose(closed.reconstruct(closed.strategy.matvec(x)),
                               big.answer(x), rtol=1e-9, atol=1e-9)
    with pytest.raises(NotApplicable, match="L2"):
        get("eigen-design", reduction="separation", eigensolver="partial").plan(big, LAPLACE)
    product = range_marginals(Domain.from_sizes([4, 5, 6]), 2)
    kron = get("eigen-design", max_dense_cells=100).plan(product, GAUSS)
    assert kron.fact("structure") == "kronecker"
    with pytest.raises(NotApplicable, match="reduction=none"):
        get("eigen-design", structure="kronecker", reduction="principal").plan(product, GAUSS)
    pairs = never_worse_cases()["pair queries"]
    with pytest.raises(NotApplicable, match="union of Kronecker products"):
        get("eigen-design", structure="kronecker").plan(pairs, GAUSS)


def test_knobs_reach_the_plan() -> None:
    W = Workload.one_dim(AllRangeBlock(64))
    sep = get("eigen-design", reduction="separation", group_size=4).plan(W, GAUSS)
    assert sep.fact("reduction") == "separation" and sep.fact("group_size") == 4
    pv = get("eigen-design", reduction="principal", fraction=0.25).plan(W, GAUSS)
    assert pv.fact("principal") == 16
    bare = get("eigen-design", completion=False).plan(W, GAUSS)
    assert bare.fact("completed_cells") == 0
    assert E(bare) >= E(get("eigen-design").plan(W, GAUSS))
    reference = E(get("eigen-design").plan(W, GAUSS))
    for solver in ("dual", "ipm", "cvxpy"):
        other = get("eigen-design", solver=solver).plan(W, GAUSS)
        assert E(other) == pytest.approx(reference, rel=1e-5)


def test_li_miklau_calibration_only_rescales() -> None:
    W = fig1_workload()
    plan = get("eigen-design").plan(W, GAUSS)
    paper = GAUSS.with_(epsilon=0.5, delta=1e-4, calibration="li-miklau")
    assert plan.tse(paper) == pytest.approx(79.2279004 * E(plan), rel=1e-8)
    assert get("eigen-design").plan(W, paper).trace == pytest.approx(plan.trace, rel=1e-12)
    assert dense_gram(W) == pytest.approx(W.dense().T @ W.dense())


@pytest.mark.parametrize(("n", "settings", "structure"), [
    (4160, {"reduction": "separation"}, "closed-form"),
    (1536, {"reduction": "separation", "eigensolver": "partial"}, "partial"),
])
def test_memory_estimate_of_the_routes_without_eigh_brackets_the_measured_peak(
        n: int, settings: dict, structure: str) -> None:
    """The estimate is at least the traced peak of planning and at most 2.5x it (the dense
    model, 12 n x n arrays, was 10x too high on these routes)."""
    W = Workload(Domain.from_sizes([n], ["x"], ["numeric"]),
                 (Product((("x", AllRangeBlock(n)),)),))
    mechanism = get("eigen-design", **settings)
    estimate = mechanism.estimate(W, GAUSS).plan_bytes
    tracemalloc.start()
    try:
        plan = mechanism.plan(W, GAUSS)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert plan.fact("structure") == structure
    assert peak <= estimate <= 2.5 * peak, (estimate, peak)
