"""Hierarchical census group-size release (PGSR; Fioretto, Van Hentenryck & Zhu, 2021).

Consistent, non-negative integer group-size histograms for every region of a geographic
hierarchy under pure eps-DP at the individual level. Modules, one concept each:

* :mod:`.model` -- region tree, size buckets, histograms, released hierarchies and checks;
* :mod:`.noise` -- double-geometric / Laplace noise, sensitivities, per-level budget split;
* :mod:`.dp` -- M_DP: exact DP with slope-merged convex cost tables;
* :mod:`.cumulative` -- M_CDP (isotonic + M_DP) and M_CDP* (chain DP);
* :mod:`.relaxed`, :mod:`.topdown`, :mod:`.gls` -- the baselines;
* :mod:`.synthetic`, :mod:`.io` -- data: generated censuses and CSV hierarchies;
* :mod:`.bridge` -- the workload ``I_k (x) H_T`` for the matrix-mechanism tools;
* :mod:`.evaluate` -- Monte Carlo errors, violations and runtimes;
* :mod:`.mechanism` -- the registered ``hierarchical-pgsr`` mechanism.
"""

from engine.mechanisms.hierarchical.mechanism import (
    VARIANT_TITLES,
    VARIANTS,
    HierarchicalPGSR,
)
from engine.mechanisms.hierarchical.model import Hierarchy, RegionTree, Release, SizeSet
from engine.mechanisms.hierarchical.synthetic import running_example, synthetic_census

__all__ = ["VARIANTS", "VARIANT_TITLES", "HierarchicalPGSR", "Hierarchy", "RegionTree",
           "Release", "SizeSet", "running_example", "synthetic_census"]
