"""The exact discrete Gaussian sampler: ``P[x] ∝ exp(-x**2 / (2 sigma**2))`` on the integers.

CKS 2020's Algorithm 3 (Canonne, Kamath & Steinke, "The Discrete Gaussian for Differential
Privacy") on exact discrete Laplace proposals (:mod:`engine.noise.laplace`); each acceptance
``U < exp(-gamma)`` (gamma an exact rational) is decided from tabulated certified brackets,
then products of digit tables, then decimal refinement (:mod:`engine.noise.bernoulli`). A
float sigma is rounded *up* to ``sigma**2 = m t / q`` (:func:`gaussian_parameter`; relative
increase at most ``1 / (q sigma)``, below 1e-8 for every sigma in [0.5, 1e8]); a sigma above
:data:`MAX_SIGMA` grid units is refused.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from engine.errors import SpecError
from engine.noise.batches import fill
from engine.noise.bernoulli import (
    U_BITS,
    U_UNIT,
    bernoulli_exp,
    bernoulli_exp_big,
    bernoulli_exp_fast,
    bernoulli_exp_refine,
    uniform_prefix,
)
from engine.noise.brackets import exp_neg_bounds, float_up
from engine.noise.laplace import LaplaceInversion, laplace_draws, laplace_inversion, laplace_levels

#: largest sigma (in grid units) the int64 arithmetic of the Gaussian sampler supports
MAX_SIGMA = float(2**27)
_SAFE_SQUARE = 1 << 62  # x**2 below this fits int64 with room for the remainder arithmetic


@dataclass(frozen=True)
class GaussianParameter:
    """sigma**2 = m t / q exactly (t = floor(sigma) + 1, q = 2**j): CKS Algorithm 3's inputs."""

    m: int
    t: int
    q: int

    @property
    def sigma2(self) -> Fraction:
        """The variance parameter actually sampled (>= the one asked for)."""
        return Fraction(self.m * self.t, self.q)

    @property
    def sigma(self) -> float:
        """sqrt(sigma2) as a float (rounded up)."""
        return float(np.nextafter(math.sqrt(float(self.sigma2)), math.inf))

    @property
    def den(self) -> int:
        """Denominator of the acceptance exponent ``(|Y| q - m)**2 / (2 m t q)``."""
        return 2 * self.m * self.t * self.q


def gaussian_parameter(sigma: float | Fraction) -> GaussianParameter:
    """The sampler's rational sigma**2 >= ``sigma**2`` (see the module docstring)."""
    sigma2 = Fraction(sigma) ** 2
    if not sigma2 > 0:
        raise SpecError(f"noise sigma: must be positive, got {float(sigma)!r}")
    if sigma2 > Fraction(MAX_SIGMA) ** 2:
        raise SpecError(f"noise sigma: {float(sigma):.4g} grid units exceeds {MAX_SIGMA:.4g}; "
                        "choose a coarser grid (a smaller --grid exponent)")
    t = math.isqrt(math.floor(sigma2)) + 1
    # den = 2 m t q ~ 2 sigma**2 q**2 must stay below 2**56 (so x**2 < 2**62 covers gamma < 64)
    j = max(0, min(40, (55 - math.ceil(math.log2(float(sigma2)))) // 2))
    q = 1 << j
    m = math.ceil(sigma2 * q / t)
    while 2 * m * t * q > 1 << 56 and q > 1:
        q //= 2
        m = math.ceil(sigma2 * q / t)
    return GaussianParameter(m, t, q)




@functools.cache
def _gaussian_acceptance(p: GaussianParameter) -> tuple[np.ndarray, np.ndarray]:
    """Float64 bounds ``lo <= exp(-(|y| q - m)**2 / (2 m t q)) <= hi`` for |y| = 0 .. L, L the
    last level of the Lap_Z(t) proposals' table (used when t < 2**11); entry L is a bracket for
    every |y| >= L (the acceptance decreases there)."""
    last = laplace_inversion(p.t, 1).level_max
    x = np.abs(np.arange(last + 1, dtype=np.int64) * p.q - p.m)
    small = x < math.isqrt(_SAFE_SQUARE)
    lo = np.zeros(last + 1)
    hi = np.full(last + 1, float_up(Fraction(1, 2**92)))  # x**2 >= 2**62 >= 64 den: < e^-64
    lo[small], hi[small] = exp_neg_bounds(x[small] * x[small], p.den)
    lo[last] = 0.0
    return lo, hi


def _gaussian_proposals(p: GaussianParameter, n: int, rng: np.random.Generator) -> np.ndarray:
    """CKS Algorithm 3 on n Lap_Z(t) proposals Y: each kept with probability
    ``exp(-(|Y| q - m)**2 / (2 m t q))``, decided from a 53-bit uniform against tabulated
    brackets, reading more bits when undecided (t >= 2**11:
    :func:`_gaussian_block_proposals`)."""
    laplace = laplace_inversion(p.t, 1)
    if laplace.block_bits:
        return _gaussian_block_proposals(p, laplace, n, rng)
    y = laplace_draws(laplace, n, rng)
    lo, hi = _gaussian_acceptance(p)
    index = np.minimum(np.abs(y), laplace.level_max)
    u = uniform_prefix(n, rng)
    low = u.astype(float) * U_UNIT
    accept = low + U_UNIT <= lo[index]
    for i in np.flatnonzero(~accept & (low < hi[index])).tolist():
        x = abs(int(y[i])) * p.q - p.m
        accept[i] = bernoulli_exp_refine(int(u[i]), x * x, p.den, rng)
    return y[accept]


def _gaussian_block_proposals(p: GaussianParameter, laplace: LaplaceInversion, n: int,
                              rng: np.random.Generator) -> np.ndarray:
    """CKS Algorithm 3 for t >= 2**11 with the Lap_Z(t) proposal's block offset R drawn
    uniformly and its rejection folded into the acceptance: ``|Y| = 1 + M (K - 1) + R`` is
    kept with probability ``exp(-R / t) exp(-(|Y| q - m)**2 / (2 m t q))``, one exact
    Bernoulli(exp(-a / (2 m t q))) with ``a = (|Y| q - m)**2 + 2 m q R``; the kept draws are
    the same law as rejecting R first (both acceptances multiply)."""
    raw = rng.bit_generator.random_raw(n)
    level = laplace_levels(laplace, raw >> np.uint64(64 - U_BITS), rng)
    offset = (rng.bit_generator.random_raw(n) >> np.uint64(64 - laplace.block_bits)).astype(
        np.int64)
    offset[level == 0] = 0
    magnitude = np.where(level > 0, ((level - 1) << laplace.block_bits) + 1 + offset, 0)
    x = magnitude * p.q - p.m
    small = np.abs(x) < math.isqrt(_SAFE_SQUARE)  # x**2 + 2 m q R < 2**62 + 2**56: int64
    extra = 2 * p.m * p.q
    big = np.flatnonzero(~small)
    if not big.size:  # the usual case: every exponent fits int64
        accept = bernoulli_exp_fast(x * x + offset * extra, p.den, rng)
    else:
        accept = np.zeros(n, dtype=bool)
        idx = np.flatnonzero(small)
        accept[idx] = bernoulli_exp_fast(x[idx] * x[idx] + offset[idx] * extra, p.den, rng)
        # here the exponent's numerator is >= 2**62 >= lower = floor(2**62 / den) den, with
        # floor(2**62 / den) >= 64: that many Bernoulli(exp(-1)) rounds first, then exact
        # Python-integer arithmetic for the survivors (probability below e**-64 each)
        lower = (_SAFE_SQUARE // p.den) * p.den
        alive = bernoulli_exp(np.full(big.size, lower, np.int64), p.den, rng)
        for i in big[alive].tolist():
            xi = int(magnitude[i]) * p.q - p.m
            accept[i] = bernoulli_exp_big(xi * xi + int(offset[i]) * extra - lower, p.den,
                                           rng)
    negative = (raw & np.uint64(1)).astype(bool)
    np.negative(magnitude, out=magnitude, where=negative)
    return magnitude[accept]


def discrete_gaussian(sigma: float | Fraction, size: int, rng: np.random.Generator
                      ) -> np.ndarray:
    """Exact samples with ``P[x] ∝ exp(-x**2 / (2 sigma**2))`` on the integers.

    Args:
        sigma: the parameter (noise units; L2 sensitivity D gives ``D**2/(2 sigma**2)``-zCDP),
            rounded up as :func:`gaussian_parameter` states.
        size: number of samples.
        rng: the generator (use :func:`release_rng`).

    Returns:
        int64 array of ``size`` samples.
    """
    p = gaussian_parameter(sigma)
    # acceptance of CKS Algorithm 3's second step: 0.59 at sigma = 0.5, 0.76 for large sigma
    return fill(lambda m: _gaussian_proposals(p, m, rng), int(size),
                0.58 if p.t <= 2 else 0.74)
