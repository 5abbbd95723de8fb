"""Continual release: which workloads the online mechanisms serve, and error over the horizon.

A statistic published every period (cases to date, claims to date) is the prefix-sum workload
over one ordered attribute taken as time: step t publishes the total of steps 1..t. The online
mechanisms (``online-tree``, ``online-sqrt``, ``online-optimal``, ``online-blt``) serve exactly
that workload; :func:`prefix_horizon` says so or refuses in one line, and
:class:`HorizonError` summarises a plan's per-step variances as the error per step, its root
mean square over the horizon and its worst step (all in counts: people, claims, ...).
:func:`optimum_bracket` places an online mechanism's error against the best possible: the
SVD bound (exact, from the prefix matrix's closed-form singular values at any horizon up to
``SPECTRUM_LIMIT`` steps) is below every matrix mechanism's error, online or offline, so the
optimum lies between the bound and the mechanism.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from engine.analysis.cost_model import FLOAT, OVERHEAD, Cost
from engine.analysis.svd_bound import svd_bound
from engine.errors import NotApplicable
from engine.workloads.blocks import PrefixBlock
from engine.workloads.workload import Workload

#: The one-line refusal of every online mechanism.
NOT_PREFIX = ("not applicable: online mechanisms answer prefix sums over one ordered "
              "attribute")


def prefix_horizon(workload: Workload) -> tuple[int, float]:
    """``(steps, weight)`` when ``workload`` is ``weight`` times the prefix sums over the
    domain's one ordered attribute; NotApplicable (:data:`NOT_PREFIX`) otherwise."""
    domain = workload.domain
    terms = workload.terms
    if len(domain) != 1 or len(terms) != 1 or not next(iter(domain)).numeric:
        raise NotApplicable(NOT_PREFIX)
    term = terms[0]
    if term.factors is None or len(term.factors) != 1 or not isinstance(term.factors[0],
                                                                         PrefixBlock):
        raise NotApplicable(NOT_PREFIX)
    if term.weight <= 0:
        raise NotApplicable("not applicable: the prefix sums need a positive weight")
    return domain.shape[0], float(term.weight)


def stream_cost(workload: Workload, arrays: float, operations_per_step: float) -> Cost:
    """Memory and work of an online mechanism that holds ``arrays`` vectors as long as the
    stream (data, answers, coefficients, work arrays) and spends ``operations_per_step``
    floating-point operations per step, when planning and when running."""
    steps = float(workload.domain.size)
    memory = arrays * FLOAT * steps + OVERHEAD
    work = operations_per_step * steps
    what = f"{arrays:g} vectors over {steps:,.0f} steps"
    return Cost(memory, memory, work, work, what, what)


@dataclass(frozen=True)
class HorizonError:
    """The error of a continual release, step by step and over the horizon.

    Attributes:
        per_step: standard deviation of the published total at each step (counts).
        rmse: root mean squared error over all steps (counts).
        max_error: the largest per-step standard deviation (counts).
        final_error: the standard deviation at the last step (counts).
    """

    per_step: np.ndarray
    rmse: float
    max_error: float
    final_error: float

    @classmethod
    def of(cls, variances: np.ndarray) -> HorizonError:
        """From the per-step variances (squared counts), e.g. ``plan.variances()``."""
        v = np.asarray(variances, dtype=float)
        if v.ndim != 1 or v.size == 0:
            raise ValueError("HorizonError: needs a non-empty 1-D array of variances")
        std = np.sqrt(np.maximum(v, 0.0))
        std.setflags(write=False)
        return cls(std, math.sqrt(float(v.mean())), float(std.max()), float(std[-1]))


@dataclass(frozen=True)
class OptimumBracket:
    """Where the optimal matrix mechanism's error lies, given one mechanism's.

    Attributes:
        steps: the horizon n.
        mechanism: the mechanism's unit total squared error (``sensitivity**2 ||W C^-1||_F**2``,
            squared counts at unit noise).
        bound: the exact SVD bound of the same workload (same units), which no strategy beats.
    """

    steps: int
    mechanism: float
    bound: float

    @property
    def ratio(self) -> float:
        """``mechanism / bound`` (at least 1): the mechanism is within this factor of the
        optimum's total squared error."""
        return self.mechanism / self.bound

    @property
    def rmse_ratio(self) -> float:
        """``sqrt(ratio)``: the same bracket on the RMSE."""
        return math.sqrt(self.ratio)


def optimum_bracket(workload: Workload, unit_tse: float) -> OptimumBracket:
    """The bracket ``[bound, unit_tse]`` of the optimum on a prefix workload.

    Raises:
        NotApplicable: when the workload is not prefix sums (:data:`NOT_PREFIX`), or its SVD
            bound is not exact (too long a horizon: the one-line reason).
        ValueError: when ``unit_tse`` is below the bound (it cannot be a mechanism's error).
    """
    steps, _ = prefix_horizon(workload)
    bound = svd_bound(workload)
    if bound.kind != "exact":
        raise NotApplicable(f"not applicable: no exact SVD bound ({bound.reason})")
    if not unit_tse >= bound.value * (1.0 - 1e-12):
        raise ValueError(f"unit_tse: {unit_tse:.6g} is below the SVD bound {bound.value:.6g}, "
                         "which no matrix mechanism beats")
    return OptimumBracket(steps, float(unit_tse), float(bound.value))
