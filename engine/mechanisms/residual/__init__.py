"""The residual family: ResidualPlanner, QuerySmasher and QuerySmasher's sub-solvers.

Both mechanisms split every query into orthogonal residual sub-queries and measure each
residual with its own Gaussian mechanism; they share one layer, used through public names:

* ``decomposition``: queries -> residual sub-workloads (Grams as interned pieces);
* ``submechanisms``: unit-cost mechanisms of one residual (Kronecker, dense, Fourier);
* ``optimal``: QuerySmasher's certified optimal sub-problem solver;
* ``subsolvers``: the per-residual strategies (optimal, RP, RP+, WFF) and the parallel solve;
* ``assemble``: the noise split over residuals, the assembled plan, measure and reconstruct;
* ``planner``: ResidualPlanner's plan (``residual_plan``: closed-form or max-variance noise
  split, measured in the subtraction basis), also QuerySmasher's max-variance objective;
* ``mechanism``: the registered ``querysmasher`` and ``residual-planner``.

The residual algebra (``AttrSet``, subtraction bases) is ``engine.linalg.residuals``; the
sum / max noise allocations are ``engine.linalg.allocation``.
"""

from engine.mechanisms.residual.assemble import Assembly, allocate, privacy_conversions
from engine.mechanisms.residual.decomposition import Decomposition, decompose, subquery
from engine.mechanisms.residual.mechanism import QuerySmasher, ResidualPlanner
from engine.mechanisms.residual.optimal import OptimalSolution, solve_optimal
from engine.mechanisms.residual.planner import residual_plan
from engine.mechanisms.residual.subsolvers import SUB_SOLVERS, solve_residuals

__all__ = ["SUB_SOLVERS", "Assembly", "Decomposition", "OptimalSolution", "QuerySmasher",
           "ResidualPlanner", "allocate", "decompose", "privacy_conversions", "residual_plan",
           "solve_optimal", "solve_residuals", "subquery"]
