"""The certified optimal sub-solver (Eq. 4) against an independent conic SDP, and the
decomposition's bookkeeping (interned pieces, signatures, the Kronecker shortcut)."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

from engine.domain import Domain
from engine.errors import Cancelled
from engine.linalg.pinv import psd_pinv
from engine.mechanisms.residual import optimal
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


def _pair_residual(kinds: tuple[str, ...], sizes: tuple[int, int]):
    from engine.workloads.groups import pair_query_matrix

    dom = Domain.from_sizes(list(sizes), ["a", "b"], ["numeric"] * 2)
    W = Workload(dom, tuple(PairQueries(attrs=("a", "b"), pair_kind=k) for k in kinds))
    dec = decompose(W)
    rows = np.vstack([subquery(pair_query_matrix(k, *sizes), sizes, (0, 1)) for k in kinds])
    return dec.residuals[(0, 1)], dec.store, rows


def test_cell_classes_of_affine_and_abs_diff_queries() -> None:
    from engine.mechanisms.residual.decomposition import cell_classes
    from engine.workloads.groups import pair_query_matrix

    for kind, count in (("affine", 2 * 9 - 1), ("abs_diff", 9)):
        rows = pair_query_matrix(kind, 9, 9)
        labels, class_rows = cell_classes(rows)
        assert class_rows.shape[0] == count
        np.testing.assert_array_equal(class_rows[labels].T, rows)
    # random predicates: every cell its own class, no class form
    assert cell_classes(np.random.default_rng(0).random((5, 16)) < 0.5) is None


@pytest.mark.parametrize(("kinds", "sizes"), [(("affine",), (12, 12)), (("abs_diff",), (9, 9)),
                                              (("affine",), (7, 11)),
                                              (("affine", "abs_diff"), (10, 10))])
def test_class_form_equals_the_dense_path(kinds: tuple[str, ...], sizes: tuple[int, int]) -> None:
    """The class form (affine / abs_diff cells grouped by a + b or |a - b|) is the same Gram:
    its incidence rebuilds it exactly and the certified optimum equals the dense solve's."""
    res, store, rows = _pair_residual(kinds, sizes)
    classes = res.class_factor(store)
    assert classes is not None and len(classes.pieces) == len(kinds)
    G = rows.T @ rows
    P, _, _, F = classes.incidence()
    np.testing.assert_allclose(P @ F @ F.T @ P.T, res.dense_gram(store), atol=1e-12)
    np.testing.assert_allclose(res.dense_gram(store) * float(np.trace(G)) / res.trace, G,
                               atol=1e-10)
    dense = solve_optimal(G)
    by_class = solve_optimal(None, classes=classes)
    assert dense.gap < 1e-9 and by_class.gap < 1e-9
    assert by_class.loss == pytest.approx(dense.loss * res.trace / float(np.trace(G)),
                                          rel=1e-9)
    V = by_class.basis.T @ by_class.basis
    assert float(np.diag(V).max()) == pytest.approx(1.0, abs=1e-12)
    Gr = res.dense_gram(store)
    assert float(np.trace(Gr @ by_class.vdag)) == pytest.approx(by_class.loss, rel=1e-9)


def test_grid_symmetries_give_orbits_and_keep_the_optimum() -> None:
    """affine a + b <= t on an 8 x 8 grid is invariant under the swap of a and b and under
    (a, b) -> (7 - a, 7 - b) (centred complements): by Burnside (64 + 8 + 0 + 8) / 4 = 20
    orbits. A random workload has no symmetry."""
    from engine.mechanisms.residual.optimal import _Dual, _orbits

    _, _, rows = _pair_residual(("affine",), (8, 8))
    U, sv, _ = np.linalg.svd(rows.T, full_matrices=False)
    keep = sv > 1e-9 * sv.max()
    orbit = _orbits(_Dual(U[:, keep] * sv[keep], sv[keep] ** 2), (8, 8))
    assert len(np.unique(orbit)) == 20
    assert orbit[8 * 1 + 2] == orbit[8 * 2 + 1] == orbit[8 * 6 + 5] == orbit[8 * 5 + 6]
    assert orbit[8 * 1 + 2] != orbit[8 * 1 + 3]
    G = rows.T @ rows
    assert solve_optimal(G, grid=(8, 8)).loss == pytest.approx(solve_optimal(G).loss, rel=1e-9)
    noise = subquery(np.random.default_rng(1).random((6, 36)) < 0.5, (6, 6), (0, 1))
    U, sv, _ = np.linalg.svd(noise.T, full_matrices=False)
    keep = sv > 1e-9 * sv.max()
    assert len(np.unique(_orbits(_Dual(U[:, keep] * sv[keep], sv[keep] ** 2), (6, 6)))) == 36


def test_large_affine_residual_is_solved_in_class_form() -> None:
    """A 32 x 32 affine residual goes through the class form in ``solve_residuals`` and
    reaches the certified optimum of the explicit 1,024 x 1,024 Gram."""
    from engine.executor import SerialExecutor
    from engine.mechanisms.residual.subsolvers import (
        CLASS_MIN_CELLS,
        _optimal_input,
        make_solver,
        solve_residuals,
    )

    res, store, rows = _pair_residual(("affine",), (32, 32))
    assert res.cells >= CLASS_MIN_CELLS
    assert _optimal_input(res, store, 4096, "(a, b)")[1] == "classes"
    dom = Domain.from_sizes([32, 32], ["a", "b"], ["numeric"] * 2)
    W = Workload(dom, (PairQueries(attrs=("a", "b"), pair_kind="affine"),))
    solved = solve_residuals(decompose(W), make_solver("optimal", W), SerialExecutor())
    joint = solved.residuals[(0, 1)]
    assert joint.method == "dense" and joint.gap < 1e-9
    explicit = solve_optimal(rows.T @ rows)
    assert joint.loss == pytest.approx(explicit.loss, rel=1e-9)


def test_commuting_symmetries_split_the_dual_into_blocks(monkeypatch) -> None:
    """Table 7's two-attribute residual (affine a + b <= t plus the prefix x prefix pieces of
    the 3-way prefix queries): G is unchanged by the swap a <-> b and by the joint reflection,
    two commuting involutions, so the dual splits into four blocks. Same certified optimum as
    one eigendecomposition of the whole c x c matrix per step."""
    domain = Domain.from_sizes([16, 16, 16], kinds=["numeric"] * 3)
    W = Workload(domain, (PairQueries(attrs=("a1", "a2"), pair_kind="affine"),
                          Product(tuple((a, PrefixBlock(16)) for a in ("a1", "a2", "a3")))))
    dec = decompose(W)
    res = next(r for r in dec if r.attrs == (0, 1))
    G = res.dense_gram(dec.store)
    assert G.shape == (256, 256) and optimal.ADAPTED_MIN_CELLS == 256
    blocks = solve_optimal(G, grid=res.sizes)
    monkeypatch.setattr(optimal, "ADAPTED_MIN_CELLS", 10**9)
    whole = solve_optimal(G, grid=res.sizes)
    assert blocks.gap < 1e-10 and whole.gap < 1e-10
    assert blocks.loss == pytest.approx(whole.loss, rel=1e-9)
    assert np.diag(blocks.basis.T @ blocks.basis).max() == pytest.approx(1.0, abs=1e-12)
    assert float(np.trace(G @ blocks.vdag)) == pytest.approx(blocks.loss, rel=1e-9)
