"""Li & Miklau's example workloads, as engine workloads, for the Eigen-Design tests.

* :func:`fig1_workload`: the 8 queries of Figure 1(b) over gender x gpa (8 cells, rank 4);
* :func:`all_predicates`: every 0/1 vector over n cells (2**n queries, ``G = 2**(n-2)(I+J)``);
* :func:`range_marginals`: k-way *range* marginals over a :class:`Domain`, Table 2's
  "1Way/2Way Range Marginal" (the definition is :func:`engine.workloads.catalog.range_marginals`);
* :func:`permuted`: a block with its cells reordered (``new column k = old column perm[k]``).
"""

from __future__ import annotations

import itertools

import numpy as np

from engine.domain import Domain
from engine.workloads import catalog
from engine.workloads.blocks import MatrixBlock
from engine.workloads.catalog import build_workload
from engine.workloads.workload import Workload

#: Figure 1(b): cells 1-4 are one gender with the 4 gpa ranges, cells 5-8 the other.
FIG1_ROWS = np.array([
    [1, 1, 1, 1, 1, 1, 1, 1],      # all students
    [1, 1, 1, 1, 0, 0, 0, 0],      # one gender
    [0, 0, 0, 0, 1, 1, 1, 1],      # the other gender
    [1, 1, 0, 0, 1, 1, 0, 0],      # gpa < 3.0
    [0, 0, 1, 1, 0, 0, 1, 1],      # gpa >= 3.0
    [0, 0, 0, 0, 0, 0, 1, 1],      # second gender with gpa >= 3.0
    [1, 1, 0, 0, 0, 0, 0, 0],      # first gender with gpa < 3.0
    [1, 1, 1, 1, -1, -1, -1, -1],  # difference between the genders
], dtype=float)


def fig1_workload() -> Workload:
    """Figure 1(b) as a workload over one categorical attribute of 8 cells."""
    return Workload.one_dim(MatrixBlock(FIG1_ROWS), name="cell", kind="categorical")


def all_predicates(n: int) -> np.ndarray:
    """All 2**n predicate queries (0/1 rows, the empty one included) over n cells."""
    return np.array(list(itertools.product((0.0, 1.0), repeat=n)))


def permuted(rows: np.ndarray, perm: list[int] | np.ndarray) -> MatrixBlock:
    """Explicit rows with their cells reordered: new column k = old column ``perm[k]``."""
    return MatrixBlock(np.asarray(rows, float)[:, np.asarray(perm)])


def range_marginals(domain: Domain, k: int) -> Workload:
    """All k-way range marginals over ``domain`` (Table 2 uses 8 x 16 x 16)."""
    return build_workload(catalog.range_marginals(domain.to_spec(), k))
