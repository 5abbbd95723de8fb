"""Vectorised rounds: every sampler draws in batches of at most :data:`BATCH` samples, so its
memory is O(BATCH) whatever the size asked for.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

#: samples generated per vectorised round (memory is O(BATCH) whatever the size asked for)
BATCH = 1 << 16


def fill(propose: Callable[[int], np.ndarray], size: int, rate: float) -> np.ndarray:
    """Draw ``size`` accepted samples in vectorised rounds of at most :data:`BATCH`."""
    out = np.empty(size, dtype=np.int64)
    filled = 0
    while filled < size:
        need = size - filled
        got = propose(min(BATCH, int(need / rate) + 64))
        take = min(need, got.size)
        out[filled:filled + take] = got[:take]
        filled += take
    return out
