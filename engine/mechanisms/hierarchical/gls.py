"""Hay-style generalised least squares: the BLUE consistent hierarchy, in two passes.

Hay et al. (2010) make a noisy tree of counts consistent by least squares. With per-level
noise variances ``sigma_l**2`` and the public total, the closed form is (spec §4):

* bottom-up: leaves ``z = c~``, ``V = sigma**2``; internal nodes
  ``V = (1/sigma**2 + 1/sum V_y)**-1`` and ``z = V (c~/sigma**2 + sum z_y / sum V_y)``;
* top-down: the national sizes get ``x_i = z_i + V_i / sum V (n - sum z)``, and every child
  ``x_y = z_y + V_y / sum V_sib (x_parent - sum z_sib)``.

This equals Model 1 without non-negativity or integrality (spec R12): consistent and
faithful, but values can be negative or fractional. It is the linear reference of the
matrix-mechanism bridge.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from engine.mechanisms.hierarchical.model import RegionTree


@dataclass(frozen=True)
class GLSResult:
    """The GLS estimate per level (reals) and the time taken."""

    levels: tuple[np.ndarray, ...]
    seconds: float


def gls_postprocess(tree: RegionTree, noisy: Sequence[np.ndarray], total: float,
                    variances: Sequence[float] | None = None) -> GLSResult:
    """Closed-form weighted least squares on the tree with the root sum fixed to n.

    Args:
        tree: the region tree.
        noisy: per level, ``(regions, buckets)`` noisy values.
        total: the public n.
        variances: per-level noise variances (default 1: ordinary least squares).
    """
    start = time.perf_counter()
    L = tree.depth
    var = np.ones(L) if variances is None else np.asarray(variances, dtype=float)
    c = [np.asarray(a, dtype=float) for a in noisy]
    z: list[np.ndarray] = [np.empty(0)] * L
    V: list[np.ndarray] = [np.empty(0)] * L
    z[L - 1] = c[L - 1]
    V[L - 1] = np.full(c[L - 1].shape, var[L - 1])
    for lev in range(L - 2, -1, -1):
        sz = tree.aggregate(z[lev + 1], lev)
        sv = tree.aggregate(V[lev + 1], lev)
        V[lev] = 1.0 / (1.0 / var[lev] + 1.0 / sv)
        z[lev] = V[lev] * (c[lev] / var[lev] + sz / sv)
    est: list[np.ndarray] = [np.empty(0)] * L
    est[0] = z[0] + V[0] / V[0].sum() * (total - z[0].sum())
    for lev in range(L - 1):
        par = tree.parents[lev]
        sz = tree.aggregate(z[lev + 1], lev)
        sv = tree.aggregate(V[lev + 1], lev)
        est[lev + 1] = z[lev + 1] + V[lev + 1] / sv[par] * (est[lev] - sz)[par]
    return GLSResult(tuple(est), time.perf_counter() - start)
