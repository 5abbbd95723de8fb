"""``online-sqrt``: the prefix matrix as ``L = C C`` with C lower-triangular Toeplitz.

C has first column ``c_k = binom(2k, k) / 4**k`` (the series of ``(1 - x)**-1/2``), so each
step's noise is mixed into later steps with weights decaying like ``1 / sqrt(pi k)``
(Fichtenberger, Henzinger & Upadhyay, ICML 2023, Theorem 1). The strategy is C and the
reconstruction is the other factor C, applied by FFT: a million steps plan and release in
seconds. The error is in closed form: step t has unit variance ``sum_{k<t} c_k**2`` and the
L2 sensitivity is the first column's norm, ``sqrt(sum_{k<n} c_k**2)``.
"""

from __future__ import annotations

import math

import numpy as np

from engine.analysis.continual import prefix_horizon, stream_cost
from engine.analysis.cost_model import Cost
from engine.linalg.causal import LowerToeplitz, prefix_step_variances, sqrt_coefficients
from engine.mechanisms.base import Mechanism, Plan, register, registered_name
from engine.mechanisms.views import Fact, SeriesView, View, facts
from engine.privacy import Privacy
from engine.progress import Progress
from engine.workloads.workload import Workload

#: Largest number of strategy coefficients a plan shows as a series.
SHOWN_COEFFICIENTS = 256


def sqrt_inverse_coefficients(n: int) -> np.ndarray:
    """The first column of ``C^-1``: the series of ``(1 - x)**1/2``, ``r_0 = 1``,
    ``r_k = r_{k-1} (2k - 3) / (2k)``."""
    k = np.arange(1, n, dtype=float)
    return np.concatenate(([1.0], np.cumprod((2.0 * k - 3.0) / (2.0 * k))))[:n]


def sqrt_closed_form_tse(n: int) -> float:
    """Unit total squared error of the square-root factorization on n steps:
    ``(sum_{k<n} c_k**2) * sum_{t=1..n} sum_{k<t} c_k**2`` (sensitivity squared times
    ``||C||_F**2``), per unit noise per unit L2 sensitivity."""
    c2 = sqrt_coefficients(n) ** 2
    return float(c2.sum() * ((n - np.arange(n)) * c2).sum())


@register
class OnlineSqrtMechanism(Mechanism):
    """Continual counting with the square-root factorization (Fichtenberger et al. 2023)."""

    name = registered_name("online-sqrt")
    title = "Online square root"
    family = "online"
    description = ("publishes the running total every step; each step's noise is shared with "
                   "later steps by the square root of the prefix matrix")
    noises = ("gaussian", "zcdp")
    cost_model = "domain"

    def check(self, workload: Workload, privacy: Privacy) -> None:
        prefix_horizon(workload)
        super().check(workload, privacy)

    def estimate(self, workload: Workload, privacy: Privacy) -> Cost:
        """O(steps) memory and work (:func:`engine.analysis.continual.stream_cost`)."""
        return stream_cost(workload, 16, 40.0 * math.log2(max(workload.domain.size, 2)))

    def _plan(self, workload: Workload, privacy: Privacy, progress: Progress | None) -> Plan:
        n, weight = prefix_horizon(workload)
        c = sqrt_coefficients(n)
        inverse = sqrt_inverse_coefficients(n)
        strategy = LowerToeplitz(c)
        unit = weight**2 * prefix_step_variances(inverse)

        def reconstruct(plan: Plan, y: np.ndarray) -> np.ndarray:
            return weight * np.cumsum(LowerToeplitz(inverse).matvec(y), axis=0)

        sensitivity = {1: float(c.sum()), 2: math.sqrt(float((c * c).sum()))}
        return Plan(mechanism=self.name, workload=workload, privacy=privacy,
                    strategy=strategy, trace=float(unit.sum()), sensitivity=sensitivity,
                    shown=_views(c, unit, sensitivity[2]), reconstructor=reconstruct,
                    query_variances=lambda plan: unit)


def _views(c: np.ndarray, unit: np.ndarray, l2: float) -> tuple[View, ...]:
    n = c.size
    return (
        facts("online", "Strategy", "A causal factorization: every step's total is published "
              "when the step ends, from the noise drawn so far.", [
                  Fact("kind", "strategy kind", "square-root factorization"),
                  Fact("meaning", "what it measures", "each step's count plus noise shared "
                       "with later steps by weights binom(2k, k) / 4^k"),
                  Fact("steps", "steps published", n),
                  Fact("memory", "numbers kept per step", n, "numbers"),
                  Fact("sensitivity2", "L2 sensitivity", l2),
                  Fact("max_to_rmse", "worst step / RMSE over the horizon",
                       math.sqrt(float(unit.max()) / float(unit.mean())))]),
        SeriesView(key="strategy_column", title="Noise weights by age",
                   caption="Weight with which a step's count and noise enter the strategy "
                   "answer k steps later (the first column of C).",
                   values=c[:SHOWN_COEFFICIENTS], x_label="steps later"))
