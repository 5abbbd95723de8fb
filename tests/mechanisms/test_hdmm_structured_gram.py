"""OPT_0's structured workload Grams (issue 32 item 3): every structured product ``X V`` is
the dense one to 1e-10, so are the p-Identity loss and gradient (L1 and L2 columns), and OPT_0
reaches the same loss on either path; the L2 (Gaussian) family approaches the convex optimum
as p grows; the hierarchical start follows the cells' order through a permutation, and the
default plan reaches Table 4 at n = 1,024."""

from __future__ import annotations

import numpy as np
import pytest

from engine.domain import Domain
from engine.mechanisms import get
from engine.mechanisms.hdmm.gaussian_opt0 import gaussian_opt0
from engine.mechanisms.hdmm.laplace_opt0 import (
    hierarchical_start,
    hierarchy_blocks,
    optimize_pidentity,
    pidentity_loss_grad,
)
from engine.mechanisms.hdmm.opt0 import hierarchy_factor, opt0
from engine.mechanisms.hdmm.pidentity import PIdentity
from engine.mechanisms.hdmm.workload_gram import (
    DiagonalGram,
    PermutedGram,
    SemiseparableGram,
    StructuredGram,
    SumGram,
    WindowGram,
    WorkloadGram,
    workload_gram,
)
from engine.privacy import Privacy
from engine.workloads import Product, Workload
from engine.workloads.blocks import (
    AllRangeBlock,
    CircularRangeBlock,
    IdentityBlock,
    PermutedBlock,
    PrefixBlock,
    TotalBlock,
    WidthRangeBlock,
)

pytestmark = pytest.mark.usefixtures("one_blas_thread")

N = 97
BLOCKS = {
    "prefix": (PrefixBlock(N), SemiseparableGram),
    "all-range": (AllRangeBlock(N), SemiseparableGram),
    "total": (TotalBlock(N), SemiseparableGram),
    "identity": (IdentityBlock(N), DiagonalGram),
    "width-32": (WidthRangeBlock(N, 32), WindowGram),
    "width-1": (WidthRangeBlock(N, 1), WindowGram),
    "width-n": (WidthRangeBlock(N, N), WindowGram),
    "permuted all-range": (PermutedBlock(AllRangeBlock(N), 0), PermutedGram),
    "permuted width-32": (PermutedBlock(WidthRangeBlock(N, 32), 3), PermutedGram),
}


def one_dim(*blocks_weights) -> Workload:
    domain = Domain.from_sizes([N], ["x"], ["numeric"])
    return Workload(domain, tuple(Product((("x", b),), weight=w) for b, w in blocks_weights))


def close(fast: np.ndarray, dense: np.ndarray, rtol: float = 1e-10) -> None:
    """Entrywise within rtol of the largest dense entry (round-off of running sums)."""
    assert fast.shape == dense.shape
    assert float(np.abs(fast - dense).max()) <= rtol * float(np.abs(dense).max())


@pytest.mark.parametrize("kind", sorted(BLOCKS))
def test_block_grams_multiply_as_the_dense_product(kind: str) -> None:
    block, structure = BLOCKS[kind]
    gram = workload_gram(one_dim((block, 1.0)))
    assert isinstance(gram, structure) and isinstance(gram, StructuredGram)
    V = block.gram_array()
    close(gram.diag, np.diag(V))
    close(gram.right_multiply(np.eye(N)), V)
    X = np.random.default_rng(1).random((7, N))
    close(gram.right_multiply(X), X @ V)
    assert gram.evaluation_work(7) < WorkloadGram(V).evaluation_work(7)


def test_a_weighted_union_is_a_sum_of_structured_grams() -> None:
    workload = one_dim((AllRangeBlock(N), 0.5), (WidthRangeBlock(N, 8), 2.0),
                       (IdentityBlock(N), 1.5), (PermutedBlock(PrefixBlock(N), 4), 1.0))
    gram = workload_gram(workload)
    assert isinstance(gram, SumGram) and len(gram.terms) == 4
    assert [w for w, _ in gram.terms] == [0.25, 4.0, 2.25, 1.0]  # squared weights
    V = np.asarray(workload.gram().dense(), dtype=float)
    X = np.random.default_rng(2).random((5, N))
    close(gram.right_multiply(X), X @ V)
    close(gram.diag, np.diag(V))


def test_blocks_without_structure_take_the_dense_path() -> None:
    assert workload_gram(one_dim((CircularRangeBlock(N, 5), 1.0))) is None
    two = Domain.from_sizes([4, 5], ["a", "b"], ["numeric"] * 2)
    product = Workload(two, (Product((("a", PrefixBlock(4)), ("b", PrefixBlock(5)))),))
    assert workload_gram(product) is None  # several attributes: the Kronecker path


@pytest.mark.parametrize("norm", [1, 2])
@pytest.mark.parametrize("kind", ["prefix", "all-range", "width-32", "permuted all-range"])
def test_loss_and_gradient_match_the_dense_ones(kind: str, norm: int) -> None:
    block, _ = BLOCKS[kind]
    V = block.gram_array()
    gram = workload_gram(one_dim((block, 1.0)))
    p = 6
    theta = np.random.default_rng(3).random(p * N)
    f_fast, g_fast = pidentity_loss_grad(theta, gram, p, norm=norm)
    f_dense, g_dense = pidentity_loss_grad(theta, V, p, norm=norm)
    assert f_fast == pytest.approx(f_dense, rel=1e-10)
    close(g_fast, g_dense)


@pytest.mark.parametrize("kind", ["prefix", "all-range"])
def test_gaussian_pidentity_loss_is_the_unit_l2_error(kind: str) -> None:
    """The L2 loss is ``||A||_2**2 tr[(A^T A)^-1 V]`` of the explicit strategy (every column
    of unit L2 norm, so the Gaussian sensitivity is 1) to 1e-10, and its gradient matches
    central differences of the structured loss."""
    block, _ = BLOCKS[kind]
    V = block.gram_array()
    gram = workload_gram(one_dim((block, 1.0)))
    p = 4
    theta = np.random.default_rng(5).random((p, N))
    A = PIdentity(theta, norm=2).dense()
    columns = np.sqrt((A * A).sum(axis=0))
    close(columns, np.ones(N), 1e-14)
    explicit = float(np.trace(np.linalg.solve(A.T @ A, V)))
    f, g = pidentity_loss_grad(theta, gram, p, norm=2)
    assert f == pytest.approx(explicit, rel=1e-10)
    h = 1e-6
    for k in (0, 7, N + 3, 3 * N + N - 1):  # a few weights in different rows and columns
        step = np.zeros(p * N)
        step[k] = h
        up, _ = pidentity_loss_grad(theta.ravel() + step, gram, p, norm=2)
        down, _ = pidentity_loss_grad(theta.ravel() - step, gram, p, norm=2)
        assert g[k] == pytest.approx((up - down) / (2 * h), rel=1e-6, abs=1e-6 * abs(g).max())


@pytest.mark.parametrize(("kind", "ratios"), [("all-range", (1.2683, 1.0225)),
                                               ("prefix", (1.2185, 1.0179))])
def test_gaussian_pidentity_approaches_the_convex_optimum_with_more_rows(
        kind: str, ratios: tuple[float, float]) -> None:
    """The L2 p-Identity family is a subset of the convex problem's strategies: its optimum
    lies above the certified dual bound of :func:`gaussian_opt0`, far above with p = n/16
    rows (measured loss ratios 1.268 and 1.218 on 256 cells; L-BFGS without the bound
    Theta >= 0 reaches 1.268 too, so it is the family, not the search) and within about 2 %
    with p = n/4 (measured 1.0225, 1.0179)."""
    n = 256
    block = AllRangeBlock(n) if kind == "all-range" else PrefixBlock(n)
    _, convex, info = gaussian_opt0(block.gram_array())
    gram = workload_gram(Workload(Domain.from_sizes([n], ["x"], ["numeric"]),
                                  (Product((("x", block),)),)))
    for p, measured in zip((16, 64), ratios, strict=True):
        _, f, _ = optimize_pidentity(gram, p, restarts=1, maxiter=300, polish_iterations=100,
                                     norm=2)
        assert f >= info["lower_bound"]
        assert f / convex == pytest.approx(measured, rel=2e-3)


@pytest.mark.parametrize("kind", ["width-32", "permuted all-range"])
def test_opt0_reaches_the_same_loss_on_either_path(kind: str) -> None:
    block, _ = BLOCKS[kind]
    V = block.gram_array()
    gram = workload_gram(one_dim((block, 1.0)))
    runs = [optimize_pidentity(g, 6, restarts=2, maxiter=150, polish_iterations=50)
            for g in (WorkloadGram(V), gram)]
    (_, f_dense, starts_dense), (_, f_fast, starts_fast) = runs
    assert len(starts_dense) == len(starts_fast)
    assert f_fast == pytest.approx(f_dense, rel=1e-6)


def test_hierarchy_blocks_are_dyadic_levels_that_fit_in_p_rows() -> None:
    # 8 cells, 7 rows: widths 2, 4, 8 (widths 1.. would need 15 rows)
    assert hierarchy_blocks(8, 7) == [(0, 2), (2, 4), (4, 6), (6, 8), (0, 4), (4, 8), (0, 8)]
    # 10 cells, 6 rows: widths 4, 8, 16 (the last block of a level is shorter)
    assert hierarchy_blocks(10, 6) == [(0, 4), (4, 8), (8, 10), (0, 8), (8, 10), (0, 10)]
    assert hierarchy_blocks(8, 1) == [(0, 8)]


def test_cell_order_carries_through_a_permutation() -> None:
    base_block = AllRangeBlock(N)
    permuted = workload_gram(one_dim((PermutedBlock(base_block, 0), 1.0)))
    base = workload_gram(one_dim((base_block, 1.0)))
    assert np.array_equal(base.cell_order(), np.arange(N))
    order = permuted.cell_order()
    # neighbouring cells of the order are neighbouring base cells: V[order][:, order] = B
    V = PermutedBlock(base_block, 0).gram_array()
    close(V[np.ix_(order, order)], base_block.gram_array())
    # the hierarchical start is the base one relabelled, at the same loss
    p = 6
    start = hierarchical_start(permuted, p, order)
    base_start = hierarchical_start(base, p, base.cell_order())
    close(start[:, order], base_start)
    f_permuted, _ = pidentity_loss_grad(start, permuted, p)
    f_base, _ = pidentity_loss_grad(base_start, base, p)
    assert f_permuted == pytest.approx(f_base, rel=1e-10)
    assert WorkloadGram(V).cell_order() is None  # a dense Gram has no known order
    mixed = SumGram([(1.0, base), (1.0, permuted)])
    assert mixed.cell_order() is None


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "printed"), [("all-range", 11.08), ("prefix", 9.58)])
def test_default_plan_reaches_table4_at_1024_cells(kind: str, printed: float) -> None:
    """``hdmm-opt0``'s default plan (one start from the hierarchy, structured Gram) on Table
    4's n = 1,024 rows, Laplace eps = 1: within 0.5 % of the print either way (measured
    11.116 and 9.576; the peer's single start: 11.089 on all ranges)."""
    domain = Domain.from_sizes([1024], ["x"], ["numeric"])
    block = AllRangeBlock(1024) if kind == "all-range" else PrefixBlock(1024)
    workload = Workload(domain, (Product((("x", block),)),))
    plan = get("hdmm-opt0").plan(workload, Privacy(noise="laplace", epsilon=1.0))
    assert plan.fact("family") == "p-identity"
    assert plan.rmse() == pytest.approx(printed, rel=5e-3)


@pytest.mark.parametrize("permuted", [False, True])
def test_hb_tree_candidate_is_hb_and_wins_when_the_search_stops_early(permuted: bool) -> None:
    """HB's tree in p-Identity form has HB's own error (to 1e-10; on permuted cells it is
    laid along the cells' order, so its error is HB's on the unpermuted ranges), and
    ``hierarchy=True`` returns it whenever the p-Identity search ends above it (here: one
    iteration from a random start)."""
    base = AllRangeBlock(256)
    block = PermutedBlock(base, 0) if permuted else base
    gram = workload_gram(Workload.one_dim(block))
    hb = get("hb").plan(Workload.one_dim(base), Privacy(noise="laplace", epsilon=1.0))
    tree = hierarchy_factor(gram, 1)
    assert tree is not None and tree.info["p"] == 16  # 256 cells: b = 16, 16 inner nodes
    assert tree.loss == pytest.approx(hb.unit_tse(), rel=1e-10)
    V = block.gram_array()
    early = opt0(V, 1, restarts=1, maxiter=1, polish_iterations=0, gram=gram, hierarchy=True)
    assert early.kind == "hb-tree" and early.loss == pytest.approx(hb.unit_tse(), rel=1e-10)
    assert early.info["candidates"]["p-identity"] > early.loss
    full = opt0(V, 1, gram=gram, hierarchy=True)
    assert full.kind == "p-identity" and full.loss < 0.9 * tree.loss
