"""Vectorised rounds: every sampler draws in batches of at most :data:`BATCH` samples, so its
memory is O(BATCH) whatever the size asked for.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

#: samples generated per vectorised round (memory is O(BATCH) whatever the size asked for)
BATCH = 1 << 16


def fill(propose: Callable[[int], np.ndarray], size: int, rate: float) -> np.ndarray:
    """Draw ``size`` int64 samples in vectorised rounds of at most :data:`BATCH` proposals.

    Args:
        propose: ``propose(n)`` draws n proposals and returns the accepted ones (about
            ``rate * n`` of them) as an int64 array.
        size: number of samples wanted.
        rate: the expected acceptance rate, to size each round.
    """
    out = np.empty(size, dtype=np.int64)
    filled = 0
    while filled < size:
        need = size - filled
        got = propose(min(BATCH, int(need / rate) + 64))
        take = min(need, got.size)
        out[filled:filled + take] = got[:take]
        filled += take
    return out
