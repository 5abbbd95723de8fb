"""Controlled rounding of tables that agree (engine/workflows/table_rounding.py): one greedy
construction for one table and for a block of tables, its tie rule, and the invariants a
published release relies on -- totals kept, whole non-negative counts within one of the
scaled table, and tables that agree on the 1-way tables they share."""

from __future__ import annotations

import numpy as np
import pytest

from engine.workflows.table_rounding import (
    controlled_round,
    controlled_round_many,
    greedy_bumps,
    proportional_fit,
    round_within_groups,
)


def _tables(seed: int, shapes: list[tuple[int, int]]) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    tables = []
    for shape in shapes:
        table = rng.gamma(0.6, 4.0, size=shape)
        table[rng.random(shape) < 0.3] = 0.0
        tables.append(table)
    return tables


def _whole(values: np.ndarray, total: int) -> np.ndarray:
    return round_within_groups(values[None, :], np.array([total]))[0]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_one_table_is_rounded_as_in_the_block(seed) -> None:
    # one construction: a table rounded alone is the table rounded among others (fractions
    # drawn from a continuum: no exact ties)
    shapes = [(4, 3), (2, 7), (5, 5), (1, 4), (6, 2), (8, 3)]
    tables = _tables(seed, shapes)
    rows, columns = [], []
    for table in tables:
        total = max(int(round(table.sum())), 1)
        rows.append(_whole(table.sum(axis=1) + 1e-9, total))
        columns.append(_whole(table.sum(axis=0) + 1e-9, total))
    together = controlled_round_many(tables, rows, columns)
    alone = [controlled_round(t, r, c) for t, r, c in zip(tables, rows, columns, strict=True)]
    for a, b in zip(together, alone, strict=True):
        np.testing.assert_array_equal(a, b)


def test_equal_keys_go_to_the_first_cross_line() -> None:
    # every cell open, every fraction 0.5, one unit per row and column: all keys tie, so each
    # column (the lines, the square table's columns) takes the first row still in need
    n = 5
    bumps = greedy_bumps(np.ones(n, np.int64), np.ones(n, np.int64), np.ones((n, n), bool),
                         np.full((n, n), 0.5))
    assert bumps is not None
    np.testing.assert_array_equal(bumps, np.eye(n, dtype=np.int64))
    # a wide table is built along its rows: the same rule, turned
    wide = greedy_bumps(np.array([1, 1]), np.array([1, 0, 1]), np.ones((2, 3), bool),
                        np.full((2, 3), 0.5))
    assert wide is not None and wide.tolist() == [[1, 0, 0], [0, 0, 1]]


@pytest.mark.parametrize("seed", [3, 4])
def test_agreeing_tables_keep_every_total_and_agree_after_rounding(seed) -> None:
    # the 2-way tables of one non-negative 3-way table rounded to the shared 1-way tables:
    # whole, non-negative, within one of the scaled table, and each 1-way table is the sums
    # of every 2-way table that holds it
    rng = np.random.default_rng(seed)
    cube = rng.gamma(0.5, 3.0, size=(6, 4, 3))
    cube[rng.random(cube.shape) < 0.4] = 0.0
    total = int(round(cube.sum()))
    assert total > 0
    one = {a: _whole(cube.sum(axis=tuple(b for b in range(3) if b != a)), total)
           for a in range(3)}
    pairs = [(0, 1), (0, 2), (1, 2)]
    tables = [cube.sum(axis=3 - a - b) for a, b in pairs]
    rounded = controlled_round_many(tables, [one[a] for a, _ in pairs],
                                    [one[b] for _, b in pairs])
    for (a, b), table, counts in zip(pairs, tables, rounded, strict=True):
        assert counts.dtype == np.int64 and counts.shape == table.shape
        assert (counts >= 0).all() and int(counts.sum()) == total
        np.testing.assert_array_equal(counts.sum(axis=1), one[a])
        np.testing.assert_array_equal(counts.sum(axis=0), one[b])
        scaled = proportional_fit(table, one[a], one[b])
        assert np.abs(counts - scaled).max() < 1.0
    # the tables agree: attribute 0's table from (0, 1) and from (0, 2) is the same
    np.testing.assert_array_equal(rounded[0].sum(axis=1), rounded[1].sum(axis=1))
    np.testing.assert_array_equal(rounded[0].sum(axis=0), rounded[2].sum(axis=1))
    np.testing.assert_array_equal(rounded[1].sum(axis=0), rounded[2].sum(axis=0))


def test_a_stuck_greedy_construction_says_so() -> None:
    # the row's unit can only go to a closed cell: no bumps, the flow or the nearest
    # transport must take over
    assert greedy_bumps(np.array([1, 0]), np.array([0, 1]),
                        np.array([[True, False], [True, True]]), np.full((2, 2), 0.5)) is None
    # needs that do not share one sum cannot be met
    assert greedy_bumps(np.array([1, 1]), np.array([1, 0]), np.ones((2, 2), bool),
                        np.full((2, 2), 0.5)) is None


def _sweep_by_sweep(table: np.ndarray, rows: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """Iterative proportional fitting as written before the factor form (main at 49dd9cd):
    the table itself scaled row by row, then column by column, every sweep."""
    total = max(float(rows.sum()), 1.0)
    live = (rows > 0)[:, None] & (columns > 0)[None, :]
    scaled = np.where(live, np.clip(table, 0.0, None), 0.0)
    scaled += live * (1e-9 * total / max(int(live.sum()), 1))
    row_sums = scaled.sum(axis=1)
    for _ in range(1_000):
        scaled *= np.divide(rows, row_sums, out=np.zeros(rows.shape), where=row_sums > 0)[:, None]
        sums = scaled.sum(axis=0)
        scaled *= np.divide(columns, sums, out=np.zeros(columns.shape), where=sums > 0)[None, :]
        row_sums = scaled.sum(axis=1)
        if np.abs(row_sums - rows).max() <= 1e-10 * total:
            break
    return scaled


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_the_factor_form_fits_as_the_table_sweeps(seed) -> None:
    # one factor per row and per column, the table formed at the end: the same scaled table
    # as scaling the table every sweep, to round-off (zero rows, columns and cells included)
    rng = np.random.default_rng(seed)
    for table in _tables(seed, [(4, 3), (7, 5), (1, 6), (9, 2), (12, 12)]):
        total = max(int(round(table.sum())), 1)
        rows = _whole(table.sum(axis=1) + rng.random(table.shape[0]), total)
        columns = _whole(table.sum(axis=0) + rng.random(table.shape[1]), total)
        if rows.size > 1:  # a row that must be empty
            rows[-1] += rows[0]
            rows[0] = 0
        fitted = proportional_fit(table, rows, columns)
        np.testing.assert_allclose(fitted, _sweep_by_sweep(table, rows, columns),
                                   rtol=1e-12, atol=1e-12 * total)
        # the last scaling is the columns': they hold (rows only where the zeros allow)
        np.testing.assert_allclose(fitted.sum(axis=0), columns, rtol=0, atol=1e-9 * total)
        assert rows.size == 1 or np.all(fitted[0] == 0.0)
