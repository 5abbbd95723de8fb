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
  (:mod:`engine.noise.laplace`), so each draw has exactly the discrete Laplace law. Scales of
  2**11 grid units and more invert a block index instead and draw the offset in the block by
  exact rejection. :func:`discrete_gaussian` is CKS 2020's Algorithm 3 (Canonne, Kamath &
  Steinke, "The Discrete Gaussian for Differential Privacy") on those Laplace proposals; each
  acceptance ``U < exp(-gamma)`` (gamma an exact rational) is decided the same way: tabulated
  brackets, then products of digit tables (:mod:`engine.noise.brackets`), then decimal refinement
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

The modules, one idea each: :mod:`~engine.noise.seeds` (OS-entropy generators, seeds and
their label), :mod:`~engine.noise.brackets` (certified brackets of exp(-x)),
:mod:`~engine.noise.bernoulli`, :mod:`~engine.noise.laplace` and :mod:`~engine.noise.gaussian`
(the exact samplers), :mod:`~engine.noise.batches` (vectorised rounds),
:mod:`~engine.noise.exponential` (the exponential mechanism), :mod:`~engine.noise.calibration`
(the discrete Gaussian's (eps, delta) calibration), :mod:`~engine.noise.grid` (the release grid
and the sensitivity on it) and :mod:`~engine.noise.exact` (:class:`ExactNoise`, the calibrated
noise of one measurement). Everything public is re-exported here.

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

from engine.noise.batches import BATCH
from engine.noise.bernoulli import bernoulli_exp, bernoulli_exp1, bernoulli_exp_fast
from engine.noise.calibration import (
    discrete_gaussian_delta,
    discrete_gaussian_sigma,
    zcdp_gaussian_sigma,
)
from engine.noise.exact import ExactNoise, exact_noise
from engine.noise.exponential import SCORE_GRID_EXPONENT, exponential_mechanism
from engine.noise.gaussian import (
    MAX_SIGMA,
    GaussianParameter,
    discrete_gaussian,
    gaussian_parameter,
)
from engine.noise.grid import (
    GRID_INFLATION,
    MAX_GRID_EXPONENT,
    auto_grid_exponent,
    check_grid_exponent,
    column_support,
    grid_sensitivity,
    is_integral,
)
from engine.noise.laplace import MAX_LAPLACE_SCALE, discrete_laplace, laplace_parameter
from engine.noise.seeds import SEEDED_LABEL, release_rng, seed_from_text, seeded_label

__all__ = [
    "BATCH",
    "ExactNoise",
    "GRID_INFLATION",
    "GaussianParameter",
    "MAX_GRID_EXPONENT",
    "MAX_LAPLACE_SCALE",
    "MAX_SIGMA",
    "SCORE_GRID_EXPONENT",
    "SEEDED_LABEL",
    "auto_grid_exponent",
    "bernoulli_exp",
    "bernoulli_exp1",
    "bernoulli_exp_fast",
    "check_grid_exponent",
    "column_support",
    "discrete_gaussian",
    "discrete_gaussian_delta",
    "discrete_gaussian_sigma",
    "discrete_laplace",
    "exact_noise",
    "exponential_mechanism",
    "gaussian_parameter",
    "grid_sensitivity",
    "is_integral",
    "laplace_parameter",
    "release_rng",
    "seed_from_text",
    "seeded_label",
    "zcdp_gaussian_sigma",
]
