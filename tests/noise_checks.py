"""The exact distributions the noise samplers are checked against, and the checks.

The pmfs are the textbook formulas, computed independently of :mod:`engine.noise`'s samplers
(which never evaluate a pmf); ``chi_square_pvalue`` and ``binomial_ok`` are the statistical
tests the sampler tests share.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

#: draws per distribution test
DRAWS = 1_000_000


def discrete_gaussian_pmf(values: np.ndarray, sigma: float) -> np.ndarray:
    """``P[Z = v]`` of N_Z(0, sigma**2) (normaliser summed to double precision)."""
    half = int(math.ceil(40.0 * sigma)) + 1
    grid = np.arange(-half, half + 1, dtype=float)
    norm = np.exp(-(grid**2) / (2.0 * sigma**2)).sum()
    v = np.asarray(values, dtype=float)
    return np.exp(-(v**2) / (2.0 * sigma**2)) / norm


def discrete_laplace_pmf(values: np.ndarray, scale: float) -> np.ndarray:
    """``P[Z = v]`` of Lap_Z(scale): ``tanh(1/(2b)) exp(-|v| / b)``."""
    v = np.abs(np.asarray(values, dtype=float))
    return math.tanh(0.5 / scale) * np.exp(-v / scale)


def chi_square_pvalue(draws: np.ndarray, pmf, spread: float) -> float:
    """Chi-square of the draws against a symmetric pmf: bins of ~spread/8 integers where the
    expected count is at least 5, and each tail beyond them as one bin (its exact mass is
    half of what the central bins leave)."""
    width = max(1, int(spread // 8))
    bins = 2 * int(math.ceil(12 * spread / width)) + 1
    edges = -(bins * width) // 2 + width * np.arange(bins + 1)
    mass = np.add.reduceat(pmf(np.arange(edges[0], edges[-1])), np.arange(0, bins * width,
                                                                         width))
    keep = np.flatnonzero(DRAWS * mass >= 5)
    lo, hi = keep[0], keep[-1]
    while DRAWS * (1.0 - mass[lo:hi + 1].sum()) / 2.0 < 5:  # grow the tails to >= 5 expected
        lo, hi = lo + 1, hi - 1
    central = edges[lo: hi + 2]
    inner = mass[lo: hi + 1]
    tail = (1.0 - inner.sum()) / 2.0
    observed = np.concatenate([[(draws < central[0]).sum()], np.histogram(draws, central)[0],
                               [(draws >= central[-1]).sum()]])
    expected = DRAWS * np.concatenate([[tail], inner, [tail]])
    assert expected[0] >= 5 and expected[-1] >= 5  # the tails are tested, not dropped
    return float(stats.chisquare(observed, expected * observed.sum() / expected.sum()).pvalue)


def binomial_ok(hits: int, n: int, p: float) -> bool:
    """Two-sided exact binomial test at level 1e-4 (and not suspiciously perfect)."""
    return stats.binomtest(hits, n, p).pvalue > 1e-4
