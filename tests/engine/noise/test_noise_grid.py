"""The release grid: the exponent's check, the sensitivity on the grid, the automatic grid."""

from __future__ import annotations

import math

import numpy as np
import pytest

from engine.errors import SpecError
from engine.linalg.matrix import Dense
from engine.noise import (
    GRID_INFLATION,
    auto_grid_exponent,
    check_grid_exponent,
    column_support,
    exact_noise,
    grid_sensitivity,
)
from engine.privacy import Privacy


def test_grid_exponent_is_checked() -> None:
    assert check_grid_exponent("12", "--grid") == 12 and check_grid_exponent(0, "--grid") == 0
    for bad in (-1, "-3", 41, "x", 1.5, True):
        with pytest.raises(SpecError, match=r"^--grid: expected an integer in \[0, 40\]"):
            check_grid_exponent(bad, "--grid")


def test_rounded_release_moves_no_more_than_the_grid_sensitivity() -> None:
    """Brute force over every column and random data: the bound holds and is not loose by
    more than the rounding itself."""
    rng = np.random.default_rng(0)
    A = rng.normal(size=(12, 9)) * (rng.random((12, 9)) < 0.6)
    g = 2.0**-3
    l1, l2 = np.abs(A).sum(0).max(), np.sqrt((A**2).sum(0)).max()
    support = column_support(Dense(A))
    assert support == int(np.count_nonzero(A, axis=0).max())
    b1, b2 = grid_sensitivity(l1, l2, support, g)
    worst1 = worst2 = 0.0
    for _ in range(300):
        x = rng.integers(0, 50, 9).astype(float)
        base = np.floor(A @ x / g + 0.5) * g
        for j in range(9):
            moved = np.floor(A @ (x + np.eye(9)[j]) / g + 0.5) * g - base
            worst1, worst2 = max(worst1, np.abs(moved).sum()), max(worst2,
                                                                 np.sqrt((moved**2).sum()))
    assert l1 <= b1 and worst1 <= b1 and worst2 <= b2
    assert b1 - l1 == pytest.approx(g * support) and b2 < l2 + g * math.sqrt(support)


def test_automatic_grid_is_the_coarsest_within_the_inflation_bound() -> None:
    # a dense Kronecker strategy touching 10**6 answers per record needs a fine grid
    l1, l2, support = 800.0, 1.3, 10**6
    k = auto_grid_exponent(False, l1, l2, support, 4.2)
    d2 = grid_sensitivity(l1, l2, support, 2.0**-k)[1]
    assert d2 <= l2 * (1 + GRID_INFLATION) < grid_sensitivity(l1, l2, support, 2.0**(1 - k))[1]
    assert k == 19  # g = 2**-19: 1600 g + 1e6 g**2 <= 1.69 * 2 * 2**-10
    k1 = auto_grid_exponent(True, l1, l2, support, 1.0)
    assert grid_sensitivity(l1, l2, support, 2.0**-k1)[0] <= l1 * (1 + GRID_INFLATION)
    # capped where the noise scale in grid units would leave int64: then the finest allowed
    assert auto_grid_exponent(False, 1e9, 1e4, 10**12, 1e3) == 2  # 2e7 * 2**2 < 2**27
    noise = exact_noise(Privacy(noise="zcdp", rho=0.5), l1, l2, integral=False, support=support)
    assert noise.grid_exponent == 19 and noise.sensitivity == pytest.approx(d2)

