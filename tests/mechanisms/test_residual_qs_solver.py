"""The certified optimal sub-solver (Eq. 4) against an independent conic SDP, and the
decomposition's bookkeeping (interned pieces, signatures, the Kronecker shortcut)."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

from engine.domain import Domain
from engine.errors import Cancelled
from engine.linalg.pinv import psd_pinv
from engine.mechanisms.residual.decomposition import decompose, subquery
from engine.mechanisms.residual.optimal import solve_optimal
from engine.progress import Progress
from engine.workloads import Workload
from engine.workloads.blocks import PrefixBlock
from engine.workloads.groups import PairQueries, PrefixMarginals, Product


def sdp_optimum(G: np.ndarray) -> float:
    """Eq. 4 by Clarabel: min tr(X) s.t. [[X, G^1/2], [G^1/2, V]] PSD, diag(V) <= 1."""
    w, U = np.linalg.eigh(G)
    root = (U * np.sqrt(np.maximum(w, 0))) @ U.T
    c = G.shape[0]
    X = cp.Variable((c, c), symmetric=True)
    V = cp.Variable((c, c), symmetric=True)
    block = cp.bmat([[X, root], [root, V]])
    problem = cp.Problem(cp.Minimize(cp.trace(X)), [block >> 0, cp.diag(V) <= 1])
    problem.solve(solver=cp.CLARABEL)
    return float(problem.value)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_an_independent_sdp_on_singular_grams(seed: int) -> None:
    rng = np.random.default_rng(seed)
    rows = subquery(rng.random((4, 12)) < 0.5, (3, 4), (0, 1))  # rank <= 4 < 12
    G = rows.T @ rows
    sol = solve_optimal(G)
    assert sol.gap < 1e-9
    assert sol.lower <= sol.loss
    assert sol.loss == pytest.approx(sdp_optimum(G), rel=1e-5)
    V = sol.basis.T @ sol.basis
    assert float(np.diag(V).max()) == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(sol.vdag, psd_pinv(V, rcond=1e-12), atol=1e-8 * abs(
        sol.vdag).max())
    assert float(np.trace(G @ sol.vdag)) == pytest.approx(sol.loss, rel=1e-10)
    # rows of the strategy lie in range(G); B^+ B is the projector onto it
    P = sol.basis_pinv @ sol.basis
    np.testing.assert_allclose(P @ G, G, atol=1e-10 * np.abs(G).max())


def test_scale_invariance_and_rank_one() -> None:
    q = np.array([[1.0, -2.0, 1.0]])
    G = q.T @ q
    # one query: measuring it directly (L2 sensitivity max |q_i|) is optimal
    sol = solve_optimal(G)
    assert sol.loss == pytest.approx(4.0, rel=1e-9)
    assert solve_optimal(7.0 * G).loss == pytest.approx(7.0 * sol.loss, rel=1e-10)
    with pytest.raises(ValueError, match="zero"):
        solve_optimal(np.zeros((3, 3)))


def test_cancellation_through_progress() -> None:
    rows = subquery(np.random.default_rng(3).random((9, 36)), (6, 6), (0, 1))
    progress = Progress()
    progress.cancel()
    with pytest.raises(Cancelled):
        solve_optimal(rows.T @ rows, progress=progress)


def test_pieces_are_interned_and_merged() -> None:
    dom = Domain.from_sizes([4, 4, 5], ["a", "b", "c"], ["numeric"] * 3)
    W = Workload(dom, (PrefixMarginals(k=1), PrefixMarginals(k=2),
                       PairQueries(attrs=("a", "b"), pair_kind="affine")))
    dec = decompose(W)
    # prefix on a and on b (both size 4) share one interned 1-D Gram
    ab = dec.residuals[(0, 1)]
    assert ab.single_kron() is None and len(ab.pieces) == 2
    ac, bc = dec.residuals[(0, 2)], dec.residuals[(1, 2)]
    assert ac.single_kron() is not None and ac.signature() == bc.signature()
    assert dec.residuals[(0,)].signature() == dec.residuals[(1,)].signature()
    # the Gram assembled from pieces is the full-domain Gram projected onto the residual
    from engine.mechanisms.residual.decomposition import residual_projector

    Q = residual_projector(dom.shape, (0, 1))
    np.testing.assert_allclose(ab.dense_gram(dec.store), Q.T @ W.gram().dense() @ Q,
                               atol=1e-10)
    assert ab.trace == pytest.approx(float(np.trace(ab.dense_gram(dec.store))))


def test_total_and_zero_subqueries_are_dropped() -> None:
    dom = Domain.from_sizes([5], ["x"], ["numeric"])
    W = Workload(dom, (Product((("x", PrefixBlock(5)),)),))
    dec = decompose(W)
    assert set(dec.residuals) == {(), (0,)}
    from engine.workloads.blocks import TotalBlock

    only_total = Workload(dom, (Product((("x", TotalBlock(5)),)),))
    assert set(decompose(only_total).residuals) == {()}


@pytest.mark.parametrize(("sizes", "kind"), [((4, 50), "abs_diff"), ((7, 20), "affine")])
def test_degenerate_optima_converge_through_a_factor(sizes: tuple[int, int], kind: str) -> None:
    """Thin residuals (a 4 x 50 abs_diff sub-workload) have degenerate optima where the
    fixed point crawls; the barrier Newton phase certifies them, from a low-rank factor."""
    from engine.workloads.groups import pair_query_matrix

    rows = subquery(pair_query_matrix(kind, *sizes), sizes, (0, 1))
    by_factor = solve_optimal(None, factor=rows.T)
    assert by_factor.gap < 1e-9
    assert by_factor.basis.shape[1] == rows.shape[1]
    explicit = solve_optimal(rows.T @ rows)
    assert explicit.loss == pytest.approx(by_factor.loss, rel=1e-9)
