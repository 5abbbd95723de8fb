"""Residual algebra shared by ResidualPlanner, QuerySmasher and AIM+GReM.

Arrays belong to attribute sets (sorted tuples of axis indices): an array over ``gamma`` has one
axis per attribute of gamma, in sorted order. The residual of the data over ``tau`` is
``Decomp(mu_tau, tau, tau)`` with shape ``(n_k - 1 for k in tau)``; marginals and residuals are
in bijection (``mu_gamma = sum_{tau subset gamma} Recon(zeta_tau, tau, gamma)``).

Conventions (spec aim_grem.md section 2): the subtraction matrix is ``S = [-1 | I]``
(``(S v)_j = v_{j+1} - v_1``); ``center`` is its pseudo-inverse and ``smear`` that of ``sum``.

Example (spec 2.3):
    >>> import numpy as np
    >>> decomp(np.array([14, 19, 23, 44]), (0,), (0,)).tolist()
    [5.0, 9.0, 30.0]
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

AttrSet = tuple[int, ...]


def subtraction_matrix(n: int) -> np.ndarray:
    """``S_(n) = [-1 | I_{n-1}]`` of shape (n-1) x n."""
    return np.hstack([-np.ones((n - 1, 1)), np.eye(n - 1)])


def subtraction_pinv(n: int) -> np.ndarray:
    """``S^+ = [0; I] - (1/n) 1 1^T`` of shape n x (n-1) (the ``center`` map)."""
    return np.vstack([np.zeros((1, n - 1)), np.eye(n - 1)]) - 1.0 / n


def _sub(a: np.ndarray, axis: int) -> np.ndarray:
    first = np.take(a, [0], axis=axis)
    return np.delete(a, 0, axis=axis) - first


def _center(a: np.ndarray, axis: int) -> np.ndarray:
    shape = list(a.shape)
    shape[axis] = 1
    u = np.concatenate([np.zeros(shape), a], axis=axis)
    return u - u.mean(axis=axis, keepdims=True)


def decomp(mu: np.ndarray, gamma: AttrSet, tau: AttrSet) -> np.ndarray:
    """Residual over ``tau`` of a marginal ``mu`` over ``gamma`` (tau a subset of gamma).

    Sums out the attributes of gamma outside tau, then applies ``sub`` on each axis of tau.
    Cost ``O(|gamma| n_gamma)``; ``decomp(mu, gamma, ())`` is the total.
    """
    z = np.asarray(mu, dtype=float)
    summed = tuple(ax for ax, k in enumerate(gamma) if k not in tau)
    if summed:
        z = z.sum(axis=summed)  # drops the summed axes by position
    for ax in range(z.ndim):
        z = _sub(z, ax)
    return z


def recon(z: np.ndarray, tau: AttrSet, gamma: AttrSet, shape: Sequence[int]) -> np.ndarray:
    """The tau-component of the marginal over ``gamma`` from a residual ``z`` over ``tau``.

    Args:
        z: residual array over ``tau``.
        tau: the residual's attribute set (a subset of gamma).
        gamma: the target marginal's attribute set.
        shape: sizes of every attribute of the domain (indexed by attribute).
    """
    m = np.asarray(z, dtype=float)
    for ax in range(m.ndim):
        m = _center(m, ax)
    smear = math.prod(shape[k] for k in gamma if k not in tau)
    positions = tuple(ax for ax, k in enumerate(gamma) if k not in tau)
    m = np.expand_dims(m, positions) / smear
    return np.broadcast_to(m, tuple(shape[k] for k in gamma))


def marginal_from_residuals(residuals: dict[AttrSet, np.ndarray], gamma: AttrSet,
                            shape: Sequence[int]) -> np.ndarray:
    """``sum_{tau subset gamma} Recon(z_tau, tau, gamma)``; missing residuals count as zero
    (the minimum-norm fill)."""
    out = np.zeros(tuple(shape[k] for k in gamma))
    for tau in subsets(gamma):
        if tau in residuals:
            out = out + recon(residuals[tau], tau, gamma, shape)
    return out


def subsets(gamma: AttrSet) -> list[AttrSet]:
    """All subsets of ``gamma`` (sorted tuples), smallest first."""
    return [c for k in range(len(gamma) + 1) for c in itertools.combinations(gamma, k)]


def residual_shape(tau: AttrSet, shape: Sequence[int]) -> tuple[int, ...]:
    """Shape ``(n_k - 1 for k in tau)`` of a residual."""
    return tuple(shape[k] - 1 for k in tau)


def residual_size(tau: AttrSet, shape: Sequence[int]) -> int:
    """Dimension ``prod_{k in tau} (n_k - 1)`` of residual space tau."""
    return math.prod(shape[k] - 1 for k in tau)


def whiten(z: np.ndarray, inverse: bool = False) -> np.ndarray:
    """``V^(-1/2) z`` (or ``V^(1/2) z`` when ``inverse``) for a residual array z, with
    ``V = kron_k (I + 1 1^T)`` (:func:`residual_covariance`) applied axis by axis.

    On ``R^(n-1)``, ``(I + 1 1^T)**a = I + c 1 1^T`` with ``c = (n**a - 1) / (n - 1)`` (the
    all-ones direction has eigenvalue n, its complement 1). A noisy residual ``S (mu + xi)``
    with ``xi ~ N(0, s**2 I)`` is ``V^(1/2) (w + e)`` with ``w = V^(-1/2) S mu`` and i.i.d.
    ``e ~ N(0, s**2 I)``; one record moves ``w`` by exactly ``sqrt(p_tau)`` in L2
    (:func:`privacy_factor`), since ``S^T V^-1 S`` is the centring projector.

    Example:
        >>> import numpy as np
        >>> z = np.array([[1.0, -2.0], [0.5, 3.0]])
        >>> bool(np.allclose(whiten(whiten(z), inverse=True), z))
        True
    """
    out = np.asarray(z, dtype=float)
    power = 0.5 if inverse else -0.5
    for ax, m in enumerate(out.shape):
        n = m + 1
        c = (n**power - 1.0) / (n - 1)
        out = out + c * out.sum(axis=ax, keepdims=True)
    return out


def privacy_factor(tau: AttrSet, shape: Sequence[int]) -> float:
    """``p_tau = prod_{k in tau} (n_k - 1) / n_k``: releasing the tau-residual of a marginal
    with i.i.d. N(0, sigma**2) noise costs ``rho = p_tau / (2 sigma**2)``."""
    return math.prod((shape[k] - 1) / shape[k] for k in tau)


def variance_factor(tau: AttrSet, gamma: AttrSet, shape: Sequence[int]) -> float:
    """``v_tau = prod_{k in tau} (n_k-1)/n_k * prod_{k in gamma \\ tau} 1/n_k**2``: per-cell
    variance of the reconstructed gamma-marginal contributed by a tau-residual of variance
    scalar 1."""
    return privacy_factor(tau, shape) * math.prod(1.0 / shape[k] ** 2 for k in gamma
                                                  if k not in tau)


def residual_covariance(tau: AttrSet, shape: Sequence[int]) -> np.ndarray:
    """``V_tau = kron_{k in tau} (I + 1 1^T)``: covariance shape of a noisy residual (small
    residuals only; for tests)."""
    V = np.ones((1, 1))
    for k in tau:
        V = np.kron(V, np.eye(shape[k] - 1) + 1.0)
    return V


def smear_into(component: np.ndarray, tau: AttrSet, gamma: AttrSet,
               shape: Sequence[int]) -> np.ndarray:
    """Broadcast an array over ``tau`` (full attribute sizes) into the marginal over ``gamma``.

    Applies ``smear`` on every axis of ``gamma`` outside ``tau``; ``recon(z, tau, gamma, shape)``
    equals ``smear_into(recon(z, tau, tau, shape), tau, gamma, shape)``. Centring a residual once
    and smearing it into many supersets is how lazy GReM updates stay ``O(n_gamma)`` per target
    (spec aim_grem.md 2.4).

    Args:
        component: array over ``tau`` with shape ``(n_k for k in tau)``.
        tau: its attribute set (a subset of gamma).
        gamma: the target attribute set.
        shape: sizes of every attribute of the domain (indexed by attribute).

    Returns:
        A read-only broadcast view with shape ``(n_k for k in gamma)``.
    """
    smear = math.prod(shape[k] for k in gamma if k not in tau)
    positions = tuple(ax for ax, k in enumerate(gamma) if k not in tau)
    m = np.expand_dims(np.asarray(component, dtype=float), positions) / smear
    return np.broadcast_to(m, tuple(shape[k] for k in gamma))
