"""HDMM OPT_0 (spec hdmm.md section 3; reference cases R5-R7; Tables 4 and 5, OPT_0 column).

Laplace numbers are RMSE at eps = 1 (variance 2 ||A||_1^2); Gaussian numbers use the analytic
sigma(1, 1e-6) = 4.224679. Table values are printed to two decimals: ours must be at most the
printed value plus half a unit of the last digit (lower error is fine).
"""

from __future__ import annotations

import importlib
import math

import numpy as np
import pytest

from engine.analysis.svd_bound import svd_bound_explicit
from engine.domain import Domain
from engine.mechanisms import get
from engine.mechanisms.hdmm.gaussian_opt0 import gaussian_opt0
from engine.mechanisms.hdmm.laplace_opt0 import (
    AGREE_RTOL,
    optimize_pidentity,
    pidentity_loss_grad,
)
from engine.mechanisms.hdmm.opt0 import opt0
from engine.mechanisms.hdmm.opt0_mechanism import explicit_gram
from engine.mechanisms.hdmm.pidentity import PIdentity
from engine.mechanisms.hdmm.structure import ProductUnion
from engine.mechanisms.hdmm.workload_gram import (
    KroneckerGram,
    WorkloadGram,
    semiseparable_generators,
)
from engine.privacy import Privacy
from engine.workloads import Product, Workload
from engine.workloads.blocks import (
    AllRangeBlock,
    IdentityBlock,
    PermutedBlock,
    PrefixBlock,
    WidthRangeBlock,
)

LAPLACE = Privacy(noise="laplace", epsilon=1.0)
GAUSSIAN = Privacy(noise="gaussian", epsilon=1.0, delta=1e-6)


pytestmark = pytest.mark.usefixtures("one_blas_thread")
#: the p-Identity search's module (its rules' constants and executor hook are patched)
LAPLACE_OPT0 = importlib.import_module("engine.mechanisms.hdmm.laplace_opt0")


def rmse(unit: float, m: int, privacy: Privacy) -> float:
    return privacy.sigma() * math.sqrt(unit / m)


def block(kind: str, n: int):
    return {"all-range": lambda: AllRangeBlock(n), "prefix": lambda: PrefixBlock(n),
            "width32": lambda: WidthRangeBlock(n, 32),
            "permuted": lambda: PermutedBlock(AllRangeBlock(n), 0)}[kind]()


# ----- R1-R4 where OPT_0 uses them ------------------------------------------------------
def test_r1_to_r4_as_used_by_opt0() -> None:
    # R1: the noise unit of every Gaussian RMSE below
    assert GAUSSIAN.sigma() == pytest.approx(4.224678889, abs=1e-6)
    # R2: the Grams OPT_0 optimises against
    np.testing.assert_array_equal(PrefixBlock(4).gram_array(),
                                  [[4, 3, 2, 1], [3, 3, 2, 1], [2, 2, 2, 1], [1, 1, 1, 1]])
    np.testing.assert_array_equal(AllRangeBlock(4).gram_array(),
                                  [[4, 3, 2, 1], [3, 6, 4, 2], [2, 4, 6, 3], [1, 2, 3, 4]])
    # R3: OPT_0's Identity candidate at n = 64 (Laplace RMSE)
    for kind, target in (("all-range", 6.6332), ("prefix", 8.0623), ("width32", 8.0)):
        b = block(kind, 64)
        f = opt0(b.gram_array(), 1, restarts=1, polish_iterations=0)
        assert rmse(f.info["candidates"]["identity"], b.shape[0], LAPLACE) == pytest.approx(
            target, abs=5e-5)
    # R4: the raw SVD bounds lie under the Gaussian optima (R5) and the certified lower bound
    for blk, bound in ((PrefixBlock(4), 6.411474), (AllRangeBlock(4), 16.312243),
                       (PrefixBlock(8), 16.551386), (AllRangeBlock(8), 79.172339)):
        V = blk.gram_array()
        assert svd_bound_explicit(V) == pytest.approx(bound, rel=1e-6)
        _, _, info = gaussian_opt0(V)
        assert info["lower_bound"] >= bound


# ----- R6: the p-Identity objective and its exact gradient ------------------------------
def test_r6_example_10_matrix_loss_and_gradient() -> None:
    theta = np.array([[1.0, 2.0, 3.0], [1.0, 1.0, 1.0]])
    A = PIdentity(theta).dense()
    expected = np.array([[1 / 3, 0, 0], [0, 1 / 4, 0], [0, 0, 1 / 5], [1 / 3, 2 / 4, 3 / 5],
                         [1 / 3, 1 / 4, 1 / 5]])
    np.testing.assert_allclose(A, expected, rtol=1e-12)
    np.testing.assert_allclose(A.sum(axis=0), 1.0, rtol=1e-12)
    f, g = pidentity_loss_grad(theta.ravel(), AllRangeBlock(3).gram_array(), 2)
    assert f == pytest.approx(48.833333, abs=1e-6)
    np.testing.assert_allclose(g.reshape(2, 3), [[13.972222, 10.861111, -0.25],
                                                 [-2.458333, 1.291667, 15.375]], atol=1e-6)


def test_r6_prefix_4_with_theta_ones() -> None:
    A = PIdentity(np.ones((1, 4))).dense()
    np.testing.assert_allclose(A, np.vstack([np.eye(4), np.ones((1, 4))]) / 2)
    f, g = pidentity_loss_grad(np.ones(4), PrefixBlock(4).gram_array(), 1)
    assert f == pytest.approx(16.0, rel=1e-12)
    np.testing.assert_allclose(g, [1.6, 0.0, 0.8, 4.0], atol=1e-12)


@pytest.mark.parametrize("kind", ["all-range", "prefix", "width32"])
def test_r6_gradient_matches_central_differences(kind: str) -> None:
    n, p = 40, 3
    V = block(kind, n).gram_array()
    theta = np.random.default_rng(7).random(p * n)
    f, g = pidentity_loss_grad(theta, V, p)
    h = 1e-5
    fd = np.array([(pidentity_loss_grad(theta + h * e, V, p)[0]
                    - pidentity_loss_grad(theta - h * e, V, p)[0]) / (2 * h)
                   for e in np.eye(p * n)])
    assert np.abs(fd - g).max() <= 1e-7 * np.abs(g).max()
    # and the loss is the explicit trace
    A = PIdentity(theta.reshape(p, n)).dense()
    assert f == pytest.approx(float(np.trace(np.linalg.solve(A.T @ A, V))), rel=1e-10)


def test_pidentity_structure_and_least_squares() -> None:
    rng = np.random.default_rng(3)
    theta = rng.random((4, 9))
    A = PIdentity(theta)
    D = A.dense()
    x, y = rng.standard_normal(9), rng.standard_normal(13)
    X = rng.standard_normal((9, 3))
    np.testing.assert_allclose(A.matvec(x), D @ x)
    np.testing.assert_allclose(A.matvec(X), D @ X)
    np.testing.assert_allclose(A.rmatvec(y), D.T @ y)
    np.testing.assert_allclose(A.gram_array(), D.T @ D)
    np.testing.assert_allclose(A.column_norms(1), 1.0)
    np.testing.assert_allclose(A.column_norms(2), np.sqrt((D * D).sum(axis=0)))
    np.testing.assert_allclose(A.gram_pinv(), np.linalg.inv(D.T @ D), rtol=1e-9)
    np.testing.assert_allclose(A.pinv_apply(y), np.linalg.lstsq(D, y, rcond=None)[0], rtol=1e-9)
    np.testing.assert_allclose(A.pinv_matrix(), np.linalg.pinv(D), rtol=1e-9, atol=1e-12)
    with pytest.raises(ValueError, match="non-negative"):
        PIdentity(-theta)


# ----- the fast products with the workload Gram -----------------------------------------
def test_semiseparable_grams_multiply_as_the_dense_product() -> None:
    """Prefixes, all ranges and weighted sums of them have a rank-one lower triangle; the
    running-sum product is the dense one to round-off, and so are loss and gradient."""
    rng = np.random.default_rng(5)
    for V in (PrefixBlock(97).gram_array(), AllRangeBlock(97).gram_array(),
              AllRangeBlock(97).gram_array() + 2.5 * PrefixBlock(97).gram_array()):
        gram = WorkloadGram.of(V)
        assert gram.generators is not None
        a, b = gram.generators
        np.testing.assert_allclose(np.tril(np.outer(a, b)), np.tril(V), rtol=1e-13)
        X = rng.random((6, 97))
        np.testing.assert_allclose(gram.right_multiply(X), X @ V, rtol=1e-12)
        theta = rng.random(6 * 97)
        f_fast, g_fast = pidentity_loss_grad(theta, gram, 6)
        f_dense, g_dense = pidentity_loss_grad(theta, V, 6)
        assert f_fast == pytest.approx(f_dense, rel=1e-12)
        np.testing.assert_allclose(g_fast, g_dense, rtol=1e-9, atol=1e-12 * np.abs(g_dense).max())
    # width-32 ranges (banded), a permuted order, identity and a one-entry change are not
    for V in (WidthRangeBlock(97, 32).gram_array(),
              PermutedBlock(AllRangeBlock(97), 0).gram_array(), np.eye(5)):
        assert semiseparable_generators(V) is None
    V = AllRangeBlock(40).gram_array()
    V[30, 3] += 1e-6 * V.max()
    V[3, 30] = V[30, 3]
    assert semiseparable_generators(V) is None


def test_product_union_grams_multiply_one_attribute_at_a_time() -> None:
    domain = Domain.from_sizes([12, 6, 3], ["a", "b", "c"], ["numeric"] * 3)
    workload = Workload(domain, (
        Product((("a", AllRangeBlock(12)), ("b", PrefixBlock(6)), ("c", IdentityBlock(3)))),
        Product((("a", PrefixBlock(12)),)),
    ))
    union = ProductUnion.of(workload)
    V = explicit_gram(workload, union)
    gram = WorkloadGram.of_union(V, union)
    assert isinstance(gram, KroneckerGram) and len(gram.terms) == 2
    X = np.random.default_rng(2).random((4, 216))
    np.testing.assert_allclose(gram.right_multiply(X), X @ V, rtol=1e-12)


def test_starts_stop_once_the_best_two_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    """All ranges on 256 cells (p = 16, seed 0): the first three screened starts disagree (the
    best two 0.3 % of the loss apart), the fourth agrees with the best within AGREE_RTOL and
    no fifth runs, also with the earlier budget of about eight starts: agreement stops it.
    The polished best is at Table 4's printed 8.07 or below. Prefixes (seed 0) run the two
    starts the work budget admits (the first takes 150 evaluations, half the budget) and reach
    the printed 7.35."""
    b = block("all-range", 256)
    V, m = b.gram_array(), b.shape[0]
    _, f, losses = optimize_pidentity(V, 16, seed=0)
    assert len(losses) == 4
    first, second = sorted(losses[:3])[:2]
    assert second - first > AGREE_RTOL * second
    first, second = sorted(losses)[:2]
    assert second - first <= AGREE_RTOL * second and losses[3] in (first, second)
    assert 8.07 * 0.995 <= rmse(f, m, LAPLACE) <= 8.075
    monkeypatch.setattr(LAPLACE_OPT0, "SCREEN_WORK", 800 * 16 * 256**2)
    _, f_wide, losses_wide = optimize_pidentity(V, 16, seed=0)
    assert losses_wide == losses and f_wide == f
    monkeypatch.undo()
    b = block("prefix", 256)
    V, m = b.gram_array(), b.shape[0]
    _, f, losses = optimize_pidentity(V, 16, seed=0)
    assert len(losses) == 2
    assert 7.35 * 0.995 <= rmse(f, m, LAPLACE) <= 7.355


# ----- R5: the Gaussian convex problem --------------------------------------------------
@pytest.mark.parametrize(("blk", "optimum", "identity"), [
    (PrefixBlock(4), 6.874144, 10.0), (AllRangeBlock(4), 16.440887, 20.0),
    (PrefixBlock(8), 17.866177, 36.0), (AllRangeBlock(8), 80.464265, 120.0)])
def test_r5_gaussian_optimum_values(blk, optimum: float, identity: float) -> None:
    V = blk.gram_array()
    A, loss, info = gaussian_opt0(V)
    assert loss == pytest.approx(optimum, rel=1e-4)
    assert svd_bound_explicit(V) <= info["lower_bound"] <= loss < identity
    assert info["gap"] <= 1e-6
    assert info["factorization"] == "cholesky"
    np.testing.assert_allclose(np.tril(A, -1), 0.0)  # upper triangular A = L^T
    np.testing.assert_allclose((A * A).sum(axis=0), 1.0, rtol=1e-10)  # unit columns
    assert float(np.trace(np.linalg.solve(A.T @ A, V))) == pytest.approx(loss, rel=1e-9)


def test_r5_gaussian_n64_rmse() -> None:
    for kind, target in (("all-range", 9.73), ("prefix", 8.87)):
        b = block(kind, 64)
        f = opt0(b.gram_array(), 2)
        assert rmse(f.loss, b.shape[0], GAUSSIAN) == pytest.approx(target, abs=0.01)


def test_gaussian_singular_workloads() -> None:
    # a total-only Gram: Total attains the SVD bound, so it is returned without optimising
    f = opt0(np.ones((5, 5)) * 3.0, 2)
    assert f.kind == "total" and f.loss == pytest.approx(3.0)
    # rank-deficient width-k ranges are solved exactly (multipliers may reach zero)
    V = WidthRangeBlock(16, 8).gram_array()
    A, loss, info = gaussian_opt0(V)
    assert info["rank"] == 9 and info["gap"] <= 1e-6
    G = A.T @ A
    assert float((np.linalg.pinv(G) * V).sum()) * (A * A).sum(axis=0).max() == pytest.approx(
        loss, rel=1e-7)


# ----- R7: Laplace OPT_0 ----------------------------------------------------------------
def test_r7_laplace_n64_and_identity_candidate() -> None:
    for kind, target in (("all-range", 5.55), ("prefix", 5.32)):
        b = block(kind, 64)
        V = b.gram_array()
        f = opt0(V, 1)
        assert rmse(f.loss, b.shape[0], LAPLACE) == pytest.approx(target, abs=0.02)
        assert f.loss <= float(np.trace(V))  # never worse than Identity
        assert f.info["candidates"]["identity"] == pytest.approx(float(np.trace(V)))
        assert f.matrix.sensitivity(1) == pytest.approx(1.0)


def test_r7_restarts_matter() -> None:
    # AllRange on 32 cells with p = 2: starts end in different local optima (spec R7: best
    # 5343.4), so the best of several is kept
    V = AllRangeBlock(32).gram_array()
    _, best, losses = optimize_pidentity(V, 2, restarts=8, seed=0, polish_iterations=0)
    assert max(losses) > 1.005 * min(losses)
    assert best == pytest.approx(min(losses), rel=1e-9)
    assert best == pytest.approx(5343.4, rel=1e-4)


def test_small_n_starts_do_not_collapse_to_identity() -> None:
    """All ranges on 64 cells: plain Uniform[0, 1) starts ended on theta = 0 (the identity
    point, RMSE 6.633) for 4 of 8 seeds; every start smoothed through the workload reaches
    the multi-start optimum within 1 %, and the default plan is reproducible from its seed."""
    b = block("all-range", 64)
    V, m = b.gram_array(), b.shape[0]
    identity = rmse(float(np.trace(V)), m, LAPLACE)
    assert identity == pytest.approx(6.6332, abs=1e-4)
    optimum = rmse(optimize_pidentity(V, 4, restarts=16, seed=1)[1], m, LAPLACE)
    assert optimum == pytest.approx(5.5524, abs=1e-3)  # the paper prints 5.55
    for seed in range(8):
        _, f, losses = optimize_pidentity(V, 4, restarts=1, seed=seed, polish_iterations=0)
        assert len(losses) == 1
        assert optimum * (1 - 1e-3) <= rmse(f, m, LAPLACE) <= 1.01 * optimum
    domain = Domain.from_sizes([64], ["x"], ["numeric"])
    workload = Workload(domain, (Product((("x", AllRangeBlock(64)),)),))
    plans = [get("hdmm-opt0", seed=seed).plan(workload, LAPLACE) for seed in (3, 3, 4)]
    assert plans[0].fact("family") == "p-identity"
    assert optimum * (1 - 1e-3) <= plans[0].rmse() <= 1.01 * optimum
    assert plans[1].rmse() == plans[0].rmse()  # same seed, same plan
    assert plans[2].rmse() == pytest.approx(plans[0].rmse(), rel=0.01)


# ----- Tables 4 and 5, OPT_0 column ------------------------------------------------------
TABLE_64 = {"all-range": (5.55, 9.73), "prefix": (5.32, 8.87), "width32": (5.88, 8.74),
            "permuted": (5.55, 9.73)}
TABLE_256 = {"all-range": (8.07, 12.26), "prefix": (7.35, 10.66), "width32": (6.34, 9.93),
             "permuted": (8.06, 12.26)}


def check_opt0_cell(kind: str, n: int, lap: float, gau: float) -> None:
    """Both noises two-sided. Gaussian: between the certified dual bound and the printed
    value. Laplace (non-convex, no certificate): at most the printed value, at least the
    printed value less 0.5 % (our restarts reach local optima up to 0.34 % lower at n = 256)
    and at least the certified Gaussian bound in Laplace units (L1 >= L2 sensitivity)."""
    b = block(kind, n)
    V, m = b.gram_array(), b.shape[0]
    _, _, info = gaussian_opt0(V)
    ours_gau = rmse(opt0(V, 2).loss, m, GAUSSIAN)
    assert rmse(info["lower_bound"], m, GAUSSIAN) * (1 - 1e-9) <= ours_gau <= gau + 0.005
    ours_lap = rmse(opt0(V, 1).loss, m, LAPLACE)
    floor = max(0.995 * (lap - 0.005), rmse(info["lower_bound"], m, LAPLACE))
    assert floor <= ours_lap <= lap + 0.005


@pytest.mark.parametrize("kind", list(TABLE_64))
def test_tables_4_5_opt0_n64(kind: str) -> None:
    check_opt0_cell(kind, 64, *TABLE_64[kind])


@pytest.mark.parametrize("kind", list(TABLE_256))
def test_tables_4_5_opt0_n256(kind: str) -> None:
    check_opt0_cell(kind, 256, *TABLE_256[kind])


# ----- the "within 1.01 of the SVD bound" claim, checked against the certified optimum ----
#: Table 5's own OPT_0 / SVDB ratios (two-decimal RMSEs).
PAPER_RATIO = {("all-range", 64): 9.73 / 9.62, ("prefix", 64): 8.87 / 8.62,
               ("width32", 64): 8.74 / 8.23, ("permuted", 64): 9.73 / 9.62,
               ("all-range", 256): 12.26 / 12.15, ("prefix", 256): 10.66 / 10.44,
               ("width32", 256): 9.93 / 9.73, ("permuted", 256): 12.26 / 12.15}


@pytest.mark.parametrize(("kind", "n"), list(PAPER_RATIO))
def test_gaussian_opt0_against_svd_bound(kind: str, n: int) -> None:
    """The convex optimum is certified (duality gap), so its ratio to the SVD bound is the
    truth: within 1.01 only for all-range/permuted at n = 256; 1.011 at n = 64, 1.02-1.03 on
    prefix, and 1.057 (the paper prints 1.06) on width-32 ranges at n = 64."""
    V = block(kind, n).gram_array()
    _, loss, info = gaussian_opt0(V)
    assert info["gap"] <= 1e-6
    ratio = math.sqrt(loss / svd_bound_explicit(V))  # RMSE ratio
    lower = math.sqrt(info["lower_bound"] / svd_bound_explicit(V))
    assert 1.0 <= lower <= ratio <= PAPER_RATIO[(kind, n)] + 0.001
    if kind in ("all-range", "permuted"):
        assert ratio <= (1.011 if n == 64 else 1.01)
    else:
        assert ratio > 1.01  # the paper's "1.01" claim does not hold here
    if (kind, n) == ("width32", 64):
        assert ratio == pytest.approx(1.0572, abs=5e-4)
