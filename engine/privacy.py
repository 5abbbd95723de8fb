"""Privacy units and noise calibration.

Three noise families are supported:

* ``laplace``: pure eps-DP, Laplace noise of scale ``sensitivity_L1 / eps`` per entry
  (variance ``2 * sensitivity_L1**2 / eps**2``);
* ``gaussian``: (eps, delta)-DP with the analytic Gaussian mechanism of Balle & Wang (2018),
  ``sigma(eps, delta)`` per unit of L2 sensitivity (4.224679 at eps=1, delta=1e-6);
* ``zcdp``: rho-zCDP, Gaussian noise with ``sigma**2 = sensitivity_L2**2 / (2 rho)``.

The conversions rho <-> (eps, delta) use the bound of Canonne, Kamath & Steinke (2020),
as in the reference code of private-pgm. "Privacy cost 1" in ResidualPlanner / QuerySmasher
means rho = 0.5.

The inverse question, "the smallest budget whose noise is at most sigma" (or "whose error is
at most t"), is :func:`budget_for_sigma` / :func:`budget_for_rmse`: exact rescales for
Laplace, zCDP and the classical Gaussian calibrations, a root search for the analytic
Gaussian mechanism.

Example:
    >>> round(analytic_gaussian_sigma(1.0, 1e-6), 6)
    4.224679
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np
import param
from scipy.optimize import brentq
from scipy.special import log_ndtr

from engine import html_tables as html
from engine.errors import SpecError, suggest

NOISE_TYPES = ("laplace", "gaussian", "zcdp")
GAUSSIAN_CALIBRATIONS = ("analytic", "classical", "li-miklau")


def _check_eps_delta(eps: float, delta: float) -> None:
    if not (eps > 0 and math.isfinite(eps)):
        raise SpecError(f"privacy.epsilon: must be a positive number, got {eps!r}")
    if not (0 < delta < 1):
        raise SpecError(f"privacy.delta: must lie strictly between 0 and 1, got {delta!r}")


def _analytic_delta(sigma: float, eps: float) -> float:
    """The delta of the Gaussian mechanism with noise ``sigma`` per unit L2 sensitivity at
    ``eps`` (Balle & Wang 2018, Theorem 8), computed in log space; decreasing in both."""
    a = log_ndtr(0.5 / sigma - eps * sigma)
    b = eps + log_ndtr(-0.5 / sigma - eps * sigma)
    # delta = e^a - e^b, computed stably
    return math.exp(a) * -math.expm1(b - a) if b < a else 0.0


@lru_cache(maxsize=4096)
def analytic_gaussian_sigma(eps: float, delta: float) -> float:
    """Smallest Gaussian noise std per unit L2 sensitivity that gives (eps, delta)-DP.

    Solves ``Phi(1/(2s) - eps s) - e^eps Phi(-1/(2s) - eps s) = delta`` for ``s`` by root
    finding (Balle & Wang 2018, Theorem 8). Computed in log space so that tiny deltas and
    large eps stay accurate.
    """
    _check_eps_delta(eps, delta)

    def excess(s: float) -> float:
        return _analytic_delta(s, eps) - delta

    lo, hi = 1e-8, 1.0
    while excess(hi) > 0:
        hi *= 2.0
    # A large eps needs less noise than 1e-8; past ~1e-300 the scale leaves a float's range.
    while excess(lo) < 0:
        if lo < 1e-290:
            raise SpecError(f"privacy.epsilon: {eps:g} puts the Gaussian noise scale below "
                            "a float's range")
        lo, hi = lo * 1e-8, lo
    return float(brentq(excess, lo, hi, xtol=min(1e-15, lo * 1e-7), rtol=1e-15, maxiter=500))


def classical_gaussian_sigma(eps: float, delta: float) -> float:
    """The classical calibration ``sqrt(2 ln(1.25/delta)) / eps`` (valid for eps < 1)."""
    _check_eps_delta(eps, delta)
    return math.sqrt(2.0 * math.log(1.25 / delta)) / eps


def li_miklau_gaussian_sigma(eps: float, delta: float) -> float:
    """The calibration ``sqrt(2 ln(2/delta)) / eps`` used in Li & Miklau's eigen-design paper."""
    _check_eps_delta(eps, delta)
    return math.sqrt(2.0 * math.log(2.0 / delta)) / eps


def cdp_delta(rho: float, eps: float) -> float:
    """Smallest delta such that rho-zCDP implies (eps, delta)-DP (Canonne-Kamath-Steinke)."""
    if rho < 0 or eps < 0:
        raise SpecError("privacy: rho and epsilon must be non-negative")
    if rho == 0:
        return 0.0
    # the best order alpha nears 1 as rho grows (1 + sqrt(log(1/delta) / rho)): start just above 1
    amin, amax = math.nextafter(1.0, 2.0), (eps + 1.0) / (2.0 * rho) + 2.0
    for _ in range(1000):
        alpha = (amin + amax) / 2.0
        derivative = (2.0 * alpha - 1.0) * rho - eps + math.log1p(-1.0 / alpha)
        bounds = (amin, amax)
        if derivative < 0:
            amin = alpha
        else:
            amax = alpha
        if (amin, amax) == bounds:
            break  # bisected to adjacent floats: every further step repeats this one
    # in logs: for a large rho the bound itself overflows a float long before it matters
    # (any bound of 1 or more says nothing and is reported as 1)
    log_delta = ((alpha - 1.0) * (alpha * rho - eps) + alpha * math.log1p(-1.0 / alpha)
                 - math.log(alpha - 1.0))
    return math.exp(log_delta) if log_delta < 0 else 1.0


def cdp_eps(rho: float, delta: float) -> float:
    """Smallest eps such that rho-zCDP implies (eps, delta)-DP."""
    if rho < 0:
        raise SpecError(f"privacy.rho: must be non-negative, got {rho!r}")
    if not (delta > 0):
        raise SpecError(f"privacy.delta: must be positive, got {delta!r}")
    if delta >= 1 or rho == 0:
        return 0.0
    epsmin, epsmax = 0.0, rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))
    for _ in range(1000):
        eps = (epsmin + epsmax) / 2.0
        bounds = (epsmin, epsmax)
        if cdp_delta(rho, eps) <= delta:
            epsmax = eps
        else:
            epsmin = eps
        if (epsmin, epsmax) == bounds:
            break  # adjacent floats: every further step repeats this one
    return epsmax


def cdp_rho(eps: float, delta: float) -> float:
    """Largest rho such that rho-zCDP implies (eps, delta)-DP."""
    _check_eps_delta(eps, delta)
    rhomin, rhomax = 0.0, eps + 1.0
    for _ in range(1000):
        rho = (rhomin + rhomax) / 2.0
        bounds = (rhomin, rhomax)
        if cdp_delta(rho, eps) <= delta:
            rhomin = rho
        else:
            rhomax = rho
        if (rhomin, rhomax) == bounds:
            break  # adjacent floats: every further step repeats this one
    return rhomin


#: Largest budget (eps or rho) the inverse question reports; beyond it a target is unreachable.
BUDGET_LIMIT = 1e300


def _analytic_epsilon(sigma: float, delta: float) -> float:
    """Smallest eps at which the Gaussian mechanism with noise ``sigma`` per unit L2
    sensitivity is (eps, delta)-DP; 0.0 when it is for every eps > 0."""
    # At eps = 0: delta(sigma, 0) = 2 Phi(1/(2 sigma)) - 1.
    if math.erf(0.5 / (sigma * math.sqrt(2.0))) <= delta:
        return 0.0
    lo, hi = 1.0, 1.0
    while _analytic_delta(sigma, lo) <= delta:
        lo /= 2.0
        if lo < 1e-300:  # the eps -> 0 limit meets delta up to rounding
            return 0.0
    while _analytic_delta(sigma, hi) > delta:
        hi *= 2.0
        if hi > BUDGET_LIMIT:
            raise SpecError(f"target: noise std {sigma:.3g} per unit sensitivity needs eps "
                            f"above {BUDGET_LIMIT:g}")
    # Searched in log eps for a relative accuracy at any scale.
    log_eps = brentq(lambda x: _analytic_delta(sigma, math.exp(x)) - delta, math.log(lo),
                     math.log(hi), xtol=1e-14, rtol=1e-15, maxiter=500)
    return math.exp(log_eps)


def budget_name(noise: str) -> str:
    """The parameter that sets the budget of a noise family: ``epsilon`` or ``rho`` (zcdp)."""
    return "rho" if noise == "zcdp" else "epsilon"


def budget_for_sigma(privacy: Privacy, sigma: float) -> float:
    """The smallest budget at which ``privacy``'s noise is at most ``sigma`` per unit
    sensitivity: eps for laplace and gaussian (at ``privacy.delta`` and its calibration),
    rho for zcdp (see :func:`budget_name`). The inverse of :meth:`Privacy.sigma`.

    Exact for laplace (eps = sqrt(2) / sigma), zcdp (rho = 1 / (2 sigma**2)) and the
    classical / li-miklau Gaussian calibrations; a root search (relative accuracy 1e-14) for
    the analytic Gaussian mechanism, whose noise stays bounded as eps -> 0 at fixed delta:
    then 0.0 is returned, meaning every eps > 0 suffices.

    Raises:
        SpecError: ``sigma`` not a positive finite number.
    """
    if not (sigma > 0 and math.isfinite(sigma)):
        raise SpecError(f"target: noise std must be a positive number, got {sigma!r}")
    if privacy.noise == "laplace":
        return math.sqrt(2.0) / sigma
    if privacy.noise == "zcdp":
        return 1.0 / (2.0 * sigma * sigma)
    if privacy.calibration == "classical":
        return math.sqrt(2.0 * math.log(1.25 / privacy.delta)) / sigma
    if privacy.calibration == "li-miklau":
        return math.sqrt(2.0 * math.log(2.0 / privacy.delta)) / sigma
    return _analytic_epsilon(sigma, privacy.delta)


def budget_for_rmse(privacy: Privacy, target: float, unit_rmse: float) -> float:
    """The smallest budget (eps, or rho for zcdp) at which an error of ``unit_rmse`` per unit
    noise std (a plan's or bound's RMSE at sigma = 1) drops to at most ``target``.

    Error is proportional to sigma, so this is :func:`budget_for_sigma` at
    ``target / unit_rmse``; 0.0 when every budget reaches the target.

    Raises:
        SpecError: ``target`` not a positive finite number, or unreachable (the error is
            infinite at every budget).
    """
    if not (target > 0 and math.isfinite(target)):
        raise SpecError(f"target: the RMSE must be a positive number, got {target!r}")
    if math.isinf(unit_rmse):
        raise SpecError("target: unreachable, the error is infinite at every budget (the "
                        "strategy does not support the workload)")
    if unit_rmse <= 0:
        return 0.0
    return budget_for_sigma(privacy, target / unit_rmse)


#: The workbench's one default delta (README, CLI, explorer). Only the adaptive page departs from
#: it, with AIM's published setting (see ``AIM_DELTA`` in :mod:`explorer.pages.adaptive`).
DEFAULT_DELTA = 1e-6


class Privacy(param.Parameterized):
    """A privacy level: the noise family and its parameters.

    Only the parameters of the chosen ``noise`` are used: ``epsilon`` for ``laplace``,
    ``epsilon`` and ``delta`` for ``gaussian``, ``rho`` for ``zcdp``.
    """

    noise = param.Selector(default="gaussian", objects=list(NOISE_TYPES),
                           doc="Noise family: laplace (eps-DP), gaussian ((eps, delta)-DP), "
                               "zcdp (rho-zCDP).")
    epsilon = param.Number(default=1.0, bounds=(0, None), inclusive_bounds=(False, True),
                           softbounds=(0.01, 10.0), doc="Privacy loss eps (> 0).")
    delta = param.Number(default=DEFAULT_DELTA, bounds=(0, 1), inclusive_bounds=(False, False),
                         softbounds=(1e-12, 1e-2), doc="Failure probability delta in (0, 1).")
    rho = param.Number(default=0.5, bounds=(0, None), inclusive_bounds=(False, True),
                       softbounds=(0.001, 10.0), doc="zCDP parameter rho (> 0).")
    calibration = param.Selector(default="analytic", objects=list(GAUSSIAN_CALIBRATIONS),
                                 doc="How (eps, delta) sets the Gaussian sigma: analytic "
                                     "(Balle-Wang), classical sqrt(2 ln(1.25/d))/eps, or "
                                     "li-miklau sqrt(2 ln(2/d))/eps.")

    @property
    def norm(self) -> int:
        """The sensitivity norm this noise is calibrated to: 1 (Laplace) or 2."""
        return 1 if self.noise == "laplace" else 2

    def sigma(self) -> float:
        """Noise standard deviation per unit of sensitivity (in the matching norm)."""
        if self.noise == "laplace":
            return math.sqrt(2.0) / self.epsilon
        if self.noise == "zcdp":
            return 1.0 / math.sqrt(2.0 * self.rho)
        if self.calibration == "classical":
            return classical_gaussian_sigma(self.epsilon, self.delta)
        if self.calibration == "li-miklau":
            return li_miklau_gaussian_sigma(self.epsilon, self.delta)
        return analytic_gaussian_sigma(self.epsilon, self.delta)

    def unit_variance(self) -> float:
        """Per-entry noise variance for a strategy of sensitivity 1."""
        return self.sigma() ** 2

    def sample(self, size: int | tuple[int, ...], sensitivity: float,
               rng: np.random.Generator) -> np.ndarray:
        """Draw i.i.d. noise for a measurement of the given sensitivity."""
        if self.noise == "laplace":
            return rng.laplace(0.0, sensitivity / self.epsilon, size=size)
        return rng.normal(0.0, sensitivity * self.sigma(), size=size)

    def zcdp_rho(self, delta: float | None = None) -> float:
        """The zCDP rho this level spends or is equivalent to.

        ``zcdp``: rho itself; ``gaussian``: the largest rho whose zCDP guarantee implies this
        (eps, delta) (Canonne-Kamath-Steinke); ``laplace``: eps**2 / 2 (pure eps-DP implies
        eps**2/2-zCDP).
        """
        if self.noise == "zcdp":
            return float(self.rho)
        if self.noise == "laplace":
            return self.epsilon**2 / 2.0
        return cdp_rho(self.epsilon, self.delta if delta is None else delta)

    def epsilon_at(self, delta: float) -> float:
        """The eps of an (eps, delta) guarantee this level implies at the given delta."""
        if self.noise == "laplace":
            return float(self.epsilon)
        if self.noise == "gaussian" and math.isclose(delta, self.delta):
            return float(self.epsilon)
        return cdp_eps(self.zcdp_rho(), delta)

    def key(self) -> tuple:
        """A hashable value identifying this level (for caches)."""
        if self.noise == "laplace":
            return ("laplace", float(self.epsilon))
        if self.noise == "zcdp":
            return ("zcdp", float(self.rho))
        return ("gaussian", float(self.epsilon), float(self.delta), self.calibration)

    def with_(self, **changes: Any) -> Privacy:
        """A copy with some parameters changed."""
        values = {k: getattr(self, k) for k in ("noise", "epsilon", "delta", "rho",
                                                 "calibration")}
        values.update(changes)
        return Privacy(**values)

    def describe(self) -> str:
        """A short human-readable description, e.g. ``gaussian eps=1 delta=1e-06``."""
        if self.noise == "laplace":
            return f"laplace eps={self.epsilon:g}"
        if self.noise == "zcdp":
            return f"zcdp rho={self.rho:g}"
        cal = "" if self.calibration == "analytic" else f" ({self.calibration})"
        return f"gaussian eps={self.epsilon:g} delta={self.delta:g}{cal}"

    def _repr_html_(self) -> str:
        """The privacy level in a notebook, with its noise scale and its conversions."""
        rows = [("noise std per unit sensitivity", html.number(self.sigma()),
                 f"L{self.norm} sensitivity")]
        rows.append(("zCDP rho", html.number(self.zcdp_rho()),
                     "this level's own rho" if self.noise == "zcdp" else
                     "eps**2 / 2: pure eps-DP implies it" if self.noise == "laplace" else
                     "the largest rho implying this (eps, delta) (Canonne-Kamath-Steinke)"))
        for delta in (1e-6, 1e-9):
            rows.append((f"eps at delta = {delta:g}", html.number(self.epsilon_at(delta)),
                         "pure eps-DP: every delta" if self.noise == "laplace"
                         else "implied (eps, delta)-DP guarantee"))
        return html.titled(f"Privacy: {self.describe()}",
                           html.table(rows, header=("quantity", "value", "meaning")))

    def to_spec(self) -> dict[str, Any]:
        """The ``privacy:`` block of a scenario spec."""
        if self.noise == "laplace":
            return {"noise": "laplace", "epsilon": float(self.epsilon)}
        if self.noise == "zcdp":
            return {"noise": "zcdp", "rho": float(self.rho)}
        spec: dict[str, Any] = {"noise": "gaussian", "epsilon": float(self.epsilon),
                                "delta": float(self.delta)}
        if self.calibration != "analytic":
            spec["calibration"] = self.calibration
        return spec

    @classmethod
    def from_spec(cls, spec: Any, where: str = "privacy") -> Privacy:
        """Parse a ``privacy:`` block; errors name the field and the allowed values."""
        if not isinstance(spec, dict):
            raise SpecError(f"{where}: expected a mapping with 'noise', got {spec!r}")
        noise = spec.get("noise", "gaussian")
        if noise not in NOISE_TYPES:
            hint = suggest(str(noise), NOISE_TYPES)
            raise SpecError(f"{where}.noise: unknown noise {noise!r}{hint}; "
                            f"allowed: {', '.join(NOISE_TYPES)}")
        allowed = {"laplace": ("noise", "epsilon"),
                   "gaussian": ("noise", "epsilon", "delta", "calibration"),
                   "zcdp": ("noise", "rho")}[noise]
        for key in spec:
            if key not in allowed:
                raise SpecError(f"{where}.{key}: not a parameter of {noise} noise"
                                f"{suggest(str(key), allowed)}; allowed: {', '.join(allowed)}")
        values: dict[str, Any] = {"noise": noise}
        for key in allowed[1:]:
            if key not in spec:
                if key in ("epsilon", "rho"):
                    raise SpecError(f"{where}.{key}: missing (required for {noise} noise)")
                continue
            val = spec[key]
            if key == "calibration":
                if val not in GAUSSIAN_CALIBRATIONS:
                    raise SpecError(f"{where}.calibration: unknown {val!r}; allowed: "
                                    f"{', '.join(GAUSSIAN_CALIBRATIONS)}")
            else:
                if isinstance(val, bool) or not isinstance(val, int | float):
                    raise SpecError(f"{where}.{key}: expected a number, got {val!r}")
                val = float(val)
                if key == "delta" and not 0 < val < 1:
                    raise SpecError(f"{where}.delta: must lie strictly between 0 and 1, "
                                    f"got {val!r}")
                if key != "delta" and not (val > 0 and math.isfinite(val)):
                    raise SpecError(f"{where}.{key}: must be a positive number, got {val!r}")
            values[key] = val
        return cls(**values)
