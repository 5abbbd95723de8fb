"""Certified brackets of exp(-x): decimal bounds, the tables, the per-draw brackets."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from engine.noise.brackets import decimal_exp_neg, exp_neg_bounds, exp_neg_fast


@pytest.mark.parametrize(("num", "den", "bits"), [
    (1, 1, 60), (0, 5, 40), (7, 3, 120), (2**55 + 3, 2**56, 200), (123_456_789, 1000, 80)])
def test_decimal_bounds_bracket_exp_within_three_units(num: int, den: int, bits: int) -> None:
    lo, hi = decimal_exp_neg(num, den, bits)
    assert 0 <= hi - lo <= 3
    # against an independent float evaluation where float64 has the digits to check
    value = math.exp(-num / den)
    if value * 2.0**bits > 2.0**10:
        rel = 2.0**-50
        assert lo <= value * 2.0**bits * (1 + rel) and value * 2.0**bits * (1 - rel) <= hi
    else:  # far below one unit: the bracket is [0, 1]
        assert (lo, hi) == (0, 1)
    # multiplicativity: bounds of exp(-x) squared bracket exp(-2x)
    lo2, hi2 = decimal_exp_neg(2 * num, den, 2 * bits)
    assert lo * lo <= hi2 + 3 * 2**bits and lo2 <= hi * hi + 3 * 2**bits


def test_float_brackets_contain_the_decimal_value_and_are_tight() -> None:
    rng = np.random.default_rng(4)
    for den in (1, 7, 2**20 + 1, 10**12 + 39, 2**56 - 5):
        num = np.concatenate([rng.integers(0, 45 * den, 300, dtype=np.int64),
                              [0, den, 40 * den, 41 * den + 1]])
        num = num[num < 2**62]
        lo, hi = exp_neg_bounds(num, den)
        for a, b, k in zip(lo, hi, num.tolist(), strict=True):
            d_lo, d_hi = decimal_exp_neg(k, den, 100)
            assert Fraction(a) <= Fraction(d_hi, 2**100) and Fraction(d_lo, 2**100) <= b
            if k // den <= 40:
                assert (b - a) <= 2.0**-30 * b  # relative width about 2**-34
            else:
                assert a == 0.0 and b <= math.exp(-40) * (1 + 1e-9)


def test_per_draw_brackets_contain_the_decimal_value() -> None:
    rng = np.random.default_rng(5)
    for den in (1, 3, 2**24 + 7, 10**15 + 37, 2**56 - 5):
        num = np.concatenate([rng.integers(0, min(2**62, 45 * den), 300, dtype=np.int64),
                              [0, 1, den, 41 * den - 1, 41 * den, 41 * den + 1]])
        num = num[num < 2**62]
        lo, hi = exp_neg_fast(num, den)
        for a, b, k in zip(lo, hi, num.tolist(), strict=True):
            d_lo, d_hi = decimal_exp_neg(k, den, 100)
            assert Fraction(a) <= Fraction(d_hi, 2**100) and Fraction(d_lo, 2**100) <= b
            if k < 40 * den:
                assert (b - a) <= 2.0**-20 * b  # relative width about 2**-22
            if k > 42 * den:
                assert a == 0.0 and b <= math.exp(-40.9)

