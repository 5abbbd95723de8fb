"""Exact Bernoulli(exp(-gamma)) draws: CKS Algorithm 1 in int64 and in Python integers,
and the fast path with its refinement that reads more bits."""

from __future__ import annotations

import math

import numpy as np
import pytest
from noise_checks import (
    binomial_ok,
)

from engine.noise import (
    bernoulli_exp,
    bernoulli_exp1,
    bernoulli_exp_fast,
    release_rng,
)
from engine.noise.bernoulli import _fused_trials, bernoulli_exp_big
from engine.noise.brackets import decimal_exp_neg


@pytest.mark.parametrize("gamma", [(0, 7), (3, 7), (7, 7), (5, 2), (29, 4)])
def test_bernoulli_exp_has_probability_exp_minus_gamma(gamma: tuple[int, int]) -> None:
    num, den = gamma
    n = 400_000
    hits = bernoulli_exp(np.full(n, num, np.int64), den, release_rng(5)).mean()
    p = math.exp(-num / den)
    assert abs(hits - p) <= 5 * math.sqrt(p * (1 - p) / n) + 1e-12


@pytest.mark.parametrize(("num", "den", "fused"), [
    (999_999, 10**6, 2), (700_000, 10**6, 2), (49_999, 50_000, 3), (1000, 1000, 5),
    (3, 7, 11), (3 * 2**38, 2**40, 1)])
def test_fused_trials_keep_the_probability_exp_minus_gamma(num: int, den: int,
                                                         fused: int) -> None:
    # one draw decides the first N trials of CKS Algorithm 1 (N = fused); the rest go on one
    # by one: every split gives exp(-num / den)
    assert _fused_trials(den) == fused
    n = 400_000
    hits = bernoulli_exp(np.full(n, num, np.int64), den, release_rng(9)).mean()
    p = math.exp(-num / den)
    assert abs(hits - p) <= 5 * math.sqrt(p * (1 - p) / n)


def test_bernoulli_exp1_counts_factorial_thresholds() -> None:
    n = 1_000_000
    hits = bernoulli_exp1(n, release_rng(10)).mean()
    p = math.exp(-1.0)
    assert abs(hits - p) <= 5 * math.sqrt(p * (1 - p) / n)


def test_big_integer_bernoulli_exp_is_exact_beyond_int64() -> None:
    # exponent (2**70 + 2**69) / 3 * 2**-70 ... = 1/2: only Python integers hold these
    rng = release_rng(6)
    num, den = 2**69, 2**70
    n = 4000
    hits = sum(bernoulli_exp_big(num, den, rng) for _ in range(n)) / n
    p = math.exp(-0.5)
    assert abs(hits - p) <= 5 * math.sqrt(p * (1 - p) / n)
    assert not any(bernoulli_exp_big(80 * den, den, rng) for _ in range(50))


@pytest.mark.parametrize(("num", "den"), [(0, 3), (1, 3), (5, 2), (29, 4), (2**55, 2**56)])
def test_fast_bernoulli_has_probability_exp_minus_gamma(num: int, den: int) -> None:
    n = 400_000
    hits = int(bernoulli_exp_fast(np.full(n, num, np.int64), den, release_rng(21)).sum())
    p = math.exp(-num / den)
    assert hits == n if num == 0 else binomial_ok(hits, n, p)


class FixedPrefix:
    """A generator stand-in whose vector draws all carry one 53-bit prefix; single draws (the
    refinement's extra bits) come from a real generator."""

    def __init__(self, prefix: int, seed: int) -> None:
        self.prefix, self.real = prefix, release_rng(seed).bit_generator
        self.bit_generator = self
        self.extra = 0

    def random_raw(self, n: int | None = None):
        if n is None:
            self.extra += 1
            return self.real.random_raw()
        return np.full(n, self.prefix << 11, dtype=np.uint64)


def test_undecided_bernoulli_reads_more_bits_with_the_exact_conditional_probability() -> None:
    # U's first 53 bits straddle exp(-gamma): P[accept | prefix] = frac(2**53 exp(-gamma))
    num, den = 5, 7
    lo, _ = decimal_exp_neg(num, den, 53 + 40)
    conditional = (lo & (2**40 - 1)) / 2**40
    rng = FixedPrefix(lo >> 40, 22)
    n = 4000
    hits = int(bernoulli_exp_fast(np.full(n, num, np.int64), den, rng).sum())
    assert rng.extra >= n  # every draw took the refinement
    assert binomial_ok(hits, n, conditional), (hits, conditional)

