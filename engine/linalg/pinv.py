"""Robust pseudo-inverses of symmetric positive semi-definite matrices."""

from __future__ import annotations

import numpy as np
import scipy.linalg as sla

#: Relative eigenvalue cutoff below which a Gram eigenvalue counts as zero.
RCOND = 1e-10


def psd_pinv(G: np.ndarray, rcond: float = RCOND) -> np.ndarray:
    """Moore-Penrose pseudo-inverse of a symmetric PSD matrix.

    A well-conditioned positive-definite G is inverted through its Cholesky factor (fast);
    anything else goes through ``eigh`` with a relative eigenvalue cutoff (never a naive inv).
    """
    G = (G + G.T) / 2.0
    try:
        c, low = sla.cho_factor(G, lower=True, check_finite=False)
        diag = np.abs(np.diag(c))
        if diag.min() > np.sqrt(rcond) * 1e2 * diag.max():
            return sla.cho_solve((c, low), np.eye(G.shape[0]), check_finite=False)
    except np.linalg.LinAlgError:
        pass
    lam, U = np.linalg.eigh(G)
    keep = lam > rcond * max(float(lam.max(initial=0.0)), 1e-300)
    return (U[:, keep] / lam[keep]) @ U[:, keep].T


def psd_range_projector(G: np.ndarray, rcond: float = RCOND) -> np.ndarray:
    """Orthogonal projector onto the range of a symmetric PSD matrix."""
    lam, U = np.linalg.eigh((G + G.T) / 2.0)
    keep = lam > rcond * max(float(lam.max(initial=0.0)), 1e-300)
    return U[:, keep] @ U[:, keep].T


def is_positive_definite(G: np.ndarray, rcond: float = RCOND) -> bool:
    """True when the Cholesky factor of G exists and is well conditioned."""
    try:
        c = np.linalg.cholesky((G + G.T) / 2.0)
    except np.linalg.LinAlgError:
        return False
    diag = np.abs(np.diag(c))
    return bool(diag.min() > np.sqrt(rcond) * 1e2 * diag.max())


def psd_sqrt_trace(G: np.ndarray) -> float:
    """``tr(G^(1/2))`` for a symmetric PSD matrix.

    Eigenvalues at round-off level (below ``10 n eps`` times the largest) are zeroed: their
    square roots (about ``1e-7 sqrt(lam_max)`` each) would otherwise add up to a visible
    overestimate for rank-deficient Grams, and an SVD *lower* bound must not overestimate.
    """
    lam = np.linalg.eigvalsh((G + G.T) / 2.0)
    tol = 10.0 * max(G.shape[0], 1) * np.finfo(float).eps * max(float(lam.max(initial=0.0)),
                                                                0.0)
    return float(np.sqrt(np.where(lam > tol, lam, 0.0)).sum())


def supports(V: np.ndarray, G: np.ndarray, rtol: float = 1e-8) -> bool:
    """True when the row space of W (Gram V) lies in that of A (Gram G): ``V P = V``."""
    if is_positive_definite(G):
        return True
    P = psd_range_projector(G)
    scale = max(float(np.abs(V).max()), 1e-300)
    return bool(np.abs(V - V @ P).max() <= rtol * scale)
