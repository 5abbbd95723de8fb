"""Whole counts that keep given totals: the roundings behind tables that agree.

* :func:`round_within_groups`: every row of a table to its own whole total, by largest
  remainders (a clique of a junction tree within each value of its separator);
* :func:`controlled_round`: a two-way table to whole row and column totals at once, every
  cell rounded up or down (Cox's controlled rounding): first scaled to those totals by
  iterative proportional fitting, then rounded by a maximum flow -- the table's transportation
  polytope contains the scaled table, so it has a vertex with whole cells within 1 of it;
  when the table's zero pattern cannot carry the totals (e.g. one cell holding a row whose
  total was rounded down and a column whose total was rounded up), the whole table with those
  totals nearest to it cell by cell (a transportation programme, whole at its vertices).

Pure numpy/scipy: post-processing of released numbers, no privacy cost.

Example:
    >>> controlled_round(np.array([[0.5, 0.5], [0.5, 0.5]]), np.array([1, 1]),
    ...                  np.array([1, 1])).sum(axis=0).tolist()
    [1, 1]
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog
from scipy.sparse.csgraph import maximum_flow

from engine.linalg.nonnegative import largest_remainder_rows

#: Iterative proportional fitting stops when every row and column total is this close
#: (relative to the table's total).
FIT_TOLERANCE = 1e-10
#: ... or after this many sweeps (a table that needs more has a zero pattern that barely
#: carries the totals: :func:`nearest_transport` rounds it).
FIT_SWEEPS = 1_000
#: Proportional-fitting sweeps run between two convergence checks (each sweep's factors are
#: kept, so the result is the first sweep that met the tolerance, as with a check a sweep).
CHECK_SWEEPS = 8
#: A scaled cell this close to a whole count is taken as that count (an interior-point
#: solver's default accuracy leaves errors near 1e-4; rounding moves a cell by up to 1).
SNAP = 1e-3


def round_within_groups(values: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Whole non-negative counts, row by row: row ``g`` of ``values`` (non-negative) scaled to
    sum to ``targets[g]`` (a whole count; a row of zeros is spread evenly), then rounded by
    largest remainders (ties: the first cell) so it sums exactly to ``targets[g]``.

    Returns:
        int64 array of ``values``' shape.

    Example:
        >>> round_within_groups(np.array([[0.4, 1.6], [2.5, 0.5]]), np.array([2, 3])).tolist()
        [[0, 2], [3, 0]]
    """
    values = np.clip(np.asarray(values, dtype=float), 0.0, None)
    targets = np.asarray(targets, dtype=np.int64).reshape(-1)
    width = values.shape[1]
    sums = values.sum(axis=1)
    positive = sums > 0
    if positive.all():  # the usual case: every row scaled, no row spread
        scaled = values * (targets / sums)[:, None]
    else:
        scaled = np.empty_like(values)
        scaled[positive] = values[positive] * (targets[positive] / sums[positive])[:, None]
        scaled[~positive] = (targets[~positive] / width)[:, None]
    counts = largest_remainder_rows(scaled, targets)
    if not np.array_equal(counts.sum(axis=1), targets):
        raise ArithmeticError("round_within_groups: a row's counts miss its target")
    return counts


def controlled_round(table: np.ndarray, rows: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """Whole non-negative counts with row totals ``rows`` and column totals ``columns`` (whole,
    with one sum), each cell within 1 of ``table`` scaled to those totals.

    Args:
        table: a non-negative two-way table (a cell that is zero where its row and column
            totals are positive gets a trace, so every such row and column can be scaled).
        rows, columns: the whole totals to keep.

    Returns:
        int64 array of ``table``'s shape.

    Raises:
        ValueError: the totals do not share one sum.
    """
    rows = np.asarray(rows, dtype=np.int64).reshape(-1)
    columns = np.asarray(columns, dtype=np.int64).reshape(-1)
    if rows.sum() != columns.sum():
        raise ValueError(f"controlled_round: row totals sum to {rows.sum()}, column totals "
                         f"to {columns.sum()}")
    scaled = proportional_fit(table, rows, columns)
    # a cell a solver's round-off put a hair off a whole count is that count: rounding must
    # not move it (nor spend a row's bump on it)
    whole = np.rint(scaled)
    scaled = np.where(np.abs(scaled - whole) <= SNAP, whole, scaled)
    floors = np.floor(scaled)
    fractional = scaled > floors
    row_need = rows - floors.sum(axis=1).astype(np.int64)
    column_need = columns - floors.sum(axis=0).astype(np.int64)
    for capacity in (fractional, np.ones_like(fractional)):
        bumps = greedy_bumps(row_need, column_need, capacity, scaled - floors)
        if bumps is None:
            bumps = _bumps(row_need, column_need, capacity)
        if bumps is not None:
            return floors.astype(np.int64) + bumps
    return nearest_transport(table, rows, columns)


def controlled_round_many(tables: list[np.ndarray], rows: list[np.ndarray],
                          columns: list[np.ndarray]) -> list[np.ndarray]:
    """:func:`controlled_round` of every table at once (each with its own row and column
    totals): the tables, each turned to have at least as many rows as columns, are padded
    into one block, scaled by iterative proportional fitting together and given their bumps
    by :func:`greedy_bumps`'s construction run on all of them in step; a table whose greedy
    bumps get stuck goes through :func:`controlled_round` alone.

    Returns:
        int64 arrays, one per table, of its shape.

    Raises:
        ValueError: a table's totals do not share one sum.

    Example:
        >>> [t.tolist() for t in controlled_round_many(
        ...     [np.array([[0.5, 0.5], [0.5, 0.5]]), np.array([[2.6, 0.4, 1.0]])],
        ...     [np.array([1, 1]), np.array([4])], [np.array([1, 1]), np.array([3, 0, 1])])]
        [[[1, 0], [0, 1]], [[3, 0, 1]]]
    """
    if not tables:
        return []
    turned = [t.shape[0] < t.shape[1] for t in tables]
    own = [np.asarray(t, dtype=float).T if turn else np.asarray(t, dtype=float)
           for t, turn in zip(tables, turned, strict=True)]
    sides = [(np.asarray(c if turn else r, dtype=np.int64).reshape(-1),
              np.asarray(r if turn else c, dtype=np.int64).reshape(-1))
             for r, c, turn in zip(rows, columns, turned, strict=True)]
    for r, c in sides:
        if r.sum() != c.sum():
            raise ValueError(f"controlled_round: row totals sum to {r.sum()}, column totals "
                             f"to {c.sum()}")
    n, k, m = len(own), max(t.shape[0] for t in own), max(t.shape[1] for t in own)
    block = np.zeros((n, k, m))
    row_totals = np.zeros((n, k), dtype=np.int64)
    column_totals = np.zeros((n, m), dtype=np.int64)
    for i, (t, (r, c)) in enumerate(zip(own, sides, strict=True)):
        block[i, :t.shape[0], :t.shape[1]] = t
        row_totals[i, :r.size] = r
        column_totals[i, :c.size] = c
    scaled = _fit_block(block, row_totals, column_totals)
    whole = np.rint(scaled)
    scaled = np.where(np.abs(scaled - whole) <= SNAP, whole, scaled)
    floors = np.floor(scaled)
    bumps, ok = _greedy_block(row_totals - floors.sum(axis=2).astype(np.int64),
                              column_totals - floors.sum(axis=1).astype(np.int64),
                              scaled > floors, scaled - floors)
    out = []
    for i, (t, (r, c), turn) in enumerate(zip(own, sides, turned, strict=True)):
        rounded = (floors[i, :t.shape[0], :t.shape[1]].astype(np.int64)
                   + bumps[i, :t.shape[0], :t.shape[1]] if ok[i]
                   else controlled_round(t, r, c))
        out.append(rounded.T if turn else rounded)
    return out


def _fit_block(block: np.ndarray, rows: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """:func:`proportional_fit` of every table of ``block`` (tables x rows x columns) to its
    ``rows`` and ``columns`` totals, in step.

    Each sweep scales the rows to their totals, then the columns; the table after any sweep
    is the start scaled by a factor per row and one per column, so only the factors are
    updated (each sweep two batched matrix-vector products: the row sums of the start
    scaled by the column factors, the column sums of it scaled by the row factors) and the
    table is formed once, at the end. The sweeps run :data:`CHECK_SWEEPS` at a time, each
    one's factors and row sums kept; the first whose row sums meet the tolerance is the
    result (the same sweep a check after every sweep stops at). A row or column whose sum
    is zero (no live cell) keeps any finite factor: its cells are zero."""
    totals = np.maximum(rows.sum(axis=1).astype(float), 1.0)
    live = (rows > 0)[:, :, None] & (columns > 0)[:, None, :]
    start = np.where(live, np.clip(block, 0.0, None), 0.0)
    start += live * (1e-9 * totals / np.maximum(live.sum(axis=(1, 2)), 1))[:, None, None]
    tolerance = (FIT_TOLERANCE * totals)[:, None]
    by_row = np.ones((CHECK_SWEEPS, *rows.shape))
    by_column = np.ones((CHECK_SWEEPS, *columns.shape))
    row_sums = np.empty((CHECK_SWEEPS, *rows.shape, 1))
    sums = np.matmul(start, np.ones((*columns.shape, 1)))[:, :, 0]  # the start's row sums
    done, last = 0, 0
    while done < FIT_SWEEPS:
        count = min(CHECK_SWEEPS, FIT_SWEEPS - done)
        for i in range(count):
            np.divide(rows, sums, out=by_row[i], where=sums > 0)
            sums = np.matmul(by_row[i][:, None, :], start)[:, 0, :]  # column sums
            np.divide(columns, sums, out=by_column[i], where=sums > 0)
            sums = np.matmul(start, by_column[i][:, :, None], out=row_sums[i])[:, :, 0]
        met = (np.abs(by_row[:count] * row_sums[:count, :, :, 0] - rows) <= tolerance
               ).all(axis=(1, 2))
        done, last = done + count, count - 1
        if met.any():
            last = int(np.argmax(met))
            break
    return by_row[last][:, :, None] * start * by_column[last][:, None, :]


def _greedy_block(row_need: np.ndarray, column_need: np.ndarray, capacity: np.ndarray,
                  fraction: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`greedy_bumps` on every table of the block at once, line by line along the
    columns (the shorter side of each table; a table's padding has no capacity and no need):
    the bumps, and per table whether they keep both needs. Each line's units go to the cross
    lines ranked by their key, equal keys in their order (a stable sort)."""
    n, k, m = capacity.shape
    ok = (row_need >= 0).all(axis=1) & (column_need >= 0).all(axis=1)
    ok &= row_need.sum(axis=1) == column_need.sum(axis=1)
    tables = np.arange(n)
    left = row_need.copy()
    tie = 0.5 * np.clip(fraction, 0.0, 1.0 - 1e-9)
    room = capacity.sum(axis=2).astype(float)  # each row's open cells in columns to come
    order = np.argsort(capacity.sum(axis=1) - column_need, axis=1, kind="stable")
    bumps = np.zeros((n, k, m), dtype=np.int64)
    places = np.arange(k)
    for step in range(m):
        line = order[:, step]
        allowed = capacity[tables, :, line]
        units = column_need[tables, line]
        room -= allowed
        key = np.where(allowed & (left > 0), left - room + tie[tables, :, line] + m, -1.0)
        ranked = np.argsort(-key, axis=1, kind="stable")
        rank = np.empty_like(ranked)
        rank[tables[:, None], ranked] = places[None, :]
        chosen = rank < units[:, None]
        ok &= ~(chosen & (key < 0)).any(axis=1)
        bumps[tables, :, line] = chosen
        left -= chosen
    ok &= ~left.any(axis=1)
    return bumps, ok


def nearest_transport(table: np.ndarray, rows: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """The whole non-negative table with row totals ``rows`` and column totals ``columns``
    (whole, one sum) nearest to ``table`` in the sum of absolute differences.

    Each cell is its floor, minus whole units, plus a first unit at cost ``1 - 2 * fraction``
    and further units at cost 1: a min-cost flow whose constraint matrix is totally
    unimodular, so the simplex vertex (HiGHS dual simplex) is whole.

    Raises:
        ArithmeticError: the solver's vertex is not whole (it cannot be for these totals).
    """
    t = np.clip(np.asarray(table, dtype=float), 0.0, None)
    k, m = t.shape
    floors = np.floor(t)
    fraction = (t - floors).reshape(-1)
    cells = k * m
    # variables: [down (<= floor), first up (<= 1), further up]
    cost = np.concatenate([np.ones(cells), 1.0 - 2.0 * fraction, np.ones(cells)])
    row_of = np.repeat(np.arange(k), m)
    column_of = np.tile(np.arange(m), k)
    index = np.arange(cells)
    heights = np.concatenate([row_of, k + column_of])
    sums = sp.csr_array((np.ones(2 * cells), (heights, np.concatenate([index, index]))),
                        shape=(k + m, cells))
    equal = sp.hstack([-sums, sums, sums]).tocsr()
    need = np.concatenate([rows - floors.sum(axis=1), columns - floors.sum(axis=0)])
    bounds = np.column_stack([np.zeros(3 * cells),
                              np.concatenate([floors.reshape(-1), np.ones(cells),
                                              np.full(cells, np.inf)])])
    solution = linprog(cost, A_eq=equal, b_eq=need, bounds=bounds, method="highs-ds")
    if solution.status != 0:
        raise ArithmeticError("controlled_round: no rounding keeps both totals")
    x = solution.x
    counts = floors.reshape(-1) - x[:cells] + x[cells:2 * cells] + x[2 * cells:]
    whole = np.rint(counts)
    if np.abs(counts - whole).max() > 1e-6:
        raise ArithmeticError("controlled_round: the transportation vertex is not whole")
    out = whole.astype(np.int64).reshape(k, m)
    if not (np.array_equal(out.sum(axis=1), rows) and np.array_equal(out.sum(axis=0), columns)):
        raise ArithmeticError("controlled_round: no rounding keeps both totals")
    return out


def proportional_fit(table: np.ndarray, rows: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """``table`` scaled (iterative proportional fitting) to row totals ``rows`` and column
    totals ``columns``; rows and columns whose total is zero are zero."""
    rows, columns = np.asarray(rows).reshape(-1), np.asarray(columns).reshape(-1)
    return _fit_block(np.asarray(table, dtype=float)[None], rows[None], columns[None])[0]


def greedy_bumps(row_need: np.ndarray, column_need: np.ndarray, capacity: np.ndarray,
                 fraction: np.ndarray) -> np.ndarray | None:
    """A 0/1 table, 1 only where ``capacity`` allows, with row sums ``row_need`` and column
    sums ``column_need``, built line by line along the shorter side, the lines with the least
    room to spare first: each line's units go to the cross lines whose need left most exceeds
    their open cells in the lines still to come, ties to the larger ``fraction``, then to the
    first cross line (on a full table: the most need left, Ryser's construction); None when it
    gets stuck (a maximum flow may still find one). The construction of
    :func:`controlled_round_many`, on one table.

    Example:
        >>> greedy_bumps(np.array([1, 1]), np.array([1, 1]), np.ones((2, 2), bool),
        ...              np.array([[0.9, 0.1], [0.2, 0.8]])).tolist()
        [[1, 0], [0, 1]]
    """
    turn = capacity.shape[0] < capacity.shape[1]  # the block's lines are its columns
    rows, columns = (column_need, row_need) if turn else (row_need, column_need)
    bumps, ok = _greedy_block(np.asarray(rows, dtype=np.int64)[None],
                              np.asarray(columns, dtype=np.int64)[None],
                              (capacity.T if turn else capacity)[None],
                              (fraction.T if turn else fraction)[None])
    if not ok[0]:
        return None
    return bumps[0].T if turn else bumps[0]


def _bumps(row_need: np.ndarray, column_need: np.ndarray, capacity: np.ndarray
           ) -> np.ndarray | None:
    """A 0/1 table, 1 only where ``capacity`` allows, with row sums ``row_need`` and column
    sums ``column_need`` (a maximum flow source -> rows -> columns -> sink); None when there
    is none."""
    if (row_need < 0).any() or (column_need < 0).any():
        return None
    k, m = capacity.shape
    need = int(row_need.sum())
    cells_r, cells_c = np.nonzero(capacity)
    source, sink = 0, k + m + 1
    heads = np.concatenate([np.full(k, source), 1 + cells_r, 1 + k + np.arange(m)])
    tails = np.concatenate([1 + np.arange(k), 1 + k + cells_c, np.full(m, sink)])
    caps = np.concatenate([row_need, np.ones(cells_r.size, np.int64), column_need])
    graph = sp.csr_array((caps.astype(np.int32), (heads, tails)), shape=(sink + 1, sink + 1))
    result = maximum_flow(graph, source, sink)
    if result.flow_value != need:
        return None
    flow = result.flow.tocoo()
    used = (flow.data > 0) & (flow.row >= 1) & (flow.row <= k) & (flow.col > k) & (flow.col
                                                                                  < sink)
    bumps = np.zeros((k, m), dtype=np.int64)
    bumps[flow.row[used] - 1, flow.col[used] - 1 - k] = 1
    return bumps
