"""Exact Bernoulli(exp(-gamma)) draws for rational gamma (Canonne, Kamath & Steinke 2020).

:func:`bernoulli_exp` is CKS Algorithm 1 in int64 arithmetic (it serves the exponential
mechanism); :func:`bernoulli_exp_big` the same in Python integers for exponents beyond int64;
:func:`bernoulli_exp_fast` decides ``U < exp(-gamma)`` from the first 53 bits of one uniform
against certified brackets (:mod:`engine.noise.brackets`) and reads more bits of the same U
only when a bracket cannot decide. Each returns exactly Bernoulli(exp(-gamma)).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from engine.noise.brackets import (
    decimal_exp_neg,
    exp_chain,
    exp_neg_fast,
)

#: the uniform U is read as a 53-bit prefix u: U in [u, u + 1) 2**-53
U_BITS = 53
U_UNIT = 2.0**-U_BITS


def _bernoulli_exp_fraction(r: np.ndarray, den: int, rng: np.random.Generator) -> np.ndarray:
    """Bernoulli(exp(-r / den)) for int64 ``0 <= r <= den`` (CKS Algorithm 1, gamma <= 1).

    K counts the successes of Bernoulli(gamma / K), K = 1, 2, ...; the answer is "K odd"
    at the first failure. The first k trials all succeed with probability
    ``gamma**k / k!``: with U uniform on ``[0, den**N N!)`` (N the largest with
    ``den**N N! <= 2**62``) that is exactly the event ``U < r**k den**(N-k) N! / k!``, so one
    integer draw decides the first N trials; only samples whose N trials all succeed
    (probability at most 1 / N!) go on trial by trial.
    """
    if den == 1:
        return bernoulli_exp1(r.shape[0], rng) | (r == 0)
    fused = _fused_trials(den)
    if fused < 2:
        return _trials_from(1, r, den, rng)
    u = rng.integers(0, den**fused * math.factorial(fused), r.shape[0])
    power = r.copy()
    successes = u < power * (den ** (fused - 1) * math.factorial(fused))  # k = 1
    count = successes.astype(np.int8)
    idx = np.arange(r.shape[0])
    for k in range(2, fused + 1):
        if k == 4:  # after three trials at most 1/6 of the samples are still succeeding
            idx = np.flatnonzero(count == 3)
            u, power = u[idx], power[idx]
        power = power * r[idx]
        hit = u < power * (den ** (fused - k) * (math.factorial(fused) // math.factorial(k)))
        if k < 4:
            count += hit
        else:
            count[idx] += hit
            keep = hit
            idx, u, power = idx[keep], u[keep], power[keep]
    out = count % 2 == 0
    # the samples whose N fused trials all succeeded
    rest = idx if fused >= 4 else np.flatnonzero(count == fused)
    if rest.size:
        out[rest] = _trials_from(fused + 1, r[rest], den, rng)
    return out


def _fused_trials(den: int) -> int:
    """The largest N with ``den**N N! <= 2**62`` (0 when even den exceeds it)."""
    n = 0
    while den ** (n + 1) * math.factorial(n + 1) <= 1 << 62:
        n += 1
    return n


def _trials_from(k: int, r: np.ndarray, den: int, rng: np.random.Generator) -> np.ndarray:
    """CKS Algorithm 1 from trial k on (trials 1..k-1 succeeded), trial by trial:
    Bernoulli(r / (den k)) in one draw while den k fits int64, else as an AND of two."""
    out = np.empty(r.shape[0], dtype=bool)
    alive = np.arange(r.shape[0])
    ra = r
    while alive.size:
        if den * k < 1 << 62:
            go = rng.integers(0, den * k, alive.size) < ra
        else:
            go = (rng.integers(0, den, alive.size) < ra) & (rng.integers(0, k, alive.size) == 0)
        out[alive[~go]] = k % 2 == 1
        alive, ra = alive[go], ra[go]
        k += 1
    return out


#: N! / k! for k = N, ..., 1 (ascending), N = 20: 20! < 2**63
_FACTORIAL_N = 20
_FACTORIAL_STEPS = np.array([math.factorial(_FACTORIAL_N) // math.factorial(k)
                             for k in range(_FACTORIAL_N, 0, -1)], dtype=np.int64)


def bernoulli_exp1(n: int, rng: np.random.Generator) -> np.ndarray:
    """n exact Bernoulli(exp(-1)) draws with one integer draw each (almost always).

    In CKS Algorithm 1 at gamma = 1 the first k trials all succeed with probability 1/k!;
    with U uniform on [0, 20!) that is the event ``U < 20!/k!`` exactly, so the number of
    successes is a count of thresholds above U. Only U = 0 (probability 1/20!) continues
    the trials one by one.
    """
    u = rng.integers(0, math.factorial(_FACTORIAL_N), n)
    # the count is 1 + [U < 20!/2] + [U < 20!/6] + ...; past 20!/24 (probability 1/24) the
    # thresholds are searched
    steps = _FACTORIAL_STEPS
    successes = (1 + (u < steps[-2]).view(np.int8) + (u < steps[-3]).view(np.int8)
                 + (u < steps[-4]).view(np.int8))
    deep = np.flatnonzero(u < steps[-4])
    if deep.size:
        successes[deep] = _FACTORIAL_N - np.searchsorted(steps, u[deep], side="right")
    for i in np.flatnonzero(u[deep] == 0).tolist():
        k = _FACTORIAL_N + 1
        while rng.integers(0, k) == 0:
            k += 1
        successes[deep[i]] = k - 1
    return successes % 2 == 0


def bernoulli_exp(num: np.ndarray, den: int, rng: np.random.Generator) -> np.ndarray:
    """Exact Bernoulli(exp(-num / den)) for int64 ``num >= 0`` and an integer ``den``.

    ``exp(-gamma)`` is the product of ``floor(gamma)`` Bernoulli(exp(-1)) draws and one
    Bernoulli(exp(-frac(gamma))) (CKS Algorithm 1); the rounds stop as soon as every sample
    has failed or finished, so a large gamma costs a few rounds, not gamma.

    Args:
        num: int64 numerators (>= 0).
        den: positive denominator below 2**62.
    """
    num = np.asarray(num, dtype=np.int64)
    if not 0 < den < 1 << 62:
        raise ValueError(f"bernoulli_exp: denominator {den} outside (0, 2**62)")
    whole, frac = np.divmod(num, np.int64(den))
    ok = np.ones(num.shape[0], dtype=bool)
    j = 0
    pending = np.flatnonzero(whole > 0)
    while pending.size:
        ok[pending] = bernoulli_exp1(pending.size, rng)
        j += 1
        pending = pending[ok[pending] & (whole[pending] > j)]
    rest = np.flatnonzero(ok & (frac > 0))
    if rest.size:
        ok[rest] = _bernoulli_exp_fraction(frac[rest], den, rng)
    return ok


def _uniform_below(n: int, rng: np.random.Generator) -> int:
    """An exactly uniform Python int in [0, n) for any n >= 1 (rejection on 62-bit words)."""
    words = max(1, -(-n.bit_length() // 62))
    limit = (1 << (62 * words)) // n * n
    while True:
        value = 0
        for word in rng.integers(0, 1 << 62, words).tolist():
            value = (value << 62) | word
        if value < limit:
            return value % n


def bernoulli_exp_big(num: int, den: int, rng: np.random.Generator) -> bool:
    """Bernoulli(exp(-num / den)) in Python integers (for the astronomically rare samples
    whose exponent overflows int64; CKS Algorithm 1 again)."""
    whole, frac = divmod(num, den)
    for _ in range(whole):
        if not bernoulli_exp1(1, rng)[0]:
            return False
    k = 1
    while _uniform_below(den * k, rng) < frac:
        k += 1
    return k % 2 == 1




def uniform_prefix(n: int, rng: np.random.Generator) -> np.ndarray:
    """n independent 53-bit prefixes u (uint64) of uniforms U in [u, u + 1) 2**-53."""
    return rng.bit_generator.random_raw(n) >> np.uint64(64 - U_BITS)


def extend_uniform(prefix: int, bits: int, rng: np.random.Generator) -> tuple[int, int]:
    """The next 64 bits of a uniform whose first ``bits`` bits are ``prefix``."""
    return (prefix << 64) | int(rng.bit_generator.random_raw()), bits + 64


def bernoulli_exp_refine(prefix: int, num: int, den: int, rng: np.random.Generator) -> bool:
    """``U < exp(-num / den)`` for U in [prefix, prefix + 1) 2**-53, exactly: more bits of U
    against tighter decimal bounds until the comparison is decided."""
    bits = U_BITS
    while True:
        prefix, bits = extend_uniform(prefix, bits, rng)
        lo, hi = decimal_exp_neg(num, den, bits)
        if prefix + 1 <= lo:
            return True
        if prefix >= hi:
            return False


#: first-stage brackets: exp(-j / 2**8) for j = 0 .. 42 * 2**8 (the last lower bound is 0;
#: 170 KB for both tables, so their lookups stay in cache)
_COARSE_BITS = 8
_COARSE_MAX = 42 << _COARSE_BITS


@functools.cache
def _coarse_table() -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi) bounds of exp(-j / 256), j = 0 .. 42 * 256; lo[-1] is set to 0."""
    lo, hi = exp_chain(1, 1 << _COARSE_BITS, _COARSE_MAX + 1)
    lo[-1] = 0.0
    return lo, hi


def bernoulli_exp_fast(num: np.ndarray, den: int, rng: np.random.Generator) -> np.ndarray:
    """Exact Bernoulli(exp(-num / den)) for int64 ``num >= 0``, one 64-bit draw each.

    ``U < exp(-gamma)`` is decided from U's first 53 bits whenever they lie on one side of a
    certified bracket: first the exponent's 2**-8 grid cell (``gamma 2**8`` in float64 is
    within 0.01 of its true value below 42, so it lies in ``[j - 1, j + 2)``; one table
    lookup per side; all but about 1 % of the draws), then :func:`exp_neg_fast` for the
    rest (all but about 2**-22 of those); the few left read more bits of the same U against
    decimal bounds (:func:`bernoulli_exp_refine`). The result is exactly
    Bernoulli(exp(-gamma)).
    """
    num = np.asarray(num, dtype=np.int64)
    u = uniform_prefix(num.shape[0], rng)
    low = u.astype(float) * U_UNIT
    j = np.floor(num.astype(float) * (2.0**_COARSE_BITS / den))
    table_lo, table_hi = _coarse_table()
    accept = low + U_UNIT <= table_lo[np.minimum(j + 2.0, _COARSE_MAX).astype(np.int64)]
    unsure = np.flatnonzero(~accept & (low < table_hi[np.clip(j - 1.0, 0.0, _COARSE_MAX)
                                                      .astype(np.int64)]))
    if unsure.size:
        lo, hi = exp_neg_fast(num[unsure], den)
        accept[unsure] = low[unsure] + U_UNIT <= lo
        for i in unsure[~accept[unsure] & (low[unsure] < hi)].tolist():
            accept[i] = bernoulli_exp_refine(int(u[i]), int(num[i]), den, rng)
    return accept
