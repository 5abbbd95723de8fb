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

Moving the privacy level changes none of this but one factor: every query's error is ``c^T z``
with noise of standard deviation ``sigma(privacy) ||A||`` (Gaussian ``sigma**2 ~ 1/rho``,
Laplace ``~ 1/eps**2``), so standard deviations, half-widths and single-query quantiles are
proportional to it and the order of the queries by error never changes.
:class:`PerQueryErrors` computes them once per plan and re-scales them.
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np
from scipy import integrate, optimize, stats

from engine.linalg.matrix import Matrix
from engine.privacy import Privacy
from engine.workloads.labels import find_query, readable_labels
from engine.workloads.workload import Workload

#: How each half-width was obtained (the ``method`` of a :class:`QueryError`).
METHODS = {
    "gaussian": "exact: Gaussian quantile of the plan's per-query variance",
    "laplace": "exact: quantile of the single Laplace term",
    "laplace-sum": "exact: quantile of the sum of Laplace terms (characteristic function)",
    "chernoff": "bound: Chernoff bound for any sum of Laplace terms of this variance "
                "(the true 95 % half-width is at most this)",
}


class Plan(Protocol):
    """What these functions read of a plan (:class:`engine.mechanisms.base.Plan` has it all;
    typed structurally so that analysis sits below the mechanisms and ``Plan`` can use it)."""

    privacy: Privacy
    workload: Workload
    strategy: Matrix | None
    sensitivity: Mapping[int, float]

    def variances(self, privacy: Privacy | None = None) -> np.ndarray: ...

    def unit_variances(self) -> np.ndarray: ...

    def noise_std(self) -> float: ...

    def rmse(self, privacy: Privacy | None = None) -> float: ...

    def with_privacy(self, privacy: Privacy) -> Plan: ...

    def noise_free(self, key: Hashable, compute: Callable[[], Any]) -> Any: ...


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


@functools.lru_cache(maxsize=8)
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


def typical_half_width(plan: Plan, level: float = 0.95) -> tuple[float, str]:
    """The half-width at ``level`` of a query whose error has the plan's RMSE as its standard
    deviation, in people, and how it was obtained (a key of :data:`METHODS`).

    Gaussian noise: ``z RMSE`` exactly (1.96 RMSE at 95 %). Laplace noise: the exact quantile
    of the query whose standard deviation is nearest the RMSE (so with that query's mix of
    Laplace terms), scaled to the RMSE; the Chernoff bound when the plan has no explicit
    least-squares strategy to read the mix from. The Laplace ratio to the RMSE is the same at
    every privacy level, so it is computed once per plan (:meth:`Plan.noise_free`) and kept
    with it.
    """
    rmse = plan.rmse()
    if plan.privacy.noise != "laplace":
        return float(gaussian_half_width(rmse, level)), "gaussian"
    ratio, method = plan.noise_free(("laplace half-width / RMSE", level),
                                    lambda: _laplace_typical_ratio(plan, level))
    return ratio * rmse, method


def _laplace_typical_ratio(plan: Plan, level: float) -> tuple[float, str]:
    """:func:`typical_half_width` over the RMSE for a Laplace plan, and its method."""
    rmse = plan.rmse()
    try:
        std = np.sqrt(np.asarray(plan.variances(), dtype=float))
    except (ValueError, MemoryError, NotImplementedError):
        return float(chernoff_half_width(1.0, level)), "chernoff"
    index = int(np.argmin(np.abs(std - rmse)))
    nearest = _query_error(plan, index, "", level)
    if nearest.std <= 0:
        return 0.0, nearest.method
    return nearest.half_width / nearest.std, nearest.method


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
    index = _row(plan.workload, query)
    return _query_error(plan, index, readable_labels(plan.workload)[index], level)


def _row(workload: Workload, query: int | str) -> int:
    index = find_query(workload, query) if isinstance(query, str) else int(query)
    if not 0 <= index < workload.num_queries:
        raise IndexError(f"query: row {index} outside 0..{workload.num_queries - 1}")
    return index


def _query_error(plan: Plan, index: int, label: str, level: float) -> QueryError:
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


class PerQueryErrors:
    """Every query's error under one plan, at any privacy level of the plan's noise family,
    from what is computed once per plan (see the module note).

    The unit standard deviations (``||A|| sqrt(w^T (A^T A)^+ w)``, the error at noise of
    standard deviation ``||A||`` per strategy answer), the worst-first order and each asked
    query's quantile are computed on first use and kept; a privacy level then costs one
    multiplication by :meth:`scale`. Safe to share between threads.

    Args:
        plan: the plan (at any privacy level of its noise family).
        workload: the workload whose readable labels name the queries (default: the plan's;
            pass an equal workload whose labels are already built to reuse them).
        level: the confidence level of the half-widths, in (0, 1).
    """

    def __init__(self, plan: Plan, workload: Workload | None = None, level: float = 0.95
                 ) -> None:
        self.plan = plan
        self.workload = plan.workload if workload is None else workload
        self.level = level
        self._lock = threading.Lock()
        self._unit_std: np.ndarray | None = None
        self._order: np.ndarray | None = None
        self._median: float | None = None
        self._worst: int | None = None
        self._labels: list[str] | None = None
        self._queries: dict[int, tuple[float, QueryError]] = {}

    def scale(self, privacy: Privacy) -> float:
        """``sigma(privacy) ||A||``: the factor from unit to ``privacy`` (counts per unit).

        Raises:
            ValueError: when ``privacy`` calibrates another noise family than the plan's
                (another sensitivity norm, another error distribution).
        """
        own = self.plan.privacy
        if privacy.norm != own.norm or (privacy.noise == "laplace") != (own.noise == "laplace"):
            raise ValueError(f"privacy: {privacy.noise} noise, but the plan is for {own.noise}")
        return privacy.sigma() * self.plan.sensitivity[privacy.norm]

    def unit_std(self) -> np.ndarray:
        """Every query's error standard deviation at unit scale (read-only)."""
        with self._lock:
            if self._unit_std is None:
                unit = np.sqrt(np.maximum(np.asarray(self.plan.unit_variances(), dtype=float),
                                          0.0))
                unit.flags.writeable = False
                self._unit_std = unit
            return self._unit_std

    def std(self, privacy: Privacy) -> np.ndarray:
        """Every query's error standard deviation at ``privacy`` (counts)."""
        return self.scale(privacy) * self.unit_std()

    def method(self, privacy: Privacy) -> str:
        """How :meth:`half_widths` are obtained at ``privacy`` (a key of :data:`METHODS`)."""
        return "chernoff" if privacy.noise == "laplace" else "gaussian"

    def half_widths(self, privacy: Privacy) -> np.ndarray:
        """Every query's half-width at :attr:`level` (counts), as :func:`error_half_widths`."""
        if self.method(privacy) == "chernoff":
            factor = _chernoff_factor(self.level) / math.sqrt(2.0)
        else:
            factor = float(stats.norm.ppf(0.5 + self.level / 2))
        return (factor * self.scale(privacy)) * self.unit_std()

    def worst_first(self) -> np.ndarray:
        """Query rows by decreasing error (ties in row order), the same at every level."""
        unit = self.unit_std()
        with self._lock:
            if self._order is None:
                order = np.argsort(-unit, kind="stable")
                order.flags.writeable = False
                self._order = order
            return self._order

    def worst(self) -> int:
        """The row of the query with the largest error (the first of equals), at every level."""
        with self._lock:
            if self._worst is None:
                self._worst = int(np.argmax(self.plan.unit_variances()))
            return self._worst

    def median_std(self, privacy: Privacy) -> float:
        """The median of the queries' error standard deviations at ``privacy`` (counts)."""
        unit = self.unit_std()
        with self._lock:
            if self._median is None:
                self._median = float(np.median(unit))
            return self.scale(privacy) * self._median

    def labels(self, rows: np.ndarray | list[int]) -> list[str]:
        """The readable labels of these query rows."""
        if self._labels is None:
            self._labels = readable_labels(self.workload)  # a copy, kept
        return [self._labels[int(i)] for i in rows]

    def query(self, query: int | str, privacy: Privacy) -> QueryError:
        """One query's error at ``privacy``, as :func:`query_error` (whose quantile is computed
        once per query and re-scaled).

        Raises:
            SpecError: for a label no query has.
            IndexError: for a row outside the workload.
        """
        index = _row(self.workload, query)
        factor = self.scale(privacy)
        with self._lock:
            known = self._queries.get(index)
        if known is None:
            label = readable_labels(self.workload)[index]
            known = (factor, _query_error(self.plan.with_privacy(privacy), index, label,
                                          self.level))
            with self._lock:
                self._queries[index] = known
        base, error = known
        ratio = factor / base
        return replace(error, std=error.std * ratio, half_width=error.half_width * ratio)


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
