"""Aggregated pictures of matrices of any size: the mean entry (or mean absolute entry) over a
grid of row and column blocks, computed from the implicit matrix without forming it.

A screen shows a few hundred pixels each way; a strategy may have a billion rows and columns.
:func:`block_image` splits a row range and a column range into at most ``rows`` x ``cols``
contiguous blocks and returns each block's mean. It evaluates the 2-D prefix sums
``S(a, c) = sum_{i < a, j < c} A[i, j]`` at the block edges only, from the matrix's structure:

* Kronecker products: the prefix sum of ``A_1 kron Y`` at ``(a, c)`` splits the rows
  ``i < a`` and columns ``j < c`` by their first digit into four products of prefix sums of
  ``A_1`` and of ``Y`` (recursively), so a ``[1000]^3`` strategy costs three 1000 x 1000
  factors and a few arrays of the grid's size; ``|A_1 kron A_2| = |A_1| kron |A_2|`` gives the
  absolute means the same way;
* stacks, scalings, transposes and (signed) sums: by their parts; identity and all-ones:
  closed forms;
* anything else: its dense array below :data:`DENSE_PICTURE_ENTRIES` entries, else (signed
  means only) products with indicator columns, refused above :data:`MATVEC_ENTRIES`.

Example:
    >>> import numpy as np
    >>> from engine.linalg.matrix import Dense
    >>> picture = block_image(Dense(np.arange(16.0).reshape(4, 4)), rows=2, cols=2,
    ...                       statistic="mean")
    >>> picture.values.tolist()
    [[2.5, 4.5], [10.5, 12.5]]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from engine.linalg.matrix import (
    Dense,
    Identity,
    Kron,
    Matrix,
    Ones,
    Scaled,
    Sparse,
    Sum,
    Transpose,
    VStack,
)

#: Largest matrix (entries) densified to draw it (80 MB of float64).
DENSE_PICTURE_ENTRIES = 10_000_000
#: Largest temporary (entries) of the indicator products of an unstructured matrix (160 MB).
MATVEC_ENTRIES = 20_000_000
#: Largest grid of blocks one picture may ask for.
MAX_BLOCKS = 4_000_000
#: What a block's colour can mean.
STATISTICS = ("mean", "mean_abs")


@dataclass(frozen=True)
class BlockImage:
    """Block means of a matrix: ``values[r, c]`` is the mean (or mean absolute) entry over rows
    ``row_edges[r]:row_edges[r + 1]`` and columns ``col_edges[c]:col_edges[c + 1]``."""

    values: np.ndarray
    row_edges: np.ndarray
    col_edges: np.ndarray
    statistic: str

    @property
    def exact(self) -> bool:
        """True when every block is a single entry (the values are the entries)."""
        return bool(np.all(np.diff(self.row_edges) == 1) and np.all(np.diff(self.col_edges) == 1))


def bin_edges(lo: int, hi: int, bins: int) -> np.ndarray:
    """At most ``bins`` contiguous, near-equal integer blocks covering ``lo:hi`` (their edges,
    increasing; one index per block when the range is shorter than ``bins``)."""
    lo, hi, bins = int(lo), int(hi), int(bins)
    if hi <= lo or bins < 1:
        raise ValueError(f"picture: empty range {lo}:{hi} or {bins} blocks")
    span = hi - lo
    if span <= bins:
        return np.arange(lo, hi + 1, dtype=np.int64)
    # Python integers: span * k may pass 2**63 for a billion-row range and thousands of bins.
    return np.array(sorted({lo + span * k // bins for k in range(bins + 1)}), dtype=np.int64)


def _range(value: Sequence[float] | None, size: int, what: str) -> tuple[int, int]:
    """A visible range (floats from a zoom, clipped to the matrix) as integer index bounds."""
    if value is None:
        return 0, size
    lo = max(0, int(np.floor(float(value[0]))))
    hi = min(size, int(np.ceil(float(value[1]))))
    if hi <= lo:
        raise ValueError(f"picture: {what} range {tuple(value)} is outside 0..{size}")
    return lo, hi


def block_image(matrix: Matrix | np.ndarray, rows: int = 400, cols: int = 400, *,
                row_range: Sequence[float] | None = None,
                col_range: Sequence[float] | None = None,
                statistic: str = "mean_abs") -> BlockImage:
    """The matrix as at most ``rows`` x ``cols`` block means over the visible ranges.

    Args:
        matrix: an implicit matrix or an array (any size when structured, see the module).
        rows, cols: most blocks down and across (a screen's pixels, say).
        row_range, col_range: ``(start, stop)`` of the rows / columns to show (floats from a
            zoom are widened to whole indices); None: all of them.
        statistic: ``"mean"`` (signed mean entry) or ``"mean_abs"`` (mean absolute entry).

    Raises:
        ValueError: a bad statistic or range, or an unstructured matrix too large to picture
            (the message names the size and the limit).
    """
    if statistic not in STATISTICS:
        raise ValueError(f"picture: statistic must be one of {', '.join(STATISTICS)}, "
                         f"got {statistic!r}")
    A = matrix if isinstance(matrix, Matrix) else Dense(np.asarray(matrix, dtype=float))
    m, n = (int(s) for s in A.shape)
    if max(m, n) >= 2**62:
        raise ValueError(f"picture: a {m:,} x {n:,} matrix is beyond 64-bit indices")
    if int(rows) * int(cols) > MAX_BLOCKS:
        raise ValueError(f"picture: {rows} x {cols} blocks exceed the {MAX_BLOCKS:,} allowed")
    r_edges = bin_edges(*_range(row_range, m, "row"), rows)
    c_edges = bin_edges(*_range(col_range, n, "column"), cols)
    sums = np.diff(np.diff(prefix_sums(A, r_edges, c_edges, statistic == "mean_abs"), axis=0),
                   axis=1)
    counts = np.outer(np.diff(r_edges), np.diff(c_edges)).astype(float)
    values = sums / counts
    if statistic == "mean_abs":  # rounding in the differences must not show as negative
        values = np.maximum(values, 0.0)
    values.setflags(write=False)
    return BlockImage(values, r_edges, c_edges, statistic)


def prefix_sums(A: Matrix, row_points: np.ndarray, col_points: np.ndarray,
                absolute: bool) -> np.ndarray:
    """``S[p, q] = sum_{i < row_points[p], j < col_points[q]} A[i, j]`` (of ``|A|`` when
    ``absolute``), from the structure of ``A`` (see the module)."""
    r = np.asarray(row_points, dtype=np.int64)
    c = np.asarray(col_points, dtype=np.int64)
    if isinstance(A, Kron):
        return _kron_prefix(A.factors, r, c, absolute)
    if isinstance(A, VStack):
        out = np.zeros((r.size, c.size))
        for block, weight, lo in zip(A.blocks, A.weights, A.offsets[:-1], strict=True):
            local = np.clip(r - lo, 0, block.shape[0])
            out += (abs(weight) if absolute else weight) * prefix_sums(block, local, c,
                                                                        absolute)
        return out
    if isinstance(A, Sum) and not absolute:
        return sum(coef * prefix_sums(term, r, c, absolute)
                   for coef, term in zip(A.coefs, A.terms, strict=True))
    if isinstance(A, Scaled):
        return (abs(A.c) if absolute else A.c) * prefix_sums(A.base, r, c, absolute)
    if isinstance(A, Transpose):
        return prefix_sums(A.base, c, r, absolute).T
    if isinstance(A, Identity):
        return np.minimum.outer(r, c).astype(float)
    if isinstance(A, Ones):
        return np.multiply.outer(r, c).astype(float)
    if isinstance(A, Sparse):
        return _explicit_prefix(A.matrix, r, c, absolute)
    if A.size <= DENSE_PICTURE_ENTRIES:
        return _explicit_prefix(A.dense(), r, c, absolute)
    return _matvec_prefix(A, r, c, absolute)


def _explicit_prefix(array: np.ndarray | sp.sparray | sp.spmatrix, r: np.ndarray,
                     c: np.ndarray, absolute: bool) -> np.ndarray:
    """Prefix sums of an explicit array at the grid ``r`` x ``c``: cumulative sums of a dense
    array; for a sparse one, each non-zero ``(i, j)`` is added to the first grid point past
    it and the grid is summed up both ways (no temporary of the array's size)."""
    if not sp.issparse(array):
        X = np.abs(array) if absolute else np.asarray(array, dtype=float)
        rows_above = np.vstack([np.zeros((1, X.shape[1])), np.cumsum(X, axis=0)])[r]
        return np.hstack([np.zeros((r.size, 1)), np.cumsum(rows_above, axis=1)])[:, c]
    coo = sp.coo_array(array)
    values = np.abs(coo.data) if absolute else np.asarray(coo.data, dtype=float)
    rows, row_of = np.unique(r, return_inverse=True)
    cols, col_of = np.unique(c, return_inverse=True)
    width = cols.size + 1
    cell = (np.searchsorted(rows, coo.row, side="right") * width
            + np.searchsorted(cols, coo.col, side="right"))
    hits = np.bincount(cell, weights=values, minlength=(rows.size + 1) * width).reshape(
        rows.size + 1, width)
    grid = np.cumsum(np.cumsum(hits, axis=0), axis=1)[:-1, :-1]
    return grid[np.ix_(row_of, col_of)]


def _matvec_prefix(A: Matrix, r: np.ndarray, c: np.ndarray, absolute: bool) -> np.ndarray:
    """Signed prefix sums of an unstructured implicit matrix from products with indicators."""
    m, n = A.shape
    if absolute:
        raise ValueError(f"picture: the mean size of the entries of a {m:,} x {n:,} "
                         f"unstructured matrix needs its entries (limit "
                         f"{DENSE_PICTURE_ENTRIES:,}); draw the signed mean instead")
    if (m + n) * c.size > MATVEC_ENTRIES:
        raise ValueError(f"picture: a {m:,} x {n:,} unstructured matrix needs "
                         f"{(m + n) * c.size:,} entries of work space at this resolution "
                         f"(limit {MATVEC_ENTRIES:,})")
    columns_below = (np.arange(n)[:, None] < c[None, :]).astype(float)  # n x len(c)
    AC = np.asarray(A.matvec(columns_below), dtype=float).reshape(m, c.size)
    return np.vstack([np.zeros((1, c.size)), np.cumsum(AC, axis=0)])[r]


def _kron_prefix(factors: Sequence[Matrix], r: np.ndarray, c: np.ndarray,
                 absolute: bool) -> np.ndarray:
    """Prefix sums of ``A_1 kron ... kron A_d`` at the grid ``r`` x ``c``.

    With ``X = D kron Y``, ``a = a_1 m_Y + a'`` and ``c = c_1 n_Y + c'``, the rows ``i < a`` are
    those with first digit below ``a_1``, or equal to it and the rest below ``a'`` (columns
    alike), so ``S_X(a, c) = P[a_1, c_1] T_Y + Pcol[a_1, c_1] S_Y(m_Y, c')
    + Prow[a_1, c_1] S_Y(a', n_Y) + D[a_1, c_1] S_Y(a', c')`` with P, Pcol, Prow the 2-D,
    column and row prefix sums of D, padded by a zero row and column for ``a = m_X``.
    """
    tables = [_KronTables.of(np.asarray(f.dense(), dtype=float), absolute) for f in factors]
    totals = np.ones(len(tables) + 1)  # totals[k]: sum of the product of factors k..d-1
    shapes = [(1, 1)] * (len(tables) + 1)
    for k in range(len(tables) - 1, -1, -1):
        totals[k] = tables[k].total * totals[k + 1]
        m, n = factors[k].shape
        shapes[k] = (int(m) * shapes[k + 1][0], int(n) * shapes[k + 1][1])

    def suffix(k: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if k == len(tables) or not a.any() or not b.any():
            return np.zeros((a.size, b.size))
        t = tables[k]
        mY, nY = shapes[k + 1]
        a1, a_rest = np.divmod(a, mY)
        b1, b_rest = np.divmod(b, nY)
        rows_full = suffix(k + 1, np.array([mY], dtype=np.int64), b_rest)   # 1 x q
        cols_full = suffix(k + 1, a_rest, np.array([nY], dtype=np.int64))   # p x 1
        inner = suffix(k + 1, a_rest, b_rest)
        ix = np.ix_(a1, b1)
        return (t.full[ix] * totals[k + 1] + t.col_prefix[ix] * rows_full
                + t.row_prefix[ix] * cols_full + t.D[ix] * inner)

    return suffix(0, r, c)


def value_count_variances(strategy: Matrix, shape: Sequence[int]) -> list[np.ndarray]:
    """For each attribute of a domain of ``shape`` and each of its values, the variance of the
    least-squares estimate of the count of records with that value (summed over the other
    attributes), at unit noise per measurement: ``q^T (A^T A)^+ q`` for the indicator ``q``.
    NaN where the strategy cannot estimate that count.

    Kronecker strategies with one factor per attribute multiply per-attribute variances
    (``q`` is a Kronecker product of an indicator and all-ones vectors); others are solved
    densely below :data:`DENSE_PICTURE_ENTRIES` entries.

    Raises:
        ValueError: when the strategy's columns are not the domain's cells, or an
            unstructured strategy is larger than :data:`DENSE_PICTURE_ENTRIES` entries.
    """
    shape = tuple(int(s) for s in shape)
    n = math.prod(shape)
    if strategy.shape[1] != n:
        raise ValueError(f"value counts: the strategy has {strategy.shape[1]:,} columns for "
                         f"a domain of {n:,} cells")
    if isinstance(strategy, Kron) and tuple(f.shape[1] for f in strategy.factors) == shape:
        per_value = [_count_variances(np.asarray(f.dense(), dtype=float),
                                      np.eye(f.shape[1]))
                     for f in strategy.factors]
        totals = [_count_variances(np.asarray(f.dense(), dtype=float),
                                   np.ones((f.shape[1], 1)))[0] for f in strategy.factors]
        return [v * math.prod(t for j, t in enumerate(totals) if j != i)
                for i, v in enumerate(per_value)]
    if strategy.size > DENSE_PICTURE_ENTRIES:
        m = strategy.shape[0]
        raise ValueError(f"value counts: a {m:,} x {n:,} strategy is solved for its counts "
                         f"only up to {DENSE_PICTURE_ENTRIES:,} entries")
    A = np.asarray(strategy.dense(), dtype=float)
    cells = np.indices(shape).reshape(len(shape), n)
    return [_count_variances(A, (cells[i][:, None] == np.arange(size)[None, :]).astype(float))
            for i, size in enumerate(shape)]


def _count_variances(A: np.ndarray, Q: np.ndarray) -> np.ndarray:
    """``q^T (A^T A)^+ q`` for each column q of ``Q`` (NaN where q is not in A's row space):
    the squared norm of the least-norm Z with ``A^T Z = Q``."""
    Z = np.linalg.lstsq(A.T, Q, rcond=None)[0]
    out = (Z * Z).sum(axis=0)
    missed = np.linalg.norm(A.T @ Z - Q, axis=0) > 1e-8 * max(1.0, float(np.abs(Q).max()))
    out[missed] = np.nan
    return out


@dataclass(frozen=True)
class _KronTables:
    """One Kronecker factor ``D`` (or ``|D|``) padded by a zero row and column, with its 2-D
    (``full``), column (``col_prefix``: rows above) and row (``row_prefix``: columns to the
    left) prefix sums, each indexed ``[a, c]`` for ``a <= m``, ``c <= n``."""

    D: np.ndarray
    full: np.ndarray
    col_prefix: np.ndarray
    row_prefix: np.ndarray
    total: float

    @classmethod
    def of(cls, D: np.ndarray, absolute: bool) -> _KronTables:
        if absolute:
            D = np.abs(D)
        m, n = D.shape
        padded = np.zeros((m + 1, n + 1))
        padded[:m, :n] = D
        col_prefix = np.vstack([np.zeros((1, n + 1)), np.cumsum(padded, axis=0)[:-1]])
        row_prefix = np.hstack([np.zeros((m + 1, 1)), np.cumsum(padded, axis=1)[:, :-1]])
        full = np.hstack([np.zeros((m + 1, 1)), np.cumsum(col_prefix, axis=1)[:, :-1]])
        return cls(padded, full, col_prefix, row_prefix, float(D.sum()))


__all__ = ["DENSE_PICTURE_ENTRIES", "MATVEC_ENTRIES", "MAX_BLOCKS", "STATISTICS", "BlockImage",
           "bin_edges", "block_image", "prefix_sums", "value_count_variances"]
