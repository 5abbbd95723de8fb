"""Limit the BLAS thread pool for a block of code (opt-in), through threadpoolctl.

HDMM's optimisers make thousands of small BLAS calls (p x n products, p x p Cholesky factors,
one eigendecomposition per Gaussian dual step). A BLAS thread pool costs more than it saves on
such calls, and on a machine shared with other work its spinning threads slow them down
10-100x. :func:`blas_threads` sets the thread count of every BLAS library loaded in the
process (OpenBLAS, MKL, BLIS: those vendored by numpy and scipy included) for the duration of a
``with`` block and restores it afterwards; the HDMM mechanisms use it when their
``blas_threads`` knob is set.

The libraries are looked up once per process (threadpoolctl scans every loaded shared object,
1-4 ms, more than a small plan's optimisation takes at n = 64): numpy and scipy, which load
them, are imported before any plan runs.

The setting is process-wide: other threads calling BLAS during the block see it too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from functools import cache

from threadpoolctl import ThreadpoolController


@cache
def _controller() -> ThreadpoolController:
    """The thread pools loaded in this process (found once)."""
    return ThreadpoolController()


def blas_available() -> bool:
    """True when at least one loaded BLAS thread pool can be controlled."""
    return any(pool["user_api"] == "blas" for pool in _controller().info())


@contextlib.contextmanager
def blas_threads(threads: int | None) -> Iterator[None]:
    """Run the block with ``threads`` BLAS threads (None: leave the setting alone)."""
    if threads is None:
        yield
        return
    with _controller().limit(limits=int(threads), user_api="blas"):
        yield
