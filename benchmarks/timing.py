"""Shared timing helpers for the benchmark scripts (imported as ``from timing import timed``)."""

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


#: Additions in the calibration workload (:func:`calibration_seconds`).
CALIBRATION_ADDITIONS = 3_000_000


def calibration_seconds(repeats: int = 3) -> float:
    """CPU seconds of one fixed pure-Python workload (:data:`CALIBRATION_ADDITIONS` integer
    additions in a loop), the fastest of ``repeats``: the unit this shared machine's speed of
    the moment is measured in (the served pages are pure Python too)."""
    fastest = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        total = 0
        for number in range(CALIBRATION_ADDITIONS):
            total += number
        fastest = min(fastest, time.process_time() - start)
    return fastest
