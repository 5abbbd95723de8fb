"""``online-tree``: the binary tree mechanism for continual counting, released causally.

Every complete dyadic interval of the stream is measured once (each step lies in at most
``floor(log2 n) + 1`` of them: the L1 and squared L2 sensitivity). Step t publishes the sum of
Honaker's efficient estimates of the complete subtrees covering steps 1..t, which uses only
nodes finished by step t (:mod:`engine.mechanisms.online_tree.tree`). The plan's ``trace`` is
the total unit variance of that causal estimate; it is at least the least-squares trace of the
same tree, which may look at nodes finished later.
"""

from __future__ import annotations

import math

import numpy as np

from engine.analysis.continual import prefix_horizon, stream_cost
from engine.analysis.cost_model import Cost
from engine.linalg.matrix import Sparse
from engine.mechanisms.base import Mechanism, Plan, register, registered_name
from engine.mechanisms.online_tree.tree import DyadicTree
from engine.mechanisms.views import Fact, SeriesView, View, facts
from engine.privacy import Privacy
from engine.progress import Progress
from engine.workloads.workload import Workload


@register
class OnlineTreeMechanism(Mechanism):
    """Continual counting with the binary tree and the causal efficient estimate."""

    name = registered_name("online-tree")
    title = "Online binary tree"
    family = "online"
    description = ("publishes the running total every step from noisy totals of the "
                   "completed blocks of 1, 2, 4, ... steps")
    cost_model = "domain"

    def check(self, workload: Workload, privacy: Privacy) -> None:
        prefix_horizon(workload)
        super().check(workload, privacy)

    def estimate(self, workload: Workload, privacy: Privacy) -> Cost:
        """O(steps) memory and work (:func:`engine.analysis.continual.stream_cost`)."""
        levels = math.log2(max(workload.domain.size, 2)) + 1.0
        return stream_cost(workload, 2.0 * levels + 6.0, 4.0 * levels)  # the sparse tree

    def _plan(self, workload: Workload, privacy: Privacy, progress: Progress | None) -> Plan:
        n, weight = prefix_horizon(workload)
        tree = DyadicTree(n)
        strategy = Sparse(tree.matrix())
        unit = weight**2 * tree.step_variances()

        def reconstruct(plan: Plan, y: np.ndarray) -> np.ndarray:
            return weight * tree.estimate(y)

        sensitivity = {1: strategy.sensitivity(1), 2: strategy.sensitivity(2)}
        return Plan(mechanism=self.name, workload=workload, privacy=privacy,
                    strategy=strategy, trace=float(unit.sum()), sensitivity=sensitivity,
                    shown=_views(tree, unit), reconstructor=reconstruct,
                    query_variances=lambda plan: unit)


def _views(tree: DyadicTree, unit: np.ndarray) -> tuple[View, ...]:
    return (
        facts("online", "Strategy", "A causal tree: every step's total is published when the "
              "step ends, from the blocks completed so far.", [
                  Fact("kind", "strategy kind", "binary tree, causal efficient estimate"),
                  Fact("meaning", "what it measures", "noisy totals of every completed "
                       "block of 1, 2, 4, ... steps"),
                  Fact("steps", "steps published", tree.n),
                  Fact("levels", "tree levels", tree.levels),
                  Fact("memory", "numbers kept per step", tree.levels, "numbers"),
                  Fact("max_to_rmse", "worst step / RMSE over the horizon",
                       math.sqrt(float(unit.max()) / float(unit.mean())))]),
        SeriesView(key="level_variances", title="Variance of a block's estimate",
                   caption="Unit variance of the efficient estimate of a complete block, by "
                   "level (block of 2^level steps).", values=tree.level_variances,
                   x_label="level"))
