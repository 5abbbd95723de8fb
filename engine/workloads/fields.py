"""Checks for the values inside a workload spec; each failure is a one-line SpecError that
names the field path (``where``) and the allowed values.

Blocks and query groups read their options through these, so every error reads alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from engine.errors import SpecError, suggest

#: Most entries (rows x cells) of the explicit rows a random block or group draws (400 MB).
MAX_EXPLICIT_ENTRIES = 50_000_000


def integer(value: Any, where: str, lo: int | None = None, hi: int | None = None) -> int:
    """An integer (not a bool) in ``lo..hi`` (either bound may be None)."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise SpecError(f"{where}: expected an integer, got {value!r}")
    v = int(value)
    if lo is not None and v < lo or hi is not None and v > hi:
        span = f"{lo}..{hi}" if hi is not None else f">= {lo}"
        raise SpecError(f"{where}: must be {span}, got {v}")
    return v


def explicit_rows(count: int, cells: int, where: str) -> int:
    """``count`` when ``count`` random rows over ``cells`` cells fit in
    :data:`MAX_EXPLICIT_ENTRIES` (a random group of 1e5 rows over 1e6 cells asked for 745 GiB)."""
    if count * cells > MAX_EXPLICIT_ENTRIES:
        raise SpecError(f"{where}: {count:,} random rows over {cells:,} cells make "
                        f"{count * cells:,} entries; the limit is {MAX_EXPLICIT_ENTRIES:,}")
    return count


def number(
    value: Any, where: str, lo: float | None = None, hi: float | None = None, open_lo: bool = False
) -> float:
    """A finite number in ``[lo, hi]`` (``(lo, hi]`` with ``open_lo``)."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.number):
        raise SpecError(f"{where}: expected a number, got {value!r}")
    v = float(value)
    if (
        not np.isfinite(v)
        or (lo is not None and (v < lo or (open_lo and v == lo)))
        or (hi is not None and v > hi)
    ):
        bound = f"> {lo}" if open_lo else f">= {lo}" if lo is not None else ""
        bound += f" and <= {hi}" if hi is not None else ""
        raise SpecError(f"{where}: must be a finite number {bound}".rstrip() + f", got {v}")
    return v


def check_keys(spec: Mapping, allowed: Iterable[str], where: str) -> None:
    """Refuse any key of ``spec`` outside ``allowed``, suggesting the nearest one."""
    allowed = tuple(allowed)
    for key in spec:
        if key not in allowed:
            raise SpecError(
                f"{where}.{key}: unknown key{suggest(str(key), allowed)}; "
                f"allowed: {', '.join(allowed)}"
            )


def row_array(value: Any, where: str, width: int) -> np.ndarray:
    """A non-empty 2-D array of finite numbers with ``width`` columns (one per cell)."""
    try:
        array = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise SpecError(f"{where}: expected a list of rows of numbers") from None
    if array.ndim != 2 or array.shape[0] == 0:
        raise SpecError(f"{where}: expected a non-empty list of rows (a 2-D array)")
    if array.shape[1] != width:
        raise SpecError(
            f"{where}: each row needs {width} entries (one per cell), got {array.shape[1]}"
        )
    if not np.all(np.isfinite(array)):
        raise SpecError(f"{where}: entries must be finite numbers")
    return array
