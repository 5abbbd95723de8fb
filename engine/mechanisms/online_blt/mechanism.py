"""``online-blt``: a buffered linear Toeplitz factorization for streams of any length.

The strategy C is the BLT fitted to the horizon (:mod:`.fit`, Dvijotham et al. 2024); the
release is ``W C^-1 y``, a recurrence with ``buffers`` numbers of state plus the running
total. Nothing n x n is ever formed: the fit evaluates the error in closed form and the
release one recurrence per buffer and a running sum, so a million steps plan and release
in seconds.
"""

from __future__ import annotations

import math

import numpy as np
import param
from scipy.signal import oaconvolve

from engine.analysis.continual import prefix_horizon, stream_cost
from engine.analysis.cost_model import Cost
from engine.linalg.causal import (
    BufferedToeplitz,
    LowerToeplitz,
    prefix_step_variances,
    series_inverse,
)
from engine.linalg.matrix import Matrix
from engine.mechanisms.base import Mechanism, Plan, register, registered_name
from engine.mechanisms.online_blt.fit import ERRORS, BltFit, fit_blt
from engine.mechanisms.views import Fact, SeriesView, TableView, View, facts
from engine.privacy import Privacy
from engine.progress import Progress
from engine.workloads.workload import Workload

#: Largest number of strategy coefficients a plan shows as a series.
SHOWN_COEFFICIENTS = 256


@register
class OnlineBltMechanism(Mechanism):
    """Continual counting with a buffered linear Toeplitz factorization (Dvijotham et al.)."""

    name = registered_name("online-blt")
    title = "Online buffered Toeplitz"
    family = "online"
    description = ("publishes the running total every step keeping only a few numbers of "
                   "noise state, tuned to the horizon")
    noises = ("gaussian", "zcdp")
    cost_model = "domain"
    buffers = param.Integer(default=5, bounds=(1, 12), doc=(
        "Numbers of noise state kept per step (decay rates of the strategy)."))
    max_iterations = param.Integer(default=2000, bounds=(1, None), doc=(
        "Most iterations of each stage of the parameter fit (closed-form error, O(buffers^3) "
        "per evaluation whatever the horizon)."))
    error = param.Selector(default="mean", objects=list(ERRORS), doc=(
        "Error the fit minimises: mean (total over the horizon) or max (the worst step's, "
        "the last one; Dvijotham et al.'s choice)."))

    def check(self, workload: Workload, privacy: Privacy) -> None:
        prefix_horizon(workload)
        super().check(workload, privacy)

    def estimate(self, workload: Workload, privacy: Privacy) -> Cost:
        """O(steps) memory and work (:func:`engine.analysis.continual.stream_cost`)."""
        return stream_cost(workload, 12, 24.0 * self.buffers)

    def _plan(self, workload: Workload, privacy: Privacy, progress: Progress | None) -> Plan:
        n, weight = prefix_horizon(workload)
        fit = fit_blt(n, self.buffers, self.max_iterations, progress, self.error)
        strategy = fit.strategy()
        c = strategy.coefficients()
        inverse, r = exact_inverse(strategy, c)
        unit = weight**2 * prefix_step_variances(r)

        def reconstruct(plan: Plan, y: np.ndarray) -> np.ndarray:
            return weight * np.cumsum(inverse.matvec(y), axis=0)

        sensitivity = {1: float(np.abs(c).sum()), 2: math.sqrt(float((c * c).sum()))}
        return Plan(mechanism=self.name, workload=workload, privacy=privacy,
                    strategy=strategy, trace=float(unit.sum()), sensitivity=sensitivity,
                    shown=_views(fit, c, unit), reconstructor=reconstruct,
                    query_variances=lambda plan: unit)


def exact_inverse(strategy: BufferedToeplitz, c: np.ndarray) -> tuple[Matrix, np.ndarray]:
    """``C^-1`` and its first column: the BLT recurrence of
    :func:`engine.linalg.causal.blt_inverse` when its first column inverts c to 1e-9 (checked
    by one FFT product), else the FFT power-series inverse (nearly repeated modes make the
    recurrence's weights imprecise)."""
    recurrence = strategy.pinv()
    r = recurrence.coefficients()
    product = oaconvolve(c, r)[: c.size]
    product[0] -= 1.0
    if np.all(np.isfinite(product)) and np.abs(product).max() <= 1e-9:
        return recurrence, r
    r = series_inverse(c)
    return LowerToeplitz(r), r


def _views(fit: BltFit, c: np.ndarray, unit: np.ndarray) -> tuple[View, ...]:
    buffers = int(fit.theta.size)
    return (
        facts("online", "Strategy", "A causal factorization with a few numbers of state: "
              "every step's total is published when the step ends.", [
                  Fact("kind", "strategy kind", "buffered linear Toeplitz factorization"),
                  Fact("meaning", "what it measures", "each step's count plus noise that "
                       "decays geometrically at a few rates"),
                  Fact("steps", "steps published", fit.n),
                  Fact("fitted_for", "error the fit minimises",
                       "mean over the horizon" if fit.error == "mean" else "worst step"),
                  Fact("buffers", "buffers", buffers),
                  Fact("memory", "numbers kept per step (buffers and the running total)",
                       buffers + 1, "numbers"),
                  Fact("fit_evaluations", "error evaluations of the fit", fit.evaluations),
                  Fact("max_to_rmse", "worst step / RMSE over the horizon",
                       math.sqrt(float(unit.max()) / float(unit.mean())))]),
        TableView.of([{"buffer": j + 1, "decay rate": float(t), "weight": float(w)}
                      for j, (t, w) in enumerate(zip(fit.theta, fit.omega, strict=True))],
                     key="parameters", title="Buffers", caption=(
                         "Each buffer's decay rate per step and the weight of its noise.")),
        SeriesView(key="strategy_column", title="Noise weights by age",
                   caption="Weight with which a step's count and noise enter the strategy "
                   "answer k steps later (the first column of C).",
                   values=c[:SHOWN_COEFFICIENTS], x_label="steps later"))
