"""Exact integer noise (discrete Laplace, discrete Gaussian), releases on a grid, OS entropy.

Floating-point Laplace and Gaussian samples leak through their low-order bits (Mironov,
CCS 2012). A release here instead adds *integer* noise to answers that lie on a grid of
spacing ``2**-k``::

    released = g * (round(A x / g) + Z),    g = 2**-k,  Z ~ N_Z(0, s**2) or Lap_Z(b)

What is exact, and what is not:

* **Samplers.** :func:`discrete_laplace` and :func:`discrete_gaussian` implement Algorithms 1-3
  of Canonne, Kamath & Steinke, "The Discrete Gaussian for Differential Privacy" (2020) in
  exact integer arithmetic: every Bernoulli(p) with rational p = a / b is decided by
  ``rng.integers(0, b) < a`` on int64 arrays (numpy's bounded integers are exactly uniform),
  and Bernoulli(exp(-a / b)) uses CKS Algorithm 1 (a run of Bernoulli(gamma / K) draws, each
  the AND of Bernoulli(a / b) and Bernoulli(1 / K)). No float enters an acceptance decision.
  The loops run over *rounds* of these algorithms; each round handles the whole batch with
  masks, so the cost per sample is a few vectorised integer draws.
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
BATCH = 1 << 20
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


# ----- discrete Laplace -------------------------------------------------------------------
def _geometric_exp1(n: int, rng: np.random.Generator) -> np.ndarray:
    """n draws of V ~ Geometric(1 - e^-1) on {0, 1, ...}: Bernoulli(exp(-1)) successes."""
    v = np.zeros(n, dtype=np.int64)
    alive = np.arange(n)
    while alive.size:
        alive = alive[bernoulli_exp1(alive.size, rng)]
        v[alive] += 1
    return v


def _laplace_proposals(t: int, s: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """CKS Algorithm 2 on n candidates: accepted draws of Lap_Z(t / s) (fewer than n)."""
    w = rng.integers(0, 2 * t, n)  # one draw for U uniform on [0, t) and the sign bit
    w = w[_bernoulli_exp_fraction(w >> 1, t, rng)]
    v = _geometric_exp1(w.size, rng)
    if v.size and int(v.max()) > ((1 << 62) - t) // t:
        raise OverflowError("discrete Laplace: geometric draw overflows int64")
    y = ((w >> 1) + t * v) >> (s.bit_length() - 1)  # s is a power of two
    negative = (w & 1).astype(bool)
    np.negative(y, out=y, where=negative)
    return y[~(negative & (y == 0))]


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
    t, s = laplace_parameter(scale)
    # measured acceptance of CKS Algorithm 2: 0.57 for small scales, 0.63 for large ones
    return _fill(lambda m: _laplace_proposals(t, s, m, rng), int(size),
                 0.55 if t <= 4 * s else 0.62)


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


def _gaussian_proposals(p: GaussianParameter, n: int, rng: np.random.Generator) -> np.ndarray:
    """CKS Algorithm 3 on n Lap_Z(t) proposals: the accepted discrete Gaussian draws."""
    y = _laplace_proposals(p.t, 1, n, rng)
    x = np.abs(y) * p.q - p.m
    small = np.abs(x) < math.isqrt(_SAFE_SQUARE)
    big = np.flatnonzero(~small)
    if big.size:
        accept = np.zeros(y.size, dtype=bool)
        idx = np.flatnonzero(small)
        accept[idx] = bernoulli_exp(x[idx] * x[idx], p.den, rng)
    else:  # the usual case: every exponent fits int64
        accept = bernoulli_exp(x * x, p.den, rng)
    if big.size:
        # here x**2 >= 2**62 >= lower = floor(2**62 / den) den, with floor(2**62 / den) >= 64:
        # that many Bernoulli(exp(-1)) rounds first, then exact Python-integer arithmetic for
        # the survivors (probability below e**-64 each)
        lower = (_SAFE_SQUARE // p.den) * p.den
        alive = bernoulli_exp(np.full(big.size, lower, np.int64), p.den, rng)
        for i in big[alive].tolist():
            xi = abs(int(y[i])) * p.q - p.m
            accept[i] = _bernoulli_exp_big(xi * xi - lower, p.den, rng)
    return y[accept]


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
    # measured acceptance of CKS Algorithm 3: 0.35 at sigma = 0.5, 0.47-0.48 from sigma ~ 2 on
    return _fill(lambda m: _gaussian_proposals(p, m, rng), int(size),
                 0.34 if p.t <= 2 else 0.46)


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
        """``g (round(exact / g) + Z)``: the released answers, on the grid."""
        exact = np.asarray(exact, dtype=float)
        g = self.spacing
        lattice = np.floor(exact / g + 0.5)
        noise = self.integers(exact.size, rng).reshape(exact.shape)
        return (lattice + noise) * g

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
