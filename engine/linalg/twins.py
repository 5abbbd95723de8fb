"""Twin values: the symmetry of a family of Grams under swapping two values of an attribute.

Two values i, j are *twins* for a family of symmetric matrices when swapping them leaves every
matrix unchanged (``G_ii = G_jj`` and ``G_ik = G_jk`` for every other k). Twinhood is an
equivalence; its classes generate a product of symmetric groups under which every matrix of
the family is invariant. On an orthogonal basis made of the class indicators and each class's
zero-sum vectors (:func:`contrasts`) every such matrix is block diagonal, and a multiple of the
identity on each class's zero-sum vectors. Census workloads are full of twins (sex, states,
ages inside one age bin, race codes with the same number of races); QuerySmasher's symmetry
reduction and Eigen-Design's grouped Program 1 both use them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

#: Relative tolerance of the twin test (entries relative to the largest of each matrix).
TWIN_RTOL = 1e-12


def twin_classes(grams: Sequence[np.ndarray]) -> np.ndarray:
    """Class label of every value: i, j share a class when swapping them fixes every Gram.

    Args:
        grams: symmetric m x m matrices over the same m values.

    Returns:
        Labels 0..q-1 (ints, length m), numbered in order of each class's first value.
    """
    m = grams[0].shape[0]
    same = np.ones((m, m), dtype=bool)
    for G in grams:
        G = np.asarray(G, dtype=float)
        tol = TWIN_RTOL * max(float(np.abs(G).max()), 1e-300)
        diag = np.diag(G)
        same &= np.abs(diag[:, None] - diag[None, :]) <= tol
        for i in range(m):
            # rows i and j agree outside columns i and j
            diff = np.abs(G[i][None, :] - G) > tol
            diff[:, i] = False
            diff[np.arange(m), np.arange(m)] = False
            same[i] &= ~diff.any(axis=1)
    same &= same.T
    labels = np.full(m, -1)
    q = 0
    for i in range(m):
        if labels[i] < 0:
            labels[same[i] & (labels < 0)] = q
            q += 1
    return labels


def contrasts(k: int) -> np.ndarray:
    """Orthonormal k x (k-1) basis of the zero-sum vectors (Helmert contrasts, as columns)."""
    out = np.zeros((k, k - 1))
    for j in range(1, k):
        out[:j, j - 1] = 1.0
        out[j, j - 1] = -float(j)
        out[:, j - 1] /= math.sqrt(j * (j + 1))
    return out
