"""Closed-form eigen-queries of the all-range Gram: the sine basis (DST-I).

All ranges on n cells have the Gram ``G_ij = min(i,j) (n + 1 - max(i,j))`` (cells 1..n), which
is ``n + 1`` times the inverse of the second-difference matrix ``L = tridiag(-1, 2, -1)``. L is
diagonalised by the sines, so G is too: its eigen-queries are the rows of the orthonormal,
symmetric DST-I matrix ``Q_kj = sqrt(2 / (n + 1)) sin(pi j k / (n + 1))`` with eigenvalues
``sigma_k = (n + 1) / (4 sin(pi k / (2 (n + 1)))**2)``, descending in k = 1..n.

Eigen-separation on all ranges therefore needs no eigendecomposition at all, neither full nor
iterative: Program 1's constraint rows are ``(Q o Q)_kj = (1 - cos(2 pi j k / (n + 1))) /
(n + 1)`` (a table of n + 1 values indexed by ``jk mod (n + 1)``), the strategy is applied by a
fast sine transform (O(n log n) per vector) and the column norms of any weighting by one FFT;
cells j and n + 1 - j have the same constraint, so Program 1 sees only half of the columns.
The completion's exact error costs O(n m**2) (Woodbury over the m completed cells), so only
the ``n // 8`` cells with the largest deficits are completed by default: on all ranges at
n = 1024 that recovers 0.9 of the full completion's 1.9 % (no completion: 2.06 % over the
full algorithm; n / 8 cells: 1.10 %; all 1,022: 0.11 %).
"""

from __future__ import annotations

import math
import time

import numpy as np
import scipy.fft

from engine.linalg.matrix import Matrix
from engine.mechanisms.eigen_design.design import WeightedDesign, weighted_design
from engine.mechanisms.eigen_design.reductions import default_group_size, separation_weights
from engine.progress import Progress, report


def all_range_eigenvalues(n: int) -> np.ndarray:
    """The n eigenvalues of the all-range Gram, descending (squared counts per cell pair)."""
    k = np.arange(1, n + 1)
    return (n + 1) / (4.0 * np.sin(np.pi * k / (2.0 * (n + 1))) ** 2)


class SineBasis(Matrix):
    """The orthonormal DST-I matrix ``sqrt(2/(n+1)) sin(pi j k/(n+1))`` (symmetric, n x n).

    Row k (0-based) is the all-range Gram's eigen-query of the (k+1)-th largest eigenvalue.
    """

    def __init__(self, n: int) -> None:
        self.n = int(n)

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n, self.n)

    def matvec(self, x: np.ndarray) -> np.ndarray:
        return scipy.fft.dst(np.asarray(x, dtype=float), type=1, norm="ortho", axis=0)

    rmatvec = matvec

    def dense(self) -> np.ndarray:
        self.check_dense("sine basis")
        k = np.arange(1, self.n + 1)
        return math.sqrt(2.0 / (self.n + 1)) * np.sin(np.pi * np.outer(k, k) / (self.n + 1))

    def squares_rmatvec(self, v: np.ndarray) -> np.ndarray:
        """``(Q o Q)^T v`` by one FFT of length n + 1: the column sums of squares of
        ``diag(sqrt v) Q`` (v of length n; a vector)."""
        v = np.asarray(v, dtype=float)
        padded = np.concatenate([[0.0], v])
        cosines = np.fft.rfft(padded, n=self.n + 1).real  # sum_k v_k cos(2 pi j k / (n+1))
        full = np.empty(self.n + 1)
        half = cosines.shape[0]
        full[:half] = cosines
        full[half:] = cosines[1:self.n + 2 - half][::-1]  # real input: F_{n+1-j} = F_j
        return (v.sum() - full[1:]) / (self.n + 1)


def squared_sine_rows(n: int, rows: slice | None = None, columns: int | None = None
                      ) -> np.ndarray:
    """Program 1's constraint rows ``(Q o Q)[rows, :columns]`` of the sine basis (float64).

    Columns j and n + 1 - j are equal (``sin**2`` is symmetric about the middle cell), so
    the first ``ceil(n / 2)`` columns carry every distinct constraint.
    """
    table = (1.0 - np.cos(2.0 * np.pi * np.arange(n + 1) / (n + 1))) / (n + 1)
    # products j k below 2**31 fit 32-bit indices (half the memory traffic of int64)
    kind = np.int32 if n * n < 2**31 else np.int64
    cells = np.arange(1, n + 1, dtype=kind)
    index = np.multiply.outer(cells[rows if rows is not None else slice(None)],
                              cells[:columns])
    index %= n + 1
    return table[index]


def all_range_separation(n: int, group_size: int | None = None, *, weight: float = 1.0,
                         complete: bool = True, completion_cells: int | None = None,
                         progress: Progress | None = None) -> WeightedDesign:
    """Eigen-separation on all ranges over n cells in the closed-form eigenbasis (L2).

    Args:
        n: number of cells.
        group_size: eigen-queries per group (default: the power of two nearest n**(1/3)).
        weight: the workload term's weight (the Gram is ``weight**2`` times the all-range one).
        complete: add the diagonal completion on the cells with the largest deficits.
        completion_cells: how many cells at most (default ``max(1, n // 8)``).
        progress: receives Program 1 iterations.
    """
    start = time.perf_counter()
    g = default_group_size(n) if not group_size else int(group_size)
    values = weight**2 * all_range_eigenvalues(n)
    report(progress, 0, math.nan, "closed-form eigen-queries")
    # the mirror cells' constraints are the same: Program 1 needs only half of the columns
    B = squared_sine_rows(n, columns=(n + 1) // 2)
    basis_seconds = time.perf_counter() - start
    x, _, summaries = separation_weights(values, B, g, 1.0, progress)
    del B
    cells = max(1, n // 8) if completion_cells is None else int(completion_cells)
    return weighted_design(SineBasis(n), values, x, 2, complete=complete, eigenbasis=True,
                           completion_cells=cells, program1=tuple(summaries),
                           info={"design_set": "eigen (closed-form sine basis)",
                                 "reduction": "separation", "group_size": g,
                                 "exact_eigenbasis": True,
                                 "svd_bound": float(np.sqrt(values).sum() ** 2 / n),
                                 "basis_seconds": basis_seconds})
