"""QuerySmasher and its sub-solvers (RP, RP+, WFF as special cases); see mechanism.py."""

from engine.mechanisms.querysmasher.assemble import Assembly, allocate, privacy_conversions
from engine.mechanisms.querysmasher.decomposition import Decomposition, decompose, subquery
from engine.mechanisms.querysmasher.mechanism import QuerySmasher
from engine.mechanisms.querysmasher.optimal import OptimalSolution, solve_optimal
from engine.mechanisms.querysmasher.subsolvers import SUB_SOLVERS, solve_residuals

__all__ = ["SUB_SOLVERS", "Assembly", "Decomposition", "OptimalSolution", "QuerySmasher",
           "allocate", "decompose", "privacy_conversions", "solve_optimal", "solve_residuals",
           "subquery"]
