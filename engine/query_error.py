"""Errors in people: how far one query's released answer is from the truth, at 95 %.

For a query q the plan's error is a linear combination ``c^T z`` of the noise ``z`` added to
the strategy answers (``c = (A^+)^T w_q`` for least squares). What is computed:

* Gaussian noise (``gaussian``, ``zcdp``): the error is Gaussian with the plan's per-query
  variance v, and ``P(|error| <= z sqrt(v)) = level`` exactly (``z = 1.96`` at 95 %).
* Laplace noise, one query (:func:`query_error`): the coefficients c are read from the
  strategy's pseudo-inverse (checked against the plan's variance). A single Laplace term of
  scale b has ``P(|error| <= b ln(1 / (1 - level))) = level`` exactly; a sum of several is
  inverted exactly (up to quadrature, ~1e-8) from its characteristic function
  ``prod_j 1 / (1 + b**2 c_j**2 t**2)`` (Gil-Pelaez). Plans without an explicit
  least-squares strategy get the bound below.
* Laplace noise, every query at once (:func:`error_half_widths`), or no coefficients: a
  Chernoff bound. A sum of independent Laplace terms with variance v has a moment generating
  function at most that of one Laplace term with variance v (``-sum log(1 - x_j)`` is convex,
  so on ``sum x_j = s`` it is largest at a vertex), so
  ``P(|error| > t) <= 2 min_u exp(-u t / b) / (1 - u**2)`` with ``b = sqrt(v / 2)``; the
  half-width returned has at least ``level`` probability (about 3.1 sqrt(v) at 95 %, where
  one Laplace term needs 2.12 sqrt(v) and a Gaussian 1.96 sqrt(v)).

Half-widths are in the data's units: counts of records (people).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import integrate, optimize, stats

from engine.mechanisms.base import Plan
from engine.workloads.labels import find_query, readable_labels

#: How each half-width was obtained (the ``method`` of a :class:`QueryError`).
METHODS = {
    "gaussian": "exact: Gaussian quantile of the plan's per-query variance",
    "laplace": "exact: quantile of the single Laplace term",
    "laplace-sum": "exact: quantile of the sum of Laplace terms (characteristic function)",
    "chernoff": "bound: Chernoff bound for any sum of Laplace terms of this variance "
                "(the true 95 % half-width is at most this)",
}


@dataclass(frozen=True)
class QueryError:
    """One query's expected absolute error at a confidence level.

    Attributes:
        index: the query's row in the workload.
        label: its readable label ("age 30-34, sex female").
        std: standard deviation of its error (counts).
        half_width: the error is within +/- this many counts with probability ``level``
            (at least ``level`` for the ``chernoff`` bound).
        level: the confidence level (0.95).
        method: a key of :data:`METHODS`.
    """

    index: int
    label: str
    std: float
    half_width: float
    level: float
    method: str

    def sentence(self) -> str:
        """``age 30-34, sex female: +/- 14 people at 95%`` plus how it was computed."""
        return (f"{self.label}: +/- {self.half_width:,.1f} people at {self.level:.0%} "
                f"({METHODS[self.method]})")


def gaussian_half_width(std: np.ndarray | float, level: float = 0.95) -> np.ndarray:
    """``z std`` with ``P(|N(0, std**2)| <= z std) = level``."""
    return stats.norm.ppf(0.5 + level / 2) * np.asarray(std, dtype=float)


def laplace_half_width(scale: float, level: float = 0.95) -> float:
    """``b ln(1 / (1 - level))``: the exact two-sided quantile of one Laplace(b) term."""
    return scale * math.log(1.0 / (1.0 - level))


def _chernoff_factor(level: float) -> float:
    """tau with ``2 min_u exp(-u tau) / (1 - u**2) = 1 - level`` (half-width = tau b)."""

    def tail(tau: float) -> float:
        u = (math.sqrt(1.0 + tau * tau) - 1.0) / tau  # the minimising u
        return 2.0 * math.exp(-u * tau) / (1.0 - u * u) - (1.0 - level)

    return float(optimize.brentq(tail, 1e-6, 1e4, xtol=1e-12))


def chernoff_half_width(std: np.ndarray | float, level: float = 0.95) -> np.ndarray:
    """A half-width holding with probability >= ``level`` for any sum of independent Laplace
    terms with standard deviation ``std`` (see the module note)."""
    return _chernoff_factor(level) * np.asarray(std, dtype=float) / math.sqrt(2.0)


def laplace_sum_half_width(scales: np.ndarray, level: float = 0.95) -> float:
    """The exact ``level`` quantile of ``|sum_j L_j|`` for independent Laplace(scales_j).

    Gil-Pelaez: ``P(|S| <= x) = (2 / pi) int_0^inf phi(t) sin(t x) / t dt`` with the
    characteristic function ``phi(t) = prod_j 1 / (1 + scales_j**2 t**2)``.
    """
    b = np.abs(np.asarray(scales, dtype=float))
    b = b[b > 1e-12 * b.max()]
    if b.size == 1:
        return laplace_half_width(float(b[0]), level)
    b2 = b * b

    def phi(t: float) -> float:
        return float(np.exp(-np.log1p(b2 * t * t).sum()))

    def inside(x: float) -> float:
        cut = 1.0 / x
        head, _ = integrate.quad(lambda t: phi(t) * x * np.sinc(t * x / math.pi), 0.0, cut,
                                 limit=200, epsabs=1e-11)
        tail, _ = integrate.quad(lambda t: phi(t) / t, cut, math.inf, weight="sin", wvar=x,
                                 limlst=200, epsabs=1e-11)
        return 2.0 / math.pi * (head + tail) - level

    std = math.sqrt(2.0 * b2.sum())
    return float(optimize.brentq(inside, 0.5 * std, 4.0 * std, xtol=1e-9 * std))


def error_half_widths(plan: Plan, level: float = 0.95) -> tuple[np.ndarray, str]:
    """Every query's half-width at ``level`` (counts) and its method: exact Gaussian
    quantiles, or for Laplace noise the Chernoff bound (see the module note)."""
    std = np.sqrt(plan.variances())
    if plan.privacy.noise == "laplace":
        return chernoff_half_width(std, level), "chernoff"
    return gaussian_half_width(std, level), "gaussian"


def query_error(plan: Plan, query: int | str, level: float = 0.95) -> QueryError:
    """The expected absolute error of one query at ``level``, in counts.

    Args:
        plan: a plan at its privacy level.
        query: the query's row, or its readable label (e.g. ``"age 30-34, sex female"``;
            see :func:`engine.workloads.labels.readable_labels`).
        level: the confidence level in (0, 1).

    Raises:
        SpecError: for a label no query has.
        IndexError: for a row outside the workload.
    """
    workload = plan.workload
    index = find_query(workload, query) if isinstance(query, str) else int(query)
    if not 0 <= index < workload.num_queries:
        raise IndexError(f"query: row {index} outside 0..{workload.num_queries - 1}")
    label = readable_labels(workload)[index]
    variance = float(plan.variances()[index])
    std = math.sqrt(variance)
    if plan.privacy.noise != "laplace":
        return QueryError(index, label, std, float(gaussian_half_width(std, level)), level,
                          "gaussian")
    scales = _laplace_scales(plan, index, variance)
    if scales is None:
        return QueryError(index, label, std, float(chernoff_half_width(std, level)), level,
                          "chernoff")
    method = "laplace" if np.count_nonzero(scales > 1e-12 * scales.max()) == 1 else \
        "laplace-sum"
    return QueryError(index, label, std, laplace_sum_half_width(scales, level), level, method)


def _laplace_scales(plan: Plan, index: int, variance: float) -> np.ndarray | None:
    """Laplace scales ``b |c_j|`` of the terms of one query's error, when the strategy is an
    explicit least-squares one whose coefficients reproduce the plan's variance."""
    if plan.strategy is None or variance <= 0:
        return None
    try:
        unit = np.zeros(plan.workload.num_queries)
        unit[index] = 1.0
        row = plan.workload.matrix.rmatvec(unit)
        coefficients = plan.strategy.pinv().rmatvec(row)
    except (ValueError, MemoryError, NotImplementedError):
        return None
    scale = plan.noise_std() / math.sqrt(2.0)
    scales = scale * np.abs(np.asarray(coefficients, dtype=float))
    if not math.isclose(2.0 * float(scales @ scales), variance, rel_tol=1e-6):
        return None
    return scales
