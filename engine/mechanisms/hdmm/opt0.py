"""OPT_0: the best strategy for an explicit workload Gram ``V = W^T W`` (HDMM section 4).

The objective is the unit-noise expected error ``C_K(A) = ||A||_K**2 tr[(A^T A)^+ V]``
(K = 1 for Laplace, 2 for Gaussian/zCDP noise), searched in one strategy family per norm:
p-Identity for Laplace (:mod:`~engine.mechanisms.hdmm.laplace_opt0`), the convex optimum for
Gaussian noise (:mod:`~engine.mechanisms.hdmm.gaussian_opt0`).

As in the authors' code the candidate set also holds Identity, Total (only when it supports
V, i.e. V is a multiple of the all-ones matrix) and, for Laplace, the one-parameter
``[I; theta T] / (1 + theta)``; on request (``hierarchy=True``) also HB's tree when the Gram
knows its cells' one-dimensional order, so that the result is never worse than HB; the best
candidate by ``C_K`` is returned.
"""

from __future__ import annotations

import math
from concurrent.futures import Executor

import numpy as np

from engine.linalg.marginals import is_marginal_like
from engine.linalg.matrix import (
    Dense,
    Identity,
    Ones,
    UpperTriangular,
)
from engine.linalg.trees import hb_branching, hierarchy_matrix
from engine.mechanisms.hdmm.gaussian_opt0 import gaussian_opt0
from engine.mechanisms.hdmm.laplace_opt0 import (
    MAX_WORK,
    optimize_idtotal,
    optimize_pidentity,
    pidentity_loss_grad,
)
from engine.mechanisms.hdmm.pidentity import PIdentity
from engine.mechanisms.hdmm.results import Factor
from engine.mechanisms.hdmm.tracking import Reporter
from engine.mechanisms.hdmm.workload_gram import WorkloadGram
from engine.progress import Progress


def _is_scaled_identity(V: np.ndarray) -> bool:
    d = np.diag(V)
    off = V - np.diag(d)
    scale = max(float(np.abs(d).max()), 1e-300)
    return float(np.abs(off).max()) <= 1e-12 * scale and float(np.ptp(d)) <= 1e-12 * scale


#: Most p-Identity rows by default. Every evaluation costs O(p**2 n) beside the product with
#: V (and the optimiser O(p n)), so past 2,048 cells (p = n/16 = 128) p stays here: on all
#: ranges of 4,096 cells p = 128 reaches 14.37 RMSE from the hierarchical start (Table 4,
#: p = 256: 14.38) at about half the cost per evaluation.
MAX_DEFAULT_P = 128


def default_p(V: np.ndarray) -> int:
    """Spec section 3.3: ``max(n // 16, 1)`` up to ``MAX_DEFAULT_P``, and 1 for
    identity/total-like Grams."""
    n = V.shape[0]
    return 1 if is_marginal_like(V) else min(max(n // 16, 1), MAX_DEFAULT_P)


def identity_factor(n: int, V: np.ndarray, norm: int) -> Factor:
    """The Identity strategy (error ``tr V``)."""
    return Factor("identity", Identity(n), float(np.trace(V)), norm)


def total_factor(n: int, V: np.ndarray, norm: int) -> Factor:
    """The Total strategy (supports V only when V is a multiple of the all-ones matrix)."""
    scale = max(float(np.abs(V).max()), 1e-300)
    ok = float(np.ptp(V)) <= 1e-12 * scale
    return Factor("total", Ones(1, n), float(V.mean()) if ok else math.inf, norm)


def hierarchy_factor(gram: WorkloadGram, norm: int) -> Factor | None:
    """HB's strategy (Qardaji et al.'s branching, the tree without its root, laid along the
    Gram's :meth:`~WorkloadGram.cell_order`) as a p-Identity factor whose extra queries are
    the tree's inner nodes, with its exact loss; None when the cells have no known order or
    the tree has no inner node. Every cell lies in one node per level, so the columns have
    equal norms and the strategy is HB's up to a scale (the same error). One loss
    evaluation, O(p**2 n) on a structured Gram (p = 272 inner nodes on 4,096 cells, 462 on
    8,192)."""
    order = gram.cell_order()
    if order is None:
        return None
    n = gram.n
    tree = hierarchy_matrix(n, hb_branching(n))[1:]
    inner = tree[np.diff(tree.indptr) > 1]
    if inner.shape[0] == 0:
        return None
    theta = np.zeros(inner.shape)
    theta[:, order] = inner.toarray()  # tree column c is the cell order[c]
    loss, _ = pidentity_loss_grad(theta, gram, theta.shape[0], norm=norm)
    return Factor("hb-tree", PIdentity(theta, norm), loss, norm, {"p": theta.shape[0]})


def opt0(V: np.ndarray, norm: int, *, p: int | None = None, restarts: int = 8, seed: int = 0,
         maxiter: int = 300, polish_iterations: int = 200, tol: float = 1e-7,
         max_work: int = MAX_WORK, init: Factor | None = None,
         progress: Progress | Reporter | None = None,
         executor: Executor | None = None, gram: WorkloadGram | None = None,
         hierarchy: bool = False) -> Factor:
    """OPT_0: the best strategy for the explicit Gram V in sensitivity norm ``norm``.

    Args:
        V: workload Gram ``W^T W`` (n x n).
        norm: 1 (Laplace: p-Identity family) or 2 (Gaussian: convex family).
        p: p-Identity rows (default :func:`default_p`).
        restarts: p-Identity random starts.
        seed: seed of the random starts.
        maxiter: p-Identity iterations per start (Laplace) / dual iterations (Gaussian).
        polish_iterations: extra iterations on the best p-Identity start.
        tol: certified relative optimality gap of the Gaussian problem.
        max_work: multiply-adds one p-Identity optimisation may spend.
        init: a previous p-Identity factor to warm-start from (same p and n).
        progress: receives (iteration, loss) from every optimiser loop.
        executor: runs batches of p-Identity restarts (see :func:`optimize_pidentity`).
        gram: V with a known fast product (default: :meth:`WorkloadGram.of` detects a
            semiseparable V).
        hierarchy: under Laplace noise also try HB's tree (:func:`hierarchy_factor`), so
            that a Gram with a one-dimensional cell order never gets a strategy worse than
            HB's (the Gaussian optimum is global: nothing beats it).

    Returns:
        The best :class:`Factor` by ``C_K``; ``info["candidates"]`` lists every candidate's
        loss.
    """
    V = np.asarray(V, dtype=float)
    n = V.shape[0]
    if V.shape != (n, n):
        raise ValueError(f"opt0: V must be square, got shape {V.shape}")
    candidates = [identity_factor(n, V, norm), total_factor(n, V, norm)]
    # Total (V a multiple of 1 1^T) and Identity (V a multiple of I) attain the SVD bound
    # there, so nothing can beat them in either norm
    exact = math.isfinite(candidates[1].loss) or _is_scaled_identity(V)
    if n > 1 and float(np.abs(V).max()) > 0.0 and not exact:
        if norm == 1:
            p = default_p(V) if p is None else int(p)
            warm = (init.matrix.theta if init is not None and isinstance(init.matrix, PIdentity)
                    and init.matrix.theta.shape == (p, n) else None)
            gram = WorkloadGram.of(V) if gram is None else gram
            theta, f, losses = optimize_pidentity(
                gram, p, restarts=restarts, seed=seed, maxiter=maxiter,
                polish_iterations=polish_iterations, max_work=max_work, init=warm,
                progress=progress, executor=executor)
            candidates.append(Factor("p-identity", PIdentity(theta), f, norm,
                                     {"p": p, "start_losses": losses}))
            t, f = optimize_idtotal(gram, progress)
            candidates.append(Factor("id-total", PIdentity(np.full((1, n), t)), f, norm,
                                     {"theta_total": t}))
            tree = hierarchy_factor(gram, norm) if hierarchy else None
            if tree is not None:
                candidates.append(tree)
        else:
            A, f, info = gaussian_opt0(V, tol=tol, maxiter=maxiter, progress=progress)
            matrix = UpperTriangular(A) if info["factorization"] == "cholesky" else Dense(A)
            candidates.append(Factor("gaussian", matrix, f, norm, info))
    best = min(candidates, key=lambda c: c.loss)
    best.info["candidates"] = {c.kind: c.loss for c in candidates}
    return best

