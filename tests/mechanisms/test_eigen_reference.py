"""The eigen-design spec's reference cases R0-R14 and Example 4, through the registered
mechanism (spec section 9; E := ||A||_2**2 tr[G (A^T A)^+] = TSE / P)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from eigen_examples import (
    FIG1_ROWS,
    all_predicates,
    fig1_workload,
    permuted,
    range_marginals,
)

from engine.analysis.expected_error import trace_term
from engine.analysis.svd_bound import svd_bound
from engine.domain import Domain
from engine.linalg.matrix import Dense
from engine.mechanisms import get
from engine.mechanisms.eigen_design.design import dense_gram, eigen_design, eigen_queries
from engine.privacy import Privacy
from engine.workloads import AllRangeBlock, MatrixBlock, PrefixBlock, Workload

#: The paper's privacy level with its own Gaussian calibration (R0).
PAPER = Privacy(noise="gaussian", epsilon=0.5, delta=1e-4, calibration="li-miklau")
RANGE8 = AllRangeBlock(8).dense()
PERM = [3, 7, 0, 5, 1, 6, 2, 4]


def E(plan) -> float:
    """TSE per unit privacy factor P: ``||A||_2**2 tr[G (A^T A)^+]``."""
    return plan.sensitivity[2] ** 2 * plan.trace


def plan(W: Workload, name: str = "eigen-design", **knobs):
    return get(name, **knobs).plan(W, PAPER)


def svdb(W: Workload) -> float:
    return svd_bound(W).value


def sdp_optimum(G: np.ndarray) -> float:
    """OPT (spec 1.8): min tr(G X^-1) s.t. diag(X) <= 1, X PSD (the exact optimum)."""
    import cvxpy as cp

    eig = eigen_queries(G)
    X = cp.Variable(G.shape, symmetric=True)
    prob = cp.Problem(cp.Minimize(cp.matrix_frac(eig.factor(), X)), [cp.diag(X) <= 1])
    prob.solve(solver=cp.CLARABEL)
    return float(prob.value)


def test_r0_privacy_constant() -> None:
    assert PAPER.unit_variance() == pytest.approx(79.22790042, rel=1e-9)
    assert PAPER.sigma() == pytest.approx(8.90100559, rel=1e-9)
    assert PAPER.describe().endswith("(li-miklau)")


def test_r1_sensitivity_is_the_largest_column_norm() -> None:
    W = fig1_workload()
    assert W.sensitivity(2) == pytest.approx(math.sqrt(5), rel=1e-12)
    assert np.linalg.norm(FIG1_ROWS, 2) == pytest.approx(4.1306, abs=1e-4)  # not this one


def test_r2_fig1_workload() -> None:
    W = fig1_workload()
    eig = eigen_queries(dense_gram(W))
    assert eig.rank == 4
    np.testing.assert_allclose(eig.values[::-1], [9 - 65**0.5, 9 - 17**0.5, 9 + 17**0.5,
                                                  9 + 65**0.5], rtol=1e-12)
    assert svdb(W) == pytest.approx(14.933034, rel=1e-7)
    assert E(plan(W, "identity")) == pytest.approx(36, rel=1e-12)
    assert E(plan(W, "wavelet")) == pytest.approx(21, rel=1e-12)
    assert E(plan(W, "h2")) == pytest.approx(19.961905, rel=1e-7)
    p = plan(W)
    d = p.facts()
    assert d["value_before_completion"] == pytest.approx(15.808275, rel=1e-7)
    np.testing.assert_allclose(p.view("completion").values, [0, 0] + [0.306351] * 4 + [0, 0],
                               atol=2e-6)
    assert E(p) == pytest.approx(15.473621, rel=1e-5)
    assert d["approximation_ratio"] == pytest.approx(1.738780, rel=1e-6)
    assert math.sqrt(E(p) / svdb(W)) == pytest.approx(1.017939, abs=2e-6)
    # absolute root-TSE at eps = 0.5, delta = 1e-4 (P = 79.2279)
    assert math.sqrt(p.tse()) == pytest.approx(35.013, abs=1e-3)
    assert math.sqrt(plan(W, "identity").tse()) == pytest.approx(53.406, abs=1e-3)
    assert math.sqrt(plan(W, "wavelet").tse()) == pytest.approx(40.790, abs=1e-3)
    assert math.sqrt(PAPER.unit_variance() * svdb(W)) == pytest.approx(34.396, abs=1e-3)


def test_example4_ratios() -> None:
    """Example 4 (spec 8.3): root ratios to the bound; paper 1.554 / 1.186 / 1.021."""
    W = fig1_workload()
    bound = svdb(W)
    ratios = {name: math.sqrt(E(plan(W, name)) / bound)
              for name in ("identity", "wavelet", "eigen-design")}
    assert ratios["identity"] == pytest.approx(1.5527, abs=1e-4)
    assert ratios["wavelet"] == pytest.approx(1.1859, abs=1e-4)
    assert ratios["eigen-design"] == pytest.approx(1.0179, abs=1e-4)


@pytest.mark.parametrize(("block", "ref"), [
    # R3: all range n = 8; R4: prefix n = 8; R11: all range n = 16
    (AllRangeBlock(8), dict(svdb=79.172339, identity=120, wavelet=93.5, h2=117.333333,
                            workload=160, eigen=82.219506, p1=84.871298, rho=1.657065)),
    (PrefixBlock(8), dict(svdb=16.551386, identity=36, wavelet=22.5, h2=21.942857,
                          workload=64, eigen=20.888202, p1=22.930838, rho=1.940986)),
    (AllRangeBlock(16), dict(svdb=404.482931, identity=816, wavelet=514.0625, h2=657.609831,
                             eigen=421.281150, p1=440.250656)),
])
def test_r3_r4_r11_one_dimensional_workloads(block, ref) -> None:
    W = Workload.one_dim(block)
    assert svdb(W) == pytest.approx(ref["svdb"], rel=1e-7)
    for name in ("identity", "wavelet", "h2", "workload"):
        if name in ref:
            assert E(plan(W, name)) == pytest.approx(ref[name], rel=1e-7), name
    p = plan(W)
    assert E(p) == pytest.approx(ref["eigen"], rel=1e-5)
    assert p.fact("value_before_completion") == pytest.approx(ref["p1"], rel=1e-7)
    if "rho" in ref:
        assert p.fact("approximation_ratio") == pytest.approx(ref["rho"], rel=1e-6)


def test_r3_completion_on_the_end_cells() -> None:
    d = plan(Workload.one_dim(AllRangeBlock(8))).view("completion").values
    np.testing.assert_allclose(d, [0.417786] + [0] * 6 + [0.417786], atol=2e-6)


def test_r4_prefix_completion() -> None:
    d = plan(Workload.one_dim(PrefixBlock(8))).view("completion").values
    np.testing.assert_allclose(d, [0, .097303, .170555, .245864, .326529, .416762, .524792,
                                   .673362], atol=2e-6)


def test_opt_ratios_small_cases() -> None:
    """R2-R4: the exact optimum (SDP) lies between the bound and Eigen-Design."""
    for W, opt, ratio in ((fig1_workload(), 15.018015, 1.015055),
                          (Workload.one_dim(AllRangeBlock(8)), 80.464263, 1.010848),
                          (Workload.one_dim(PrefixBlock(8)), 17.866177, 1.081271)):
        ours = sdp_optimum(dense_gram(W))
        assert ours == pytest.approx(opt, rel=1e-5)
        assert svdb(W) <= ours <= E(plan(W))
        assert math.sqrt(E(plan(W)) / ours) == pytest.approx(ratio, abs=1e-5)


def test_r5_two_way_marginals_meet_the_bound() -> None:
    W = Workload.marginals(Domain.from_sizes([2, 2, 2]), k=2)
    eig = eigen_queries(dense_gram(W))
    np.testing.assert_allclose(np.sort(eig.values), [2, 2, 2, 4, 4, 4, 6], rtol=1e-12)
    bound = (6**0.5 + 6 + 3 * 2**0.5) ** 2 / 8
    assert svdb(W) == pytest.approx(bound, rel=1e-12) == pytest.approx(20.136272, rel=1e-7)
    assert E(plan(W)) == pytest.approx(bound, rel=1e-9)
    assert E(plan(W, "identity")) == pytest.approx(24, rel=1e-12)
    assert E(plan(W, "workload")) == pytest.approx(21, rel=1e-12)


def test_r6_all_predicates() -> None:
    W = Workload.one_dim(MatrixBlock(all_predicates(4)))
    assert E(plan(W)) == pytest.approx(27.416408, rel=1e-7)
    assert E(plan(W)) == pytest.approx(svdb(W), rel=1e-9)
    assert E(plan(W, "identity")) == E(plan(W, "workload")) == pytest.approx(32, rel=1e-12)
    n = 6  # closed form 2**(n-2) (sqrt(n+1) + n - 1)**2 / n
    W6 = Workload.one_dim(MatrixBlock(all_predicates(n)))
    closed = 2 ** (n - 2) * (math.sqrt(n + 1) + n - 1) ** 2 / n
    assert E(plan(W6)) == pytest.approx(closed, rel=1e-9)


def test_r7_diagonal_workload_gives_the_identity() -> None:
    W = Workload.one_dim(MatrixBlock(np.diag([1.0, 2, 3, 4])))
    p = plan(W)
    assert E(p) == pytest.approx(30, rel=1e-9)
    A = p.view("strategy_matrix").array()  # the unit vectors, in descending eigenvalue order
    np.testing.assert_allclose(A.T @ A, np.eye(4), atol=1e-9)
    np.testing.assert_allclose(np.abs(A).sum(axis=1), 1.0, atol=1e-9)
    assert svdb(W) == pytest.approx(25, rel=1e-12)
    assert p.fact("approximation_ratio") == pytest.approx(1.264911, rel=1e-6)


def test_r8_identity_workload() -> None:
    W = Workload.one_dim(MatrixBlock(np.eye(7)))
    assert E(plan(W)) == pytest.approx(7, rel=1e-12) == pytest.approx(svdb(W), rel=1e-12)


def test_r9_permutation_invariance() -> None:
    W = Workload.one_dim(permuted(RANGE8, PERM))
    assert E(plan(W)) == pytest.approx(82.219506, rel=1e-5)
    assert E(plan(W, "wavelet")) == pytest.approx(121.25, rel=1e-12)
    assert E(plan(W, "h2")) == pytest.approx(183.619048, rel=1e-7)
    assert E(plan(W, "identity")) == pytest.approx(120, rel=1e-12)


def test_r10_orthogonal_invariance(rng) -> None:
    U, _ = np.linalg.qr(rng.standard_normal((36, 36)))
    W = Workload.one_dim(MatrixBlock(U @ RANGE8))
    assert svdb(W) == pytest.approx(79.172339, rel=1e-7)
    assert E(plan(W)) == pytest.approx(82.219506, rel=1e-5)


@pytest.mark.parametrize(("n", "eigen", "haar", "hier"), [
    # The spec prints 1.0206 at n = 64, the n = 16 value of R11 (1.020554) rounded; the
    # faithful algorithm gives 1.020057 there, with our solvers and with cvxpy/Clarabel alike
    # (a smooth sequence: 1.020554, 1.020785, 1.020057, 1.018855, 1.017502 for n = 16..256).
    (64, 1.0201, 1.163, 1.298), (256, 1.0175, 1.198, 1.310)])
def test_r12_larger_all_range(n, eigen, haar, hier) -> None:
    W = Workload.one_dim(AllRangeBlock(n))
    ours = E(plan(W))
    assert math.sqrt(ours / svdb(W)) == pytest.approx(eigen, abs=1e-4)
    assert math.sqrt(E(plan(W, "wavelet")) / ours) == pytest.approx(haar, abs=1e-3)
    assert math.sqrt(E(plan(W, "h2")) / ours) == pytest.approx(hier, abs=1e-3)


CENSUS = Domain.from_sizes([8, 16, 16])  # spec 8.1: the US Census layout of Table 2
#: workload -> (Eigen-Design over the bound (root scale), its tolerance, rank of W)
TABLE2 = {
    "all range": (lambda: Workload.one_dim(AllRangeBlock(2048)), 1.0138, 1e-4, 2048),
    # completion depends on the weights, not only on Program 1's value: single- and
    # multi-threaded BLAS give weights whose objectives agree to 1.4e-9 but completed errors
    # 1.28190 and 1.28180 (spec pitfall 8: weights agree only to ~1e-4 on a flat optimum)
    "CDF": (lambda: Workload.one_dim(PrefixBlock(2048)), 1.2819, 2e-4, 2048),
    "1-way range marginals": (lambda: range_marginals(CENSUS, 1), 1.0202, 1e-4, 38),
    "2-way range marginals": (lambda: range_marginals(CENSUS, 2), 1.0501, 1e-4, None),
    "2-way marginals": (lambda: Workload.marginals(CENSUS, k=2), 1.0000, 1e-4, 473),
    "2-way marginals 8x8x16x2": (
        lambda: Workload.marginals(Domain.from_sizes([8, 8, 16, 2]), k=2), 1.0000, 1e-4, 319),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(TABLE2))
def test_r12_table2_bound_ratios_at_2048(name) -> None:
    """R12 / spec 8.5 at n = 2048: Table 2's 'ratio to bound' column is the inverse of these
    (0.986 / 0.780 / 0.980 / 0.952 / 1.000; paper 0.99 / 0.80 / 0.98 / 0.95 / 1.00)."""
    build, ratio, tolerance, rank = TABLE2[name]
    W = build()
    ours = plan(W)
    assert math.sqrt(E(ours) / svdb(W)) == pytest.approx(ratio, abs=tolerance)
    if rank is not None:
        assert ours.fact("rank") == rank
    if name == "all range":  # R12: Haar / Eigen 1.226, hierarchical / Eigen 1.313
        assert math.sqrt(E(plan(W, "wavelet")) / E(ours)) == pytest.approx(1.226, abs=1e-3)
        assert math.sqrt(E(plan(W, "h2")) / E(ours)) == pytest.approx(1.313, abs=1e-3)


STRUCTURAL = {
    "fig1": fig1_workload,
    "range8": lambda: Workload.one_dim(AllRangeBlock(8)),
    "prefix8": lambda: Workload.one_dim(PrefixBlock(8)),
    "range16": lambda: Workload.one_dim(AllRangeBlock(16)),
    "predicates5": lambda: Workload.one_dim(MatrixBlock(all_predicates(5))),
    "random": lambda: Workload.one_dim(MatrixBlock(
        np.random.default_rng(7).integers(0, 2, (12, 10)).astype(float))),
}


@pytest.mark.parametrize("case", list(STRUCTURAL))
def test_r13_structural_invariants(case) -> None:
    W = STRUCTURAL[case]()
    eig = eigen_queries(dense_gram(W))
    full = eigen_design(eig)
    bare = eigen_design(eig, complete=False)
    rho = eig.approximation_ratio()
    # (a) between the bound and Theorem 3's factor
    assert eig.svd_bound * (1 - 1e-9) <= full.unit_error() <= rho**2 * eig.svd_bound
    # (b) after completion every column has norm ||A||_2 (up to the completion cutoff)
    norms = full.strategy.column_norms(2)
    assert norms.min() >= norms.max() * (1 - 1e-9) or np.all(
        norms.max() ** 2 - norms**2 <= 1e-9 * norms.max() ** 2)
    # (d) completion never increases the error
    assert full.unit_error() <= bare.unit_error() * (1 + 1e-12)
    # (f) scaling A and reordering its rows leave E unchanged
    A = full.strategy.dense()
    for B in (3.7 * A, A[np.random.default_rng(1).permutation(A.shape[0])]):
        e = Dense(B).sensitivity(2) ** 2 * trace_term(W, Dense(B))
        assert e == pytest.approx(full.unit_error(), rel=1e-9)
    # ... and so does reordering W's rows
    rows = W.dense()[np.random.default_rng(2).permutation(W.num_queries)]
    assert E(plan(Workload.one_dim(MatrixBlock(rows)))) == pytest.approx(
        full.unit_error(), rel=1e-7)


@pytest.mark.parametrize(("W", "value"), [
    (Workload.marginals(Domain.from_sizes([2, 2, 2]), k=2), 20.136272),
    (Workload.one_dim(MatrixBlock(all_predicates(4))), 27.416408),
    (Workload.marginals(Domain.from_sizes([4, 4, 4]), k=2), 107.433084),
])
def test_r13g_symmetric_workloads_stay_optimal_under_permutation(W, value, rng) -> None:
    G = dense_gram(W)
    perm = rng.permutation(G.shape[0])
    eig = eigen_queries(G[np.ix_(perm, perm)])
    assert eig.svd_bound == pytest.approx(value, rel=1e-7)
    assert eigen_design(eig).unit_error() == pytest.approx(eig.svd_bound, rel=1e-8)


def test_r14_monte_carlo_agreement() -> None:
    """20 000 seeded runs of measure + least squares on Fig. 1: mean TSE -> P E = 1225.94."""
    W = fig1_workload()
    p = plan(W)
    assert p.tse() == pytest.approx(1225.94, abs=0.01)
    x = np.array([12.0, 40, 7, 3, 0, 25, 9, 1])
    trials = 20_000
    rng = np.random.default_rng(14)
    A = p.strategy
    noise = PAPER.sample((A.shape[0], trials), p.sensitivity[2], rng)
    answers = p.reconstruct(A.matvec(np.repeat(x[:, None], trials, axis=1)) + noise)
    sq = ((answers - W.answer(x)[:, None]) ** 2).sum(axis=0)
    # one draw has relative sd ~0.80 (spec R14); allow 3 standard errors
    assert sq.mean() == pytest.approx(p.tse(), rel=3 * 0.80 / math.sqrt(trials))
    # the same through the public run() on a handful of draws (shape and finiteness)
    assert p.run(x, rng).shape == (W.num_queries,)
