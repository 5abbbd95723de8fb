"""``online-optimal``: the optimal lower-triangular factorization of the prefix matrix.

Plans by solving the convex programme of :mod:`.fixed_point` for the Gram ``X = C^T C``
(Denisov et al. 2022, single participation, total squared error), then takes C as the
lower-triangular factor of X (:func:`engine.linalg.causal.causal_factor`) and ``B = W C^-1``
(lower triangular too): step t is published from the first t noisy strategy answers. Dense
n x n algebra, one eigendecomposition per iteration: about a minute of CPU at n = 1,024 on
a shared machine (eight times that at 2,048), refused above ``max_steps``.
"""

from __future__ import annotations

import math

import numpy as np
import param
import scipy.linalg as sla

from engine.analysis.continual import prefix_horizon
from engine.errors import NotApplicable
from engine.linalg.causal import causal_factor, prefix_gram
from engine.linalg.matrix import Dense
from engine.mechanisms.base import Mechanism, Plan, register, registered_name
from engine.mechanisms.online_optimal.fixed_point import OptimalGram, optimal_gram
from engine.mechanisms.views import Fact, MatrixView, View, facts
from engine.privacy import Privacy
from engine.progress import Progress
from engine.workloads.workload import Workload

#: Largest strategy a plan shows as a matrix (steps).
SHOWN_STEPS = 64


@register
class OnlineOptimalMechanism(Mechanism):
    """Continual counting with the optimal causal factorization (Denisov et al. 2022)."""

    name = registered_name("online-optimal")
    title = "Online optimal factorization"
    family = "online"
    description = ("publishes the running total every step with the causal strategy of least "
                   "total squared error")
    noises = ("gaussian", "zcdp")
    cost_model = "dense"
    tolerance = param.Number(default=1e-6, bounds=(1e-12, 1.0), doc=(
        "Relative duality gap at which the optimisation stops (the plan states its gap)."))
    max_iterations = param.Integer(default=400, bounds=(1, None), doc=(
        "Most eigendecompositions (n x n each) the optimisation makes."))
    max_steps = param.Integer(default=2048, bounds=(1, None), doc=(
        "Longest horizon planned (dense n x n algebra); online-blt serves longer streams."))

    def check(self, workload: Workload, privacy: Privacy) -> None:
        n, _ = prefix_horizon(workload)
        super().check(workload, privacy)
        if n > self.max_steps:
            raise NotApplicable(f"not applicable: {n:,} steps exceed max_steps = "
                                f"{self.max_steps:,} (dense n x n optimisation); online-blt "
                                "serves long streams")

    def _plan(self, workload: Workload, privacy: Privacy, progress: Progress | None) -> Plan:
        n, weight = prefix_horizon(workload)
        solved = optimal_gram(prefix_gram(n), self.tolerance, self.max_iterations, progress)
        C = causal_factor(solved.gram)
        # B = W C^-1 row by row: C^T B^T = W^T (upper triangular), W the prefix matrix
        B = sla.solve_triangular(C.T, np.triu(np.ones((n, n))), lower=False).T
        unit = weight**2 * (B * B).sum(axis=1)
        strategy = Dense(C)

        def reconstruct(plan: Plan, y: np.ndarray) -> np.ndarray:
            return weight * np.cumsum(sla.solve_triangular(C, y, lower=True), axis=0)

        sensitivity = {1: strategy.sensitivity(1), 2: strategy.sensitivity(2)}
        return Plan(mechanism=self.name, workload=workload, privacy=privacy,
                    strategy=strategy, trace=float(unit.sum()), sensitivity=sensitivity,
                    shown=_views(C, unit, solved), reconstructor=reconstruct,
                    query_variances=lambda plan: unit)


def _views(C: np.ndarray, unit: np.ndarray, solved: OptimalGram) -> tuple[View, ...]:
    n = C.shape[0]
    shown: list[View] = [
        facts("online", "Strategy", "A causal factorization: every step's total is published "
              "when the step ends, from the noise drawn so far.", [
                  Fact("kind", "strategy kind", "optimal causal factorization"),
                  Fact("meaning", "what it measures", "each step's count mixed with earlier "
                       "steps by the lower-triangular factor of the optimal Gram"),
                  Fact("steps", "steps published", n),
                  Fact("memory", "numbers kept per step", n, "numbers"),
                  Fact("iterations", "optimiser iterations", solved.iterations),
                  Fact("duality_gap", "relative duality gap (certified)", solved.gap),
                  Fact("lower_bound", "optimal unit error, lower bound", solved.lower),
                  Fact("max_to_rmse", "worst step / RMSE over the horizon",
                       math.sqrt(float(unit.max()) / float(unit.mean())))])]
    if n <= SHOWN_STEPS:
        shown.append(MatrixView(key="strategy", title="Causal strategy C", caption=(
            "The lower-triangular strategy: row t mixes the counts of steps 1..t."),
            matrix=C))
    return tuple(shown)
