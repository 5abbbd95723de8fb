"""The exact discrete Laplace sampler: ``P[x] ∝ exp(-|x| / b)`` on the integers.

It inverts one uniform U per draw: with ``q = exp(-1 / b)``, ``|Z| >= k`` exactly when
``U < 2 q**k / (1 + q)``; a float64 guess of k from ``log U`` is *checked* against float64
brackets of both thresholds, tabulated per scale and certified by Python's correctly rounded
:mod:`decimal` exp. U is read as a 53-bit prefix u (``U in [u, u + 1) 2**-53``); when the
prefix cannot decide (about one draw in 1e7) more bits of the same U are read against tighter
decimal bounds (:func:`_level_refine`), so each draw has exactly the discrete Laplace law.
Scales of 2**11 grid units and more invert a block index instead and draw the offset in the
block by exact rejection. A float scale is rounded *up* to a rational with a power-of-two
denominator (:func:`laplace_parameter`, relative increase at most ``2**-20``).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from engine.errors import SpecError
from engine.noise.batches import fill
from engine.noise.bernoulli import U_BITS, U_UNIT, bernoulli_exp_fast, extend_uniform
from engine.noise.brackets import (
    PRODUCT_SLACK,
    decimal_exp_neg,
    exp_neg_bounds,
    float_down,
    float_up,
)

#: largest discrete Laplace scale (grid units) the int64 arithmetic supports comfortably
MAX_LAPLACE_SCALE = float(2**40)


@dataclass(frozen=True, eq=False)
class LaplaceInversion:
    """Constants of the inversion sampler of Lap_Z(t / s): q = exp(-s / t),
    ``P[|Z| >= 1 + M j] = C q**(M j)`` with ``C = 2 q / (1 + q)`` and M = 2**block_bits.

    ``upper[j]`` bounds the threshold ``C q**(M j)`` from above and ``lower[j]`` bounds the
    previous one, ``C q**(M (j - 1))``, from below (``lower[0] = 2``, above every U), for
    j = 0 .. level_max, where the threshold is below 2**-60."""

    t: int
    s: int
    block_bits: int
    rate: float  # M s / t
    log_c: float
    level_max: int
    upper: np.ndarray
    lower: np.ndarray


@functools.cache
def laplace_inversion(t: int, s: int) -> LaplaceInversion:
    """The inversion tables of Lap_Z(t / s), certified by :func:`decimal_exp_neg` (C) and
    :func:`exp_neg_bounds` (the powers of q); at most about 90,000 levels.

    Scales of 2**11 and above use blocks M = 2**(floor(log2(t / s)) - 7): the block index is
    inverted (scale t / (s M) in [2**7, 2**8), about 6,000 levels, a table that stays in
    cache) and the offset in the block drawn by rejection with acceptance at least
    exp(-2**-7)."""
    bits_of_scale = (t // s).bit_length()
    block_bits = 0 if bits_of_scale <= 11 else bits_of_scale - 8
    bits = 80
    one = 1 << bits
    q_lo, q_hi = decimal_exp_neg(s, t, bits)
    c_lo = float_down(Fraction(2 * q_lo, one + q_lo))
    c_hi = float_up(Fraction(2 * q_hi, one + q_hi))
    rate = (s << block_bits) / t
    log_c = math.log(c_hi) if c_hi > 0 else -745.0
    level_max = max(1, math.ceil((60.0 * math.log(2.0) + log_c) / rate) + 2)
    lo, hi = exp_neg_bounds(np.arange(level_max + 1, dtype=np.int64) * (s << block_bits), t)
    upper = hi * (c_hi * (1.0 + PRODUCT_SLACK))
    lower = np.concatenate([[2.0], lo[:-1] * (c_lo * (1.0 - PRODUCT_SLACK))])
    return LaplaceInversion(t, s, block_bits, rate, log_c, level_max, upper, lower)


def _threshold_bounds(p: LaplaceInversion, level: int, bits: int) -> tuple[int, int]:
    """Integers bracketing ``2**bits C q**(M level)``."""
    one = 1 << bits
    e_lo, e_hi = decimal_exp_neg(p.s * ((level << p.block_bits) + 1), p.t, bits)
    q_lo, q_hi = decimal_exp_neg(p.s, p.t, bits)
    return 2 * e_lo * one // (one + q_hi), -(-2 * e_hi * one // (one + q_lo))


def _level_refine(prefix: int, p: LaplaceInversion, rng: np.random.Generator) -> int:
    """The level ``K = #{j >= 0: U < C q**(M j)}`` of U in [prefix, prefix + 1) 2**-53,
    exactly: walk from the float guess with decimal bounds, reading more bits of U when a
    threshold is not yet decided."""
    bits = U_BITS
    while True:
        log_u = math.log(prefix + 0.5) - bits * math.log(2.0)
        level = max(0, math.ceil((p.log_c - log_u) / p.rate))
        for _ in range(64):
            lo, hi = _threshold_bounds(p, level, bits)
            if prefix + 1 <= lo:  # U < threshold(level): K > level
                level += 1
                continue
            if level > 0:
                lo_prev, hi_prev = _threshold_bounds(p, level - 1, bits)
                if prefix >= hi_prev:  # U >= threshold(level - 1): K < level
                    level -= 1
                    continue
                if prefix >= hi and prefix + 1 <= lo_prev:
                    return level
            elif prefix >= hi:
                return 0
            break
        prefix, bits = extend_uniform(prefix, bits, rng)


def laplace_levels(p: LaplaceInversion, u: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``K = #{j >= 0: U < C q**(M j)}`` for the 53-bit prefixes u by inversion: a float64
    guess, certified by the tabulated brackets of the thresholds on each side, moved by one
    where they prove it off; undecided draws go to :func:`_level_refine`."""
    low = u.astype(float) * U_UNIT
    high = low + U_UNIT
    guess = (p.log_c - np.log(low + 0.5 * U_UNIT)) * (1.0 / p.rate)
    level = np.ceil(np.clip(guess, 0.0, float(p.level_max))).astype(np.int64)
    todo = np.flatnonzero((low < p.upper[level]) | (high > p.lower[level]))
    for _ in range(2):  # the guess is off by one where the float log rounds across a level
        if not todo.size:
            return level
        lv = level[todo]
        up = (high[todo] <= p.lower[np.minimum(lv + 1, p.level_max)]) & (lv < p.level_max)
        down = (low[todo] >= p.upper[np.maximum(lv - 1, 0)]) & (lv > 0)
        level[todo] += up.astype(np.int64) - down
        lv = level[todo]
        todo = todo[(low[todo] < p.upper[lv]) | (high[todo] > p.lower[lv])]
    for i in todo.tolist():
        level[i] = _level_refine(int(u[i]), p, rng)
    return level


def _block_offsets(p: LaplaceInversion, n: int, rng: np.random.Generator) -> np.ndarray:
    """n draws of R on [0, M) with ``P[R = r] ∝ q**r``: uniform r kept with probability
    q**r = exp(-r s / t) (exact, :func:`bernoulli_exp_fast`), redrawn otherwise."""
    out = np.empty(n, dtype=np.int64)
    todo = np.arange(n)
    while todo.size:
        r = (rng.bit_generator.random_raw(todo.size) >> np.uint64(64 - p.block_bits)).astype(
            np.int64)
        keep = bernoulli_exp_fast(r * p.s, p.t, rng)
        out[todo[keep]] = r[keep]
        todo = todo[~keep]
    return out


def laplace_draws(p: LaplaceInversion, n: int, rng: np.random.Generator) -> np.ndarray:
    """n exact draws of Lap_Z(t / s): ``|Z| = 0`` at level 0, else
    ``1 + M (K - 1) + R``; the sign is the lowest bit of the 64-bit draw whose top 53 bits
    give U."""
    raw = rng.bit_generator.random_raw(n)
    magnitude = laplace_levels(p, raw >> np.uint64(64 - U_BITS), rng)
    if p.block_bits:
        nonzero = np.flatnonzero(magnitude)
        magnitude[nonzero] = (1 + ((magnitude[nonzero] - 1) << p.block_bits)
                              + _block_offsets(p, nonzero.size, rng))
    negative = (raw & np.uint64(1)).astype(bool)
    np.negative(magnitude, out=magnitude, where=negative)
    return magnitude


def laplace_parameter(scale: float | Fraction) -> tuple[int, int]:
    """``(t, s)`` with ``t / s >= scale`` and s a power of two, as large as int64 allows.

    The relative increase of the scale is at most ``2**-20`` for scales up to 2**20.
    """
    scale = Fraction(scale)
    if not scale > 0:
        raise SpecError(f"noise scale: must be positive, got {float(scale)!r}")
    if scale.denominator & (scale.denominator - 1) == 0 and scale.numerator < 1 << 40:
        return scale.numerator, scale.denominator
    j = max(0, 40 - math.ceil(scale).bit_length())
    s = 1 << j
    t = math.ceil(scale * s)
    return t, s


def discrete_laplace(scale: float | Fraction, size: int, rng: np.random.Generator
                     ) -> np.ndarray:
    """Exact samples with ``P[x] ∝ exp(-|x| / b)`` on the integers, b >= ``scale``.

    Args:
        scale: the scale b (noise units; b = sensitivity / eps gives eps-DP), rounded up as
            :func:`laplace_parameter` states.
        size: number of samples.
        rng: the generator (use :func:`release_rng`).

    Returns:
        int64 array of ``size`` samples.
    """
    p = laplace_inversion(*laplace_parameter(scale))
    return fill(lambda m: laplace_draws(p, m, rng), int(size), 1.0)
