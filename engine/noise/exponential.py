"""The exact exponential mechanism (bounded-range selection of one candidate by its score)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from engine.noise.bernoulli import bernoulli_exp

#: finest score grid 2**-j of the exact exponential mechanism (j is lowered for huge ranges)
SCORE_GRID_EXPONENT = 40


def exponential_mechanism(scores: np.ndarray, epsilon: float, sensitivity: float,
                          rng: np.random.Generator) -> int:
    """Index i drawn exactly with ``P[i] ∝ exp(e' floor(u_i 2**j) / 2**j)`` (exponential
    mechanism), ``u_i = e' q_i / (2 sensitivity)``, ``e' = epsilon - 2**(1 - j)``.

    The floored scores move by at most ``e' / 2 + 2**-j`` between neighbouring data sets, so
    the draw is ``epsilon``-bounded-range (``epsilon**2 / 8``-zCDP, Cesar & Rogers 2021) as the
    float mechanism would be. The float scores are exact dyadic rationals; the integer
    exponents ``a_i = floor(u_max 2**j) - floor(u_i 2**j)`` are computed in Python integers,
    and the draw is rejection sampling: a uniform candidate i is kept with probability
    ``exp(-a_i / 2**j)`` (:func:`bernoulli_exp`, exact), so the kept index has exactly the
    stated law. Each proposal is kept with probability at least 1 / len(scores). As for every
    float score, the sensitivity of the scores *as computed in float64* is not accounted for.

    Args:
        scores: the quality scores q (higher is better), finite.
        epsilon: the bounded-range parameter (> 0).
        sensitivity: the scores' sensitivity (> 0).
        rng: the generator.
    """
    q = [Fraction(float(v)) for v in np.asarray(scores, dtype=float).ravel()]
    if not q:
        raise ValueError("exponential mechanism: no candidates")
    if not (epsilon > 0 and sensitivity > 0):
        raise ValueError("exponential mechanism: epsilon and the score sensitivity must be "
                         "positive")
    top, low = max(q), min(q)
    span = Fraction(epsilon) * (top - low) / (2 * Fraction(sensitivity))
    j = min(SCORE_GRID_EXPONENT, 60 - math.ceil(span + 1).bit_length())
    if 2.0 ** (1 - j) >= epsilon / 2:
        raise ValueError(f"exponential mechanism: score range {float(top - low):.3g} too wide "
                         f"for an exact draw at epsilon {epsilon:.3g}")
    scale = (Fraction(epsilon) - Fraction(2, 1 << j)) / (2 * Fraction(sensitivity)) * (1 << j)
    floors = [math.floor(v * scale) for v in q]
    best = max(floors)
    exponents = np.array([best - f for f in floors], dtype=np.int64)
    m = exponents.size
    while True:
        candidates = rng.integers(0, m, 4 * m + 16)
        kept = np.flatnonzero(bernoulli_exp(exponents[candidates], 1 << j, rng))
        if kept.size:
            return int(candidates[kept[0]])
