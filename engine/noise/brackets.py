"""Certified float64 brackets of ``exp(-num / den)`` for exact rationals (the samplers' fast path).

A float only ever *guesses*: every bracket here is derived from Python's correctly rounded
:mod:`decimal` exp (:func:`decimal_exp_neg`) through exact fixed-point products, then directed
to float64 and widened by :data:`PRODUCT_SLACK`, so ``lo <= exp(-x) <= hi`` holds exactly.
The samplers decide a draw from a bracket when a uniform lies outside it, and read more bits
of the uniform against tighter decimal bounds otherwise.
"""

from __future__ import annotations

import decimal
import functools
import math
from fractions import Fraction

import numpy as np

#: the fractional part of an exponent is bracketed on a grid of 2**-_FRAC_BITS
_FRAC_BITS = 36
_DIGIT_BITS = 12  # the bracket is a product of three table factors, one per 12-bit digit
_DIGIT_COUNT = _FRAC_BITS // _DIGIT_BITS
#: exp(-w) for whole w beyond this is below 2**-57, under every 53-bit uniform but 0
_WHOLE_MAX = 40
#: relative slack of a product of at most six float64 factors (each rounding <= 2**-53)
PRODUCT_SLACK = 2.0**-49
_FIXED_BITS = 110  # fixed point of the table chains


def decimal_exp_neg(num: int, den: int, bits: int) -> tuple[int, int]:
    """Integers ``lo <= 2**bits exp(-num / den) <= hi`` with ``hi - lo <= 3``.

    Python's :mod:`decimal` rounds division, ``exp`` and multiplication correctly; at
    ``prec`` digits each contributes a relative error below ``10**(1 - prec)`` and the
    rounded argument at most ``2 x 10**(1 - prec)`` more, so with ``prec`` = digits of
    ``2**bits`` + digits of ``x + 1`` + 12 the error of the product is below 1e-10.
    """
    if num * 10 > den * (7 * bits + 10):  # x > 0.7 bits + 1: 2**bits e^-x < 1
        return 0, 1
    whole = num // den
    prec = len(str(1 << bits)) + len(str(whole + 1)) + 12
    with decimal.localcontext(decimal.Context(prec=prec)):
        value = (-(decimal.Decimal(num) / decimal.Decimal(den))).exp() * decimal.Decimal(1 << bits)
        floor = int(value)
    return max(0, floor - 1), floor + 2


def float_down(x: Fraction) -> float:
    """A float64 <= x (x >= 0)."""
    return math.nextafter(float(x), 0.0) if x > 0 else 0.0


def float_up(x: Fraction) -> float:
    """A float64 >= x (x >= 0)."""
    return math.nextafter(float(x), math.inf)


def exp_chain(step_num: int, step_den: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Float64 bounds on ``exp(-d step_num / step_den)`` for d = 0 .. count - 1: a lower and
    an upper chain of exact fixed-point products (floor / ceiling), directed to float64."""
    one = 1 << _FIXED_BITS
    ratio_lo, ratio_hi = decimal_exp_neg(step_num, step_den, _FIXED_BITS)
    lo, hi = one, one
    lows, highs = [], []
    for _ in range(count):
        lows.append(float_down(Fraction(lo, one)))
        highs.append(float_up(Fraction(hi, one)))
        lo = lo * ratio_lo >> _FIXED_BITS
        hi = -(-hi * ratio_hi >> _FIXED_BITS)
    return np.array(lows), np.array(highs)


@functools.cache
def _exp_tables() -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """(lo, hi) tables: exp(-w) for whole w in [0, _WHOLE_MAX], then per 12-bit digit i
    exp(-d 2**(12 i) / 2**36) for d in [0, 4096] (the top one reaches 2**36: e^-1)."""
    tables = [exp_chain(1, 1, _WHOLE_MAX + 1)]
    for i in range(_DIGIT_COUNT):
        tables.append(exp_chain(1 << (_DIGIT_BITS * i), 1 << _FRAC_BITS,
                                 (1 << _DIGIT_BITS) + 1))
    return tuple(tables)


def exp_neg_bounds(num: np.ndarray, den: int) -> tuple[np.ndarray, np.ndarray]:
    """Float64 arrays ``lo <= exp(-num / den) <= hi`` for int64 ``num >= 0``, den < 2**62,
    relative width about ``2**-34``.

    The whole part w = num // den is exact; the fraction f = (num mod den) / den is computed
    in float64 with an error below 0.1 units of 2**-36, so ``f 2**36`` lies in
    ``[j - 1, j + 2)`` for ``j = floor(f 2**36)`` computed; the bounds multiply tabulated
    bounds of exp(-w) and of exp(-digit 2**(12 i - 36)) and widen by :data:`PRODUCT_SLACK`.
    """
    whole = num // np.int64(den)  # (np.divmod is several times slower)
    rest = num - whole * np.int64(den)
    j = np.floor(rest.astype(float) * (2.0**_FRAC_BITS / float(den))).astype(np.int64)
    tables = _exp_tables()
    w = np.minimum(whole, _WHOLE_MAX)
    lo = tables[0][0][w]
    hi = tables[0][1][w]
    up = np.minimum(j + 2, 1 << _FRAC_BITS)
    down = np.maximum(j - 1, 0)
    for i in range(_DIGIT_COUNT):
        shift = _DIGIT_BITS * i
        mask = (1 << _DIGIT_BITS) - 1 if i < _DIGIT_COUNT - 1 else (1 << (_DIGIT_BITS + 1)) - 1
        lo = lo * tables[i + 1][0][(up >> shift) & mask]
        hi = hi * tables[i + 1][1][(down >> shift) & mask]
    lo *= 1.0 - PRODUCT_SLACK
    hi *= 1.0 + PRODUCT_SLACK
    lo[whole > _WHOLE_MAX] = 0.0
    return lo, hi


#: per-draw brackets put the whole exponent on a grid of 2**-24 (three 10-bit table digits)
_FAST_BITS = 24
_FAST_DIGIT_BITS = 10
_FAST_MAX = 41 << _FAST_BITS  # exponents above 41 - 2**-24: only the upper bound e^-41 is kept


@functools.cache
def _fast_tables() -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """(lo, hi) tables of exp(-d 2**(10 i) / 2**24), d < 1024, i = 0, 1, 2."""
    return tuple(exp_chain(1 << (_FAST_DIGIT_BITS * i), 1 << _FAST_BITS,
                            1 << _FAST_DIGIT_BITS) for i in range(3))


def exp_neg_fast(num: np.ndarray, den: int) -> tuple[np.ndarray, np.ndarray]:
    """Float64 arrays ``lo <= exp(-num / den) <= hi`` for int64 ``num >= 0`` (den >= 1), of
    relative width about 2**-22: the bracket of one draw's decision.

    ``num * (2**24 / den)`` in float64 is within a relative ``3 * 2**-53`` of the exponent's
    ``2**24`` multiple, so below ``41 * 2**24`` it lies in ``[j - 1, j + 2)`` for j its floor;
    the bounds are products of three tabulated digit factors widened by
    :data:`PRODUCT_SLACK` (0 below, e^-41 above when the exponent may pass 41).
    """
    j = np.floor(num.astype(float) * (2.0**_FAST_BITS / den))
    down = np.clip(j - 1.0, 0.0, float(_FAST_MAX)).astype(np.int64)
    up = np.minimum(j + 2.0, float(_FAST_MAX)).astype(np.int64)
    mask = (1 << _FAST_DIGIT_BITS) - 1
    (lo0, hi0), (lo1, hi1), (lo2, hi2) = _fast_tables()
    lo = lo0[up & mask] * lo1[(up >> _FAST_DIGIT_BITS) & mask]
    lo *= lo2[up >> (2 * _FAST_DIGIT_BITS)] * (1.0 - PRODUCT_SLACK)
    hi = hi0[down & mask] * hi1[(down >> _FAST_DIGIT_BITS) & mask]
    hi *= hi2[down >> (2 * _FAST_DIGIT_BITS)] * (1.0 + PRODUCT_SLACK)
    lo[j + 2.0 > _FAST_MAX] = 0.0
    return lo, hi
