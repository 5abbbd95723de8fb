"""The bound-constrained L-BFGS of OPT_0's p-Identity search (hdmm/nonneg_lbfgs.py): scipy's
L-BFGS-B optimum on problems with active bounds, bounds kept exactly at every evaluated
point, the restricted two-loop recursion against its textbook form, and the stopping rules."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.optimize as so

from engine.mechanisms.hdmm.nonneg_lbfgs import _Pairs, minimize_nonneg


def quadratic(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A positive definite Q and a b whose unconstrained minimiser has negative entries."""
    rng = np.random.default_rng(seed)
    M = rng.standard_normal((n, n))
    return M @ M.T / n + 0.1 * np.eye(n), rng.standard_normal(n)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_scipy_lbfgsb_on_a_bound_constrained_quadratic(seed: int) -> None:
    Q, b = quadratic(40, seed)

    def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
        g = Q @ x - b
        return float(0.5 * x @ Q @ x - b @ x), g

    x0 = np.random.default_rng(seed + 10).random(40)
    f, x, evaluations = minimize_nonneg(fun, x0, ftol=0.0, gtol=1e-10, maxiter=2000)
    ref = so.minimize(
        fun,
        x0,
        jac=True,
        method="L-BFGS-B",
        bounds=[(0, None)] * 40,
        options={"ftol": 0.0, "gtol": 1e-12, "maxiter": 5000},
    )
    active = int((ref.x == 0.0).sum())
    assert 5 <= active <= 35  # both free and bound variables at the optimum
    assert f == pytest.approx(ref.fun, rel=1e-10)
    np.testing.assert_allclose(x, ref.x, atol=1e-7)
    assert np.array_equal(x == 0.0, ref.x == 0.0)  # the same active set
    g = Q @ x - b  # KKT: zero gradient on free variables, non-negative on bound ones
    assert np.abs(g[x > 0]).max() <= 1e-6 and g[x == 0].min() >= -1e-10
    assert evaluations < 2000


def test_every_evaluated_point_keeps_the_bound_exactly() -> None:
    Q, b = quadratic(30, 3)
    seen: list[float] = []

    def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
        seen.append(float(x.min()))
        return float(0.5 * x @ Q @ x - b @ x), Q @ x - b

    start = np.random.default_rng(4).standard_normal(30)  # negative entries: clipped at 0
    _, x, evaluations = minimize_nonneg(fun, start, ftol=1e-12, maxiter=300)
    assert len(seen) == evaluations
    assert min(seen) == 0.0  # points on the bound, none below it
    assert x.min() == 0.0


def test_rosenbrock_interior_optimum() -> None:
    def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
        return float(so.rosen(x)), so.rosen_der(x)

    f, x, _ = minimize_nonneg(fun, np.full(6, 0.2), ftol=0.0, gtol=1e-9, maxiter=2000)
    assert f <= 1e-14
    np.testing.assert_allclose(x, np.ones(6), atol=1e-6)


def test_infinite_values_shorten_the_step() -> None:
    """f is inf where sum(x) > 3 (as p-Identity's loss is where its Cholesky factor fails):
    every step into that region is shortened, and the iterates walk up to its edge (the
    gradient does not see the edge, so they stop there rather than at its best point)."""
    target = np.array([2.0, 2.0, 0.0])

    def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
        if x.sum() > 3.0:
            return math.inf, np.zeros(3)
        return float(((x - target) ** 2).sum()), 2.0 * (x - target)

    x0 = np.array([0.1, 0.2, 0.3])
    f, x, _ = minimize_nonneg(fun, x0, ftol=0.0, maxiter=500)
    assert math.isfinite(f) and 2.99 <= x.sum() <= 3.0
    assert 0.5 <= f <= 0.61 < fun(x0)[0]  # 0.5 at the edge's best point (1.5, 1.5, 0)


def test_stopping_rules() -> None:
    Q, b = quadratic(30, 5)
    calls = [0]

    def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
        calls[0] += 1
        return float(0.5 * x @ Q @ x - b @ x), Q @ x - b

    x0 = np.ones(30)
    _, _, evaluations = minimize_nonneg(fun, x0, ftol=0.0, maxiter=4)
    assert evaluations == calls[0] and 5 <= evaluations <= 2 * 4 + 20
    loose = minimize_nonneg(fun, x0, ftol=1e-2, maxiter=1000)[2]
    tight = minimize_nonneg(fun, x0, ftol=1e-12, maxiter=1000)[2]
    assert loose < tight
    # a start at a KKT point stops before any step
    f, x = minimize_nonneg(fun, x0, ftol=0.0, gtol=1e-10, maxiter=2000)[:2]
    assert minimize_nonneg(fun, x, ftol=0.0, gtol=1e-6, maxiter=10)[2] == 1


def textbook_direction(
    S: list[np.ndarray], Y: list[np.ndarray], g: np.ndarray, free: np.ndarray
) -> np.ndarray:
    """-H g by the two-loop recursion on the pairs restricted to the free variables."""
    S = [s * free for s in S]
    Y = [y * free for y in Y]
    q = g * free
    keep = [i for i in range(len(S)) if S[i] @ Y[i] > 1e-10 * (Y[i] @ Y[i])]
    alphas = {}
    for i in reversed(keep):
        alphas[i] = (S[i] @ q) / (S[i] @ Y[i])
        q = q - alphas[i] * Y[i]
    last = keep[-1]
    r = q * (S[last] @ Y[last]) / (Y[last] @ Y[last])
    for i in keep:
        beta = (Y[i] @ r) / (S[i] @ Y[i])
        r = r + (alphas[i] - beta) * S[i]
    return -r


def test_restricted_two_loop_matches_the_textbook_recursion() -> None:
    rng = np.random.default_rng(6)
    n, memory = 50, 5
    pairs = _Pairs(n, memory)
    S, Y = [], []
    for k in range(8):  # more pairs than the memory: the ring buffer drops the oldest
        s = rng.standard_normal(n)
        y = s * rng.uniform(0.5, 2.0, n) + 0.1 * rng.standard_normal(n)
        if k == 5:
            y = -s  # negative curvature: skipped
        pairs.add(s, y)
        S, Y = (S + [s])[-memory:], (Y + [y])[-memory:]
    free = rng.random(n) < 0.6
    g = np.where(free, rng.standard_normal(n), 0.0)
    d = pairs.direction(g, free)
    np.testing.assert_allclose(d, textbook_direction(S, Y, g, free), rtol=1e-10, atol=1e-12)
    assert np.all(d[~free] == 0.0)
    assert g @ d < 0.0
