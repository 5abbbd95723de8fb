"""Shared timing helper for the benchmark scripts (imported as ``from timing import timed``)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def timed(fn: Callable[[], object], repeats: int = 3) -> tuple[object, float]:
    """The last result and the median wall time (seconds) of ``repeats`` calls."""
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return result, statistics.median(times)
