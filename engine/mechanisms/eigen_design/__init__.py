"""Eigen-Design (Li & Miklau, PVLDB 2012): optimally weighted eigen-queries of the workload.

Modules:
    program1: the weighting program for any orthonormal design set (our dual and
        interior-point solvers, cvxpy cross-check).
    strategy: the strategy matrix, its completion and robust error evaluation.
    design: eigen-queries, dense Grams and the full algorithm (Program 2).
    reductions: eigen-separation and principal vectors (with or without a full
        eigendecomposition).
    structured: Kronecker / marginal workloads through per-attribute eigenbases.
    designsets: Wavelet and Fourier design sets (Figure 5).
    mechanism: the registered ``eigen-design`` mechanism.
"""

from engine.mechanisms.eigen_design.design import (
    EigenQueries,
    WeightedDesign,
    dense_gram,
    eigen_design,
    eigen_queries,
    weighted_design,
)
from engine.mechanisms.eigen_design.mechanism import EigenDesignMechanism
from engine.mechanisms.eigen_design.program1 import Program1Result, solve_program1
from engine.mechanisms.eigen_design.reductions import (
    eigen_separation,
    principal_vectors,
    principal_vectors_partial,
    separation_partial,
)
from engine.mechanisms.eigen_design.strategy import EigenStrategy, NormalSolver
from engine.mechanisms.eigen_design.structured import kron_design

__all__ = ["EigenDesignMechanism", "EigenQueries", "EigenStrategy", "NormalSolver",
           "Program1Result", "WeightedDesign", "dense_gram", "eigen_design", "eigen_queries",
           "eigen_separation", "kron_design", "principal_vectors", "principal_vectors_partial",
           "separation_partial", "solve_program1", "weighted_design"]
