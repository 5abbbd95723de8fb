"""Exact integer noise (discrete Laplace, discrete Gaussian), releases on a grid, OS entropy.

Floating-point Laplace and Gaussian samples leak through their low-order bits (Mironov,
CCS 2012). A release here instead adds *integer* noise to answers that lie on a grid of
spacing ``2**-k``::

    released = g * (round(A x / g) + Z),    g = 2**-k,  Z ~ N_Z(0, s**2) or Lap_Z(b)

What is exact, and what is not:

* **Samplers.** :func:`discrete_laplace` inverts one uniform U per draw: with
  ``q = exp(-1 / b)``, ``|Z| >= k`` exactly when ``U < 2 q**k / (1 + q)``; a float64 guess of
  k from ``log U`` is *checked* against float64 brackets of both thresholds, tabulated per
  scale and certified by Python's correctly rounded :mod:`decimal` exp. U is read as a 53-bit
  prefix u (``U in [u, u + 1) 2**-53``); when the prefix cannot decide (about one draw in
  1e7) more bits of the same U are read against tighter decimal bounds
  (:func:`_level_refine`), so each draw has exactly the discrete Laplace law. Scales of
  2**11 grid units and more invert a block index instead and draw the offset in the block by
  exact rejection. :func:`discrete_gaussian` is CKS 2020's Algorithm 3 (Canonne, Kamath &
  Steinke, "The Discrete Gaussian for Differential Privacy") on those Laplace proposals; each
  acceptance ``U < exp(-gamma)`` (gamma an exact rational) is decided the same way: tabulated
  brackets, then products of digit tables (:func:`_exp_neg_fast`), then decimal refinement
  (:func:`bernoulli_exp_fast`). A float only ever *guesses*; no float rounding decides a
  draw. :func:`bernoulli_exp` (CKS Algorithm 1 in int64 arithmetic) serves the exponential
  mechanism. Everything runs over vectorised batches of :data:`BATCH` draws.
* **Parameters.** A float scale is an exact dyadic rational, but its denominator (up to
  2**1074) would overflow int64, so the samplers first round the parameter *up* to a nearby
  rational with a small power-of-two denominator: the Laplace scale to a multiple of
  ``2**-j`` and sigma**2 to ``m t / q`` (t = floor(sigma) + 1, q = 2**j), with j as large as
  int64 allows (relative increase at most ``2**-20`` for the Laplace scale; at most
  ``1 / (q sigma)`` for sigma**2, below 1e-8 for every sigma in [0.5, 1e8]). Larger noise
  only strengthens the guarantee; :class:`ExactNoise` records the parameter actually used.
  A sigma above ``2**27`` grid units is refused (choose a coarser grid).
* **The guarantee** is the discrete distributions' own: the discrete Gaussian with
  parameter sigma and L2 sensitivity D is ``D**2 / (2 sigma**2)``-zCDP exactly (CKS
  Theorem 14); the discrete Laplace with scale ``D / eps`` (L1 sensitivity D) is eps-DP.
  For an (eps, delta) target sigma is calibrated with the discrete Gaussian's own curve
  (CKS Theorem 7, :func:`discrete_gaussian_delta`) when each record moves a single
  coordinate of the release, and otherwise through rho-zCDP and the CKS conversion
  (:func:`engine.privacy.cdp_delta`), which is valid for vectors but needs a little more noise
  than the continuous analytic Gaussian (about 20 % more sigma at eps = 1, delta = 1e-6);
  :class:`ExactNoise` reports the sigma it uses and the release's expected error at it.
* **The grid.** Integer-valued strategies (identity, prefix, marginals, hierarchies, whose
  entries are integers) are released with spacing 1: ``A x`` is computed exactly in float64
  for counts below 2**53, nothing is rounded and the sensitivity is unchanged. Any other
  strategy's answers are rounded to the grid ``g = 2**-k`` (:func:`grid_sensitivity`; by
  default the coarsest grid that enlarges the sensitivity by at most 2**-10, relative,
  :func:`auto_grid_exponent`); a
  coordinate whose exact change is ``c`` then changes by at most ``g ceil(|c| / g) <= |c| + g``,
  and only the ``N`` coordinates a record touches change at all, so the sensitivities on the
  grid are bounded by ``D1 + g N`` (L1) and ``sqrt(D2**2 + 2 g D1 + g**2 N)`` (L2), with
  ``N`` the largest number of nonzeros in a column of the strategy (the approach OpenDP
  documents for its float mechanisms). For such real-weighted strategies the float64
  rounding error of ``A x`` itself (relative ~1e-16) is *not* accounted for.
* **Variance.** The discrete Gaussian's variance is below sigma**2 (CKS Corollary 9) and the
  discrete Laplace with scale b has variance ``2 e^(-1/b) / (1 - e^(-1/b))**2 < 2 b**2``; plans
  keep the continuous figures, an upper bound on the noise variance at the same parameter.
  The grid rounding adds a bias of at most g / 2 per strategy answer.

Randomness: :func:`release_rng` seeds numpy's PCG64 from the operating system's entropy
unless the caller gives a seed; a seeded run is for teaching and tests only and every output
of one carries :data:`SEEDED_LABEL`.

Example:
    >>> rng = release_rng(7)
    >>> z = discrete_gaussian(4.2, 100_000, rng)
    >>> z.dtype.name, bool(abs(z.mean()) < 0.1), bool(abs(z.std() - 4.2) < 0.05)
    ('int64', True, True)
"""

from __future__ import annotations

import decimal
import functools
import math
import secrets
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
from scipy.optimize import brentq

from engine.errors import SpecError

#: the label every seeded (reproducible) output carries
SEEDED_LABEL = "seeded: reproducible, not a private release"

MAX_GRID_EXPONENT = 40
#: the automatic grid is the coarsest whose rounding enlarges the sensitivity by at most this
GRID_INFLATION = 2.0**-10
#: largest discrete Laplace scale (grid units) the int64 arithmetic supports comfortably
MAX_LAPLACE_SCALE = float(2**40)
#: samples generated per vectorised round (memory is O(BATCH) whatever the size asked for)
BATCH = 1 << 16
#: largest sigma (in grid units) the int64 arithmetic of the Gaussian sampler supports
MAX_SIGMA = float(2**27)
_SAFE_SQUARE = 1 << 62  # x**2 below this fits int64 with room for the remainder arithmetic


# ----- randomness -------------------------------------------------------------------------
def release_rng(seed: int | None = None) -> np.random.Generator:
    """A PCG64 generator: 128 bits of OS entropy when ``seed`` is None, else the seed.

    Args:
        seed: None for a private release; an integer only for teaching and tests.
    """
    if seed is None:
        return np.random.default_rng(secrets.randbits(128))
    return np.random.default_rng(seed)


def seed_from_text(text: str | None, flag: str = "--seed") -> int | None:
    """Parse a ``--seed`` value: None/empty -> None, else a non-negative integer.

    Raises:
        SpecError: one line naming ``flag`` when the text is not such an integer.
    """
    if text is None or str(text).strip() == "":
        return None
    try:
        value = int(str(text).strip())
    except ValueError:
        raise SpecError(f"{flag}: expected a non-negative integer, got {text!r}") from None
    if value < 0:
        raise SpecError(f"{flag}: expected a non-negative integer, got {value}")
    return value


def seeded_label(seed: int | None) -> str | None:
    """:data:`SEEDED_LABEL` for a seeded run, None for an OS-entropy release."""
    return None if seed is None else SEEDED_LABEL


# ----- exact Bernoulli draws --------------------------------------------------------------
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


def _bernoulli_exp_big(num: int, den: int, rng: np.random.Generator) -> bool:
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


# ----- certified bounds on exp(-num / den) (the fast path) --------------------------------
#: the fractional part of an exponent is bracketed on a grid of 2**-_FRAC_BITS
_FRAC_BITS = 36
_DIGIT_BITS = 12  # the bracket is a product of three table factors, one per 12-bit digit
_DIGIT_COUNT = _FRAC_BITS // _DIGIT_BITS
#: exp(-w) for whole w beyond this is below 2**-57, under every 53-bit uniform but 0
_WHOLE_MAX = 40
#: relative slack of a product of at most six float64 factors (each rounding <= 2**-53)
_PRODUCT_SLACK = 2.0**-49
_U_BITS = 53  # the uniform U is read as a 53-bit prefix u: U in [u, u + 1) 2**-53
_U_UNIT = 2.0**-_U_BITS
_FIXED_BITS = 110  # fixed point of the table chains


def _decimal_exp_neg(num: int, den: int, bits: int) -> tuple[int, int]:
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


def _float_down(x: Fraction) -> float:
    """A float64 <= x (x >= 0)."""
    return math.nextafter(float(x), 0.0) if x > 0 else 0.0


def _float_up(x: Fraction) -> float:
    """A float64 >= x (x >= 0)."""
    return math.nextafter(float(x), math.inf)


def _exp_chain(step_num: int, step_den: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Float64 bounds on ``exp(-d step_num / step_den)`` for d = 0 .. count - 1: a lower and
    an upper chain of exact fixed-point products (floor / ceiling), directed to float64."""
    one = 1 << _FIXED_BITS
    ratio_lo, ratio_hi = _decimal_exp_neg(step_num, step_den, _FIXED_BITS)
    lo, hi = one, one
    lows, highs = [], []
    for _ in range(count):
        lows.append(_float_down(Fraction(lo, one)))
        highs.append(_float_up(Fraction(hi, one)))
        lo = lo * ratio_lo >> _FIXED_BITS
        hi = -(-hi * ratio_hi >> _FIXED_BITS)
    return np.array(lows), np.array(highs)


@functools.cache
def _exp_tables() -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """(lo, hi) tables: exp(-w) for whole w in [0, _WHOLE_MAX], then per 12-bit digit i
    exp(-d 2**(12 i) / 2**36) for d in [0, 4096] (the top one reaches 2**36: e^-1)."""
    tables = [_exp_chain(1, 1, _WHOLE_MAX + 1)]
    for i in range(_DIGIT_COUNT):
        tables.append(_exp_chain(1 << (_DIGIT_BITS * i), 1 << _FRAC_BITS,
                                 (1 << _DIGIT_BITS) + 1))
    return tuple(tables)


def _exp_neg_bounds(num: np.ndarray, den: int) -> tuple[np.ndarray, np.ndarray]:
    """Float64 arrays ``lo <= exp(-num / den) <= hi`` for int64 ``num >= 0``, den < 2**62,
    relative width about ``2**-34``.

    The whole part w = num // den is exact; the fraction f = (num mod den) / den is computed
    in float64 with an error below 0.1 units of 2**-36, so ``f 2**36`` lies in
    ``[j - 1, j + 2)`` for ``j = floor(f 2**36)`` computed; the bounds multiply tabulated
    bounds of exp(-w) and of exp(-digit 2**(12 i - 36)) and widen by :data:`_PRODUCT_SLACK`.
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
    lo *= 1.0 - _PRODUCT_SLACK
    hi *= 1.0 + _PRODUCT_SLACK
    lo[whole > _WHOLE_MAX] = 0.0
    return lo, hi


#: per-draw brackets put the whole exponent on a grid of 2**-24 (three 10-bit table digits)
_FAST_BITS = 24
_FAST_DIGIT_BITS = 10
_FAST_MAX = 41 << _FAST_BITS  # exponents above 41 - 2**-24: only the upper bound e^-41 is kept


@functools.cache
def _fast_tables() -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """(lo, hi) tables of exp(-d 2**(10 i) / 2**24), d < 1024, i = 0, 1, 2."""
    return tuple(_exp_chain(1 << (_FAST_DIGIT_BITS * i), 1 << _FAST_BITS,
                            1 << _FAST_DIGIT_BITS) for i in range(3))


def _exp_neg_fast(num: np.ndarray, den: int) -> tuple[np.ndarray, np.ndarray]:
    """Float64 arrays ``lo <= exp(-num / den) <= hi`` for int64 ``num >= 0`` (den >= 1), of
    relative width about 2**-22: the bracket of one draw's decision.

    ``num * (2**24 / den)`` in float64 is within a relative ``3 * 2**-53`` of the exponent's
    ``2**24`` multiple, so below ``41 * 2**24`` it lies in ``[j - 1, j + 2)`` for j its floor;
    the bounds are products of three tabulated digit factors widened by
    :data:`_PRODUCT_SLACK` (0 below, e^-41 above when the exponent may pass 41).
    """
    j = np.floor(num.astype(float) * (2.0**_FAST_BITS / den))
    down = np.clip(j - 1.0, 0.0, float(_FAST_MAX)).astype(np.int64)
    up = np.minimum(j + 2.0, float(_FAST_MAX)).astype(np.int64)
    mask = (1 << _FAST_DIGIT_BITS) - 1
    (lo0, hi0), (lo1, hi1), (lo2, hi2) = _fast_tables()
    lo = lo0[up & mask] * lo1[(up >> _FAST_DIGIT_BITS) & mask]
    lo *= lo2[up >> (2 * _FAST_DIGIT_BITS)] * (1.0 - _PRODUCT_SLACK)
    hi = hi0[down & mask] * hi1[(down >> _FAST_DIGIT_BITS) & mask]
    hi *= hi2[down >> (2 * _FAST_DIGIT_BITS)] * (1.0 + _PRODUCT_SLACK)
    lo[j + 2.0 > _FAST_MAX] = 0.0
    return lo, hi


def _uniform_prefix(n: int, rng: np.random.Generator) -> np.ndarray:
    """n independent 53-bit prefixes u (uint64) of uniforms U in [u, u + 1) 2**-53."""
    return rng.bit_generator.random_raw(n) >> np.uint64(64 - _U_BITS)


def _extend(prefix: int, bits: int, rng: np.random.Generator) -> tuple[int, int]:
    """The next 64 bits of a uniform whose first ``bits`` bits are ``prefix``."""
    return (prefix << 64) | int(rng.bit_generator.random_raw()), bits + 64


def _bernoulli_exp_refine(prefix: int, num: int, den: int, rng: np.random.Generator) -> bool:
    """``U < exp(-num / den)`` for U in [prefix, prefix + 1) 2**-53, exactly: more bits of U
    against tighter decimal bounds until the comparison is decided."""
    bits = _U_BITS
    while True:
        prefix, bits = _extend(prefix, bits, rng)
        lo, hi = _decimal_exp_neg(num, den, bits)
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
    lo, hi = _exp_chain(1, 1 << _COARSE_BITS, _COARSE_MAX + 1)
    lo[-1] = 0.0
    return lo, hi


def bernoulli_exp_fast(num: np.ndarray, den: int, rng: np.random.Generator) -> np.ndarray:
    """Exact Bernoulli(exp(-num / den)) for int64 ``num >= 0``, one 64-bit draw each.

    ``U < exp(-gamma)`` is decided from U's first 53 bits whenever they lie on one side of a
    certified bracket: first the exponent's 2**-8 grid cell (``gamma 2**8`` in float64 is
    within 0.01 of its true value below 42, so it lies in ``[j - 1, j + 2)``; one table
    lookup per side; all but about 1 % of the draws), then :func:`_exp_neg_fast` for the
    rest (all but about 2**-22 of those); the few left read more bits of the same U against
    decimal bounds (:func:`_bernoulli_exp_refine`). The result is exactly
    Bernoulli(exp(-gamma)).
    """
    num = np.asarray(num, dtype=np.int64)
    u = _uniform_prefix(num.shape[0], rng)
    low = u.astype(float) * _U_UNIT
    j = np.floor(num.astype(float) * (2.0**_COARSE_BITS / den))
    table_lo, table_hi = _coarse_table()
    accept = low + _U_UNIT <= table_lo[np.minimum(j + 2.0, _COARSE_MAX).astype(np.int64)]
    unsure = np.flatnonzero(~accept & (low < table_hi[np.clip(j - 1.0, 0.0, _COARSE_MAX)
                                                      .astype(np.int64)]))
    if unsure.size:
        lo, hi = _exp_neg_fast(num[unsure], den)
        accept[unsure] = low[unsure] + _U_UNIT <= lo
        for i in unsure[~accept[unsure] & (low[unsure] < hi)].tolist():
            accept[i] = _bernoulli_exp_refine(int(u[i]), int(num[i]), den, rng)
    return accept


# ----- discrete Laplace -------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class _LaplaceInversion:
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
def _laplace_inversion(t: int, s: int) -> _LaplaceInversion:
    """The inversion tables of Lap_Z(t / s), certified by :func:`_decimal_exp_neg` (C) and
    :func:`_exp_neg_bounds` (the powers of q); at most about 90,000 levels.

    Scales of 2**11 and above use blocks M = 2**(floor(log2(t / s)) - 7): the block index is
    inverted (scale t / (s M) in [2**7, 2**8), about 6,000 levels, a table that stays in
    cache) and the offset in the block drawn by rejection with acceptance at least
    exp(-2**-7)."""
    bits_of_scale = (t // s).bit_length()
    block_bits = 0 if bits_of_scale <= 11 else bits_of_scale - 8
    bits = 80
    one = 1 << bits
    q_lo, q_hi = _decimal_exp_neg(s, t, bits)
    c_lo = _float_down(Fraction(2 * q_lo, one + q_lo))
    c_hi = _float_up(Fraction(2 * q_hi, one + q_hi))
    rate = (s << block_bits) / t
    log_c = math.log(c_hi) if c_hi > 0 else -745.0
    level_max = max(1, math.ceil((60.0 * math.log(2.0) + log_c) / rate) + 2)
    lo, hi = _exp_neg_bounds(np.arange(level_max + 1, dtype=np.int64) * (s << block_bits), t)
    upper = hi * (c_hi * (1.0 + _PRODUCT_SLACK))
    lower = np.concatenate([[2.0], lo[:-1] * (c_lo * (1.0 - _PRODUCT_SLACK))])
    return _LaplaceInversion(t, s, block_bits, rate, log_c, level_max, upper, lower)


def _threshold_bounds(p: _LaplaceInversion, level: int, bits: int) -> tuple[int, int]:
    """Integers bracketing ``2**bits C q**(M level)``."""
    one = 1 << bits
    e_lo, e_hi = _decimal_exp_neg(p.s * ((level << p.block_bits) + 1), p.t, bits)
    q_lo, q_hi = _decimal_exp_neg(p.s, p.t, bits)
    return 2 * e_lo * one // (one + q_hi), -(-2 * e_hi * one // (one + q_lo))


def _level_refine(prefix: int, p: _LaplaceInversion, rng: np.random.Generator) -> int:
    """The level ``K = #{j >= 0: U < C q**(M j)}`` of U in [prefix, prefix + 1) 2**-53,
    exactly: walk from the float guess with decimal bounds, reading more bits of U when a
    threshold is not yet decided."""
    bits = _U_BITS
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
        prefix, bits = _extend(prefix, bits, rng)


def _levels(p: _LaplaceInversion, u: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``K = #{j >= 0: U < C q**(M j)}`` for the 53-bit prefixes u by inversion: a float64
    guess, certified by the tabulated brackets of the thresholds on each side, moved by one
    where they prove it off; undecided draws go to :func:`_level_refine`."""
    low = u.astype(float) * _U_UNIT
    high = low + _U_UNIT
    guess = (p.log_c - np.log(low + 0.5 * _U_UNIT)) * (1.0 / p.rate)
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


def _block_offsets(p: _LaplaceInversion, n: int, rng: np.random.Generator) -> np.ndarray:
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


def _laplace_draws(p: _LaplaceInversion, n: int, rng: np.random.Generator) -> np.ndarray:
    """n exact draws of Lap_Z(t / s): ``|Z| = 0`` at level 0, else
    ``1 + M (K - 1) + R``; the sign is the lowest bit of the 64-bit draw whose top 53 bits
    give U."""
    raw = rng.bit_generator.random_raw(n)
    magnitude = _levels(p, raw >> np.uint64(64 - _U_BITS), rng)
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
    p = _laplace_inversion(*laplace_parameter(scale))
    return _fill(lambda m: _laplace_draws(p, m, rng), int(size), 1.0)


# ----- discrete Gaussian ------------------------------------------------------------------
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
    last = _laplace_inversion(p.t, 1).level_max
    x = np.abs(np.arange(last + 1, dtype=np.int64) * p.q - p.m)
    small = x < math.isqrt(_SAFE_SQUARE)
    lo = np.zeros(last + 1)
    hi = np.full(last + 1, _float_up(Fraction(1, 2**92)))  # x**2 >= 2**62 >= 64 den: < e^-64
    lo[small], hi[small] = _exp_neg_bounds(x[small] * x[small], p.den)
    lo[last] = 0.0
    return lo, hi


def _gaussian_proposals(p: GaussianParameter, n: int, rng: np.random.Generator) -> np.ndarray:
    """CKS Algorithm 3 on n Lap_Z(t) proposals Y: each kept with probability
    ``exp(-(|Y| q - m)**2 / (2 m t q))``, decided from a 53-bit uniform against tabulated
    brackets, reading more bits when undecided (t >= 2**11:
    :func:`_gaussian_block_proposals`)."""
    laplace = _laplace_inversion(p.t, 1)
    if laplace.block_bits:
        return _gaussian_block_proposals(p, laplace, n, rng)
    y = _laplace_draws(laplace, n, rng)
    lo, hi = _gaussian_acceptance(p)
    index = np.minimum(np.abs(y), laplace.level_max)
    u = _uniform_prefix(n, rng)
    low = u.astype(float) * _U_UNIT
    accept = low + _U_UNIT <= lo[index]
    for i in np.flatnonzero(~accept & (low < hi[index])).tolist():
        x = abs(int(y[i])) * p.q - p.m
        accept[i] = _bernoulli_exp_refine(int(u[i]), x * x, p.den, rng)
    return y[accept]


def _gaussian_block_proposals(p: GaussianParameter, laplace: _LaplaceInversion, n: int,
                              rng: np.random.Generator) -> np.ndarray:
    """CKS Algorithm 3 for t >= 2**11 with the Lap_Z(t) proposal's block offset R drawn
    uniformly and its rejection folded into the acceptance: ``|Y| = 1 + M (K - 1) + R`` is
    kept with probability ``exp(-R / t) exp(-(|Y| q - m)**2 / (2 m t q))``, one exact
    Bernoulli(exp(-a / (2 m t q))) with ``a = (|Y| q - m)**2 + 2 m q R``; the kept draws are
    the same law as rejecting R first (both acceptances multiply)."""
    raw = rng.bit_generator.random_raw(n)
    level = _levels(laplace, raw >> np.uint64(64 - _U_BITS), rng)
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
            accept[i] = _bernoulli_exp_big(xi * xi + int(offset[i]) * extra - lower, p.den,
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
    return _fill(lambda m: _gaussian_proposals(p, m, rng), int(size),
                 0.58 if p.t <= 2 else 0.74)


def _fill(propose: Any, size: int, rate: float) -> np.ndarray:
    """Draw ``size`` accepted samples in vectorised rounds of at most :data:`BATCH`."""
    out = np.empty(size, dtype=np.int64)
    filled = 0
    while filled < size:
        need = size - filled
        got = propose(min(BATCH, int(need / rate) + 64))
        take = min(need, got.size)
        out[filled:filled + take] = got[:take]
        filled += take
    return out


# ----- the exponential mechanism ----------------------------------------------------------
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


# ----- pmfs (for tests and the CKS curve) -------------------------------------------------
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


def discrete_gaussian_delta(sigma: float, epsilon: float, sensitivity: int) -> float:
    """delta of the 1-D discrete Gaussian at eps for an integer shift <= ``sensitivity``.

    CKS 2020, Theorem 7: ``delta = P[Y > eps s2/D - D/2] - e^eps P[Y > eps s2/D + D/2]``
    with Y ~ N_Z(0, s2). Summed in double precision over the support (sigma <= 1e5).
    """
    if sigma > 1e5:
        raise ValueError("discrete_gaussian_delta: sigma above 1e5; use the zCDP bound")
    half = int(math.ceil(40.0 * sigma + epsilon * sigma**2 / sensitivity + sensitivity)) + 1
    y = np.arange(-half, half + 1, dtype=float)
    logw = -(y**2) / (2.0 * sigma**2)
    w = np.exp(logw - logw.max())
    w /= w.sum()
    a = epsilon * sigma**2 / sensitivity
    upper = w[y > a - sensitivity / 2.0].sum()
    lower = w[y > a + sensitivity / 2.0].sum()
    return max(0.0, float(upper - math.exp(epsilon) * lower))


def discrete_gaussian_sigma(epsilon: float, delta: float, sensitivity: int) -> float:
    """Smallest sigma whose 1-D discrete Gaussian is (eps, delta)-DP (CKS Theorem 7)."""
    def excess(sigma: float) -> float:
        return discrete_gaussian_delta(sigma, epsilon, sensitivity) - delta

    lo, hi = 1e-3 * sensitivity, float(sensitivity)
    while excess(hi) > 0:
        hi *= 2.0
    return float(brentq(excess, lo, hi, xtol=1e-12, rtol=1e-12))


def zcdp_gaussian_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    """sigma of a discrete Gaussian vector release that is (eps, delta)-DP via rho-zCDP.

    rho = ``cdp_rho(eps, delta)`` (CKS conversion), sigma = sensitivity / sqrt(2 rho).
    """
    from engine.privacy import cdp_rho

    return sensitivity / math.sqrt(2.0 * cdp_rho(epsilon, delta))


# ----- the grid and the sensitivity on it -------------------------------------------------
def check_grid_exponent(k: Any, flag: str = "--grid") -> int:
    """A grid exponent k (spacing 2**-k) in [0, 40], or a one-line SpecError naming ``flag``."""
    text = str(k).strip()
    if isinstance(k, bool) or not (isinstance(k, int) or text.lstrip("-").isdigit()):
        raise SpecError(f"{flag}: expected an integer in [0, {MAX_GRID_EXPONENT}], got {k!r}")
    value = int(text)
    if not 0 <= value <= MAX_GRID_EXPONENT:
        raise SpecError(f"{flag}: expected an integer in [0, {MAX_GRID_EXPONENT}] (spacing "
                        f"2**-k), got {value}")
    return value


def is_integral(A: Any) -> bool:
    """True when every entry of the implicit strategy is an integer (then A x is exact)."""
    from engine.linalg.marginals import MarginalStrategy
    from engine.linalg.matrix import Dense, Identity, Kron, Ones, Scaled, Sparse, VStack

    if isinstance(A, Identity | Ones):
        return True
    if isinstance(A, Dense):
        return bool(np.all(np.mod(A.array, 1.0) == 0.0))
    if isinstance(A, Sparse):
        return bool(np.all(np.mod(A.matrix.data, 1.0) == 0.0))
    if isinstance(A, Scaled):
        return float(A.c).is_integer() and is_integral(A.base)
    if isinstance(A, Kron):
        return all(is_integral(f) for f in A.factors)
    if isinstance(A, VStack):
        return (all(float(w).is_integer() for w in A.weights)
                and all(is_integral(b) for b in A.blocks))
    if isinstance(A, MarginalStrategy):
        return bool(np.all(np.mod(A.theta, 1.0) == 0.0))
    return False


def column_support(A: Any) -> int:
    """An upper bound on the nonzeros of any column of the strategy (rows touched by one
    record); exact for the structured types, the number of rows otherwise."""
    from engine.linalg.marginals import MarginalStrategy
    from engine.linalg.matrix import Dense, Identity, Kron, Ones, Scaled, Sparse, VStack

    if isinstance(A, Identity):
        return 1
    if isinstance(A, Ones):
        return A.shape[0]
    if isinstance(A, Dense):
        return int(np.count_nonzero(A.array, axis=0).max())
    if isinstance(A, Sparse):
        counts = np.diff(A.matrix.tocsc().indptr)
        return int(counts.max()) if counts.size else 0
    if isinstance(A, Scaled):
        return column_support(A.base) if A.c != 0 else 0
    if isinstance(A, Kron):
        return math.prod(column_support(f) for f in A.factors)
    if isinstance(A, VStack):
        return sum(column_support(b) for b, w in zip(A.blocks, A.weights, strict=True) if w)
    if isinstance(A, MarginalStrategy):
        return int(np.count_nonzero(A.theta))
    return int(A.shape[0])


def grid_sensitivity(l1: float, l2: float, support: int, spacing: float
                     ) -> tuple[float, float]:
    """(L1, L2) sensitivities of ``x -> round(A x / g) g`` in answer units (module docstring)."""
    l2_grid = l2 + spacing * math.sqrt(support)  # triangle inequality; needs no finite L1
    if math.isfinite(l1):
        l2_grid = min(l2_grid, math.sqrt(l2**2 + 2.0 * spacing * l1 + spacing**2 * support))
    return l1 + spacing * support, l2_grid


# ----- a calibrated exact noise for one measurement ---------------------------------------
@dataclass(frozen=True)
class ExactNoise:
    """The exact noise of one measurement: sampler, grid, parameter and achieved guarantee.

    Attributes:
        sampler: ``discrete_gaussian`` or ``discrete_laplace``.
        grid_exponent: k of the grid spacing 2**-k (0 for integer strategies).
        scale: sigma (Gaussian) or b (Laplace) in answer units; the sampler rounds it up
            by at most a relative 1e-8 (module docstring).
        sensitivity: the sensitivity on the grid in answer units (L2 for Gaussian, L1 for
            Laplace) the guarantee is computed from.
        plan_scale: the continuous plan's sigma (or b) in answer units, for comparison.
        guarantee: the achieved level, e.g. ``{"rho": ...}`` or ``{"epsilon", "delta"}``.
        calibration: how the parameter was found (text).
    """

    sampler: str
    grid_exponent: int
    scale: float
    sensitivity: float
    plan_scale: float
    guarantee: dict[str, float]
    calibration: str

    @property
    def spacing(self) -> float:
        """The grid spacing ``2**-k``."""
        return 2.0 ** -self.grid_exponent

    @property
    def noise_std(self) -> float:
        """Upper bound on the per-answer noise std in answer units (the continuous one)."""
        return self.scale * (math.sqrt(2.0) if self.sampler == "discrete_laplace" else 1.0)

    @property
    def variance_factor(self) -> float:
        """``(scale / plan_scale)**2``: the release's expected squared error is the plan's times
        this (1 for zCDP and Laplace on integer strategies; about 1.15 for (eps, delta) through
        zCDP; slightly above 1 where the grid enlarges the sensitivity)."""
        return (self.scale / self.plan_scale) ** 2

    def integers(self, size: int, rng: np.random.Generator) -> np.ndarray:
        """Integer noise in grid units."""
        unit = Fraction(self.scale) / Fraction(self.spacing)
        if self.sampler == "discrete_laplace":
            return discrete_laplace(unit, size, rng)
        return discrete_gaussian(unit, size, rng)

    def apply(self, exact: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """``g (round(exact / g) + Z)``: the released answers, on the grid.

        Drawn in chunks of :data:`BATCH` answers, so the memory beyond the output is
        O(BATCH) (no full-size integer noise or lattice array)."""
        exact = np.asarray(exact, dtype=float)
        g = self.spacing
        flat = exact.reshape(-1)
        out = np.empty(flat.size)
        for start in range(0, flat.size, BATCH):
            chunk = flat[start:start + BATCH]
            lattice = np.floor(chunk / g + 0.5)
            lattice += self.integers(chunk.size, rng)
            out[start:start + chunk.size] = lattice * g
        return out.reshape(exact.shape)

    def record(self) -> dict[str, Any]:
        """The JSON fields of a release record that describe this noise."""
        return {"sampler": self.sampler, "exact": True, "grid_exponent": self.grid_exponent,
                "grid_spacing": self.spacing, "scale": self.scale,
                "sensitivity_on_grid": self.sensitivity, "plan_scale": self.plan_scale,
                "variance_factor": self.variance_factor,
                "guarantee": dict(self.guarantee), "calibration": self.calibration}


def auto_grid_exponent(laplace: bool, l1: float, l2: float, support: int,
                       unit_scale: float) -> int:
    """The coarsest grid 2**-k (k in 0..40) whose rounding enlarges the sensitivity in the
    noise's norm by at most :data:`GRID_INFLATION` (relative), without the noise scale in grid
    units passing the samplers' int64 limits (then the finest grid within them).

    Args:
        laplace: True for L1 / discrete Laplace, False for L2 / discrete Gaussian.
        l1, l2: the strategy's sensitivities; support: :func:`column_support`.
        unit_scale: noise scale per unit of sensitivity (sigma, or 1 / eps).
    """
    base = l1 if laplace else l2
    limit = MAX_LAPLACE_SCALE if laplace else MAX_SIGMA
    k_max = MAX_GRID_EXPONENT
    if base * unit_scale > 0:
        k_max = min(k_max, max(0, math.floor(math.log2(limit / (2.0 * base * unit_scale)))))
    for k in range(k_max + 1):
        d1, d2 = grid_sensitivity(l1, l2, support, 2.0**-k)
        if (d1 if laplace else d2) <= base * (1.0 + GRID_INFLATION):
            return k
    return k_max


def exact_noise(privacy: Any, l1: float, l2: float, *, integral: bool, support: int,
                grid_exponent: int | None = None) -> ExactNoise:
    """Calibrate the exact noise of a measurement with sensitivities (l1, l2).

    Args:
        privacy: an :class:`engine.privacy.Privacy` (laplace, gaussian or zcdp).
        l1, l2: the strategy's L1 and L2 sensitivities (answer units).
        integral: True when the strategy's entries are integers (then no rounding, spacing 1).
        support: :func:`column_support` of the strategy.
        grid_exponent: k of the spacing 2**-k for non-integer strategies; None chooses it
            (:func:`auto_grid_exponent`).
    """
    laplace = privacy.noise == "laplace"
    if integral:
        k = 0
    elif grid_exponent is None:
        k = auto_grid_exponent(laplace, l1, l2, support,
                               1.0 / privacy.epsilon if laplace else privacy.sigma())
    else:
        k = check_grid_exponent(grid_exponent)
    g = 2.0**-k
    d1, d2 = (l1, l2) if integral else grid_sensitivity(l1, l2, support, g)
    if privacy.noise == "laplace":
        if not math.isfinite(d1):
            raise SpecError("privacy.noise: laplace needs a finite L1 sensitivity")
        b = d1 / privacy.epsilon
        t, s = laplace_parameter(Fraction(b) / Fraction(g))
        scale = float(Fraction(t, s) * Fraction(g))
        return ExactNoise("discrete_laplace", k, scale, d1, l1 / privacy.epsilon,
                          {"epsilon": d1 / scale}, "b = L1 / eps on the grid")
    if privacy.noise == "zcdp":
        sigma = d2 / math.sqrt(2.0 * privacy.rho)
        how = "sigma = L2 / sqrt(2 rho) (exact zCDP of the discrete Gaussian)"
    else:
        sigma = zcdp_gaussian_sigma(privacy.epsilon, privacy.delta, d2)
        how = "rho-zCDP then the CKS conversion to (eps, delta)"
        shift = d2 / g
        if support == 1 and float(shift).is_integer() and sigma / g <= 1e5:
            one_d = discrete_gaussian_sigma(privacy.epsilon, privacy.delta, int(shift)) * g
            if one_d < sigma:
                sigma, how = one_d, "CKS Theorem 7 (one coordinate per record)"
    # the sampler rounds sigma**2 up (gaussian_parameter): the guarantee at sigma is conservative
    guarantee = {"rho": d2**2 / (2.0 * sigma**2)}
    if privacy.noise == "gaussian":
        guarantee.update(epsilon=float(privacy.epsilon), delta=float(privacy.delta))
    return ExactNoise("discrete_gaussian", k, sigma, d2, privacy.sigma() * l2, guarantee, how)
