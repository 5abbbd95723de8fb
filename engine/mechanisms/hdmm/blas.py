"""Limit the BLAS thread pool for a block of code (opt-in).

HDMM's optimisers make thousands of small BLAS calls (p x n products, p x p Cholesky factors,
one eigendecomposition per Gaussian dual step). OpenBLAS's thread pool costs more than it
saves on such calls, and on a machine shared with other work its spinning threads slow them
down 10-100x. :func:`blas_threads` sets the thread count of the OpenBLAS copies bundled with
numpy and scipy for the duration of a ``with`` block and restores it afterwards; the HDMM
mechanisms use it when their ``blas_threads`` knob is set. Libraries it cannot find are left
alone (the block then runs unchanged).

The setting is process-wide: other threads calling BLAS during the block see it too.
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import os
from collections.abc import Callable, Iterator
from functools import cache

import numpy
import scipy

#: (get, set) symbol pairs of OpenBLAS builds: scipy-openblas64 (numpy), scipy-openblas
#: (scipy), and plain OpenBLAS with and without the 64-bit integer suffix.
_SYMBOLS = (("scipy_openblas_get_num_threads64_", "scipy_openblas_set_num_threads64_"),
            ("scipy_openblas_get_num_threads", "scipy_openblas_set_num_threads"),
            ("openblas_get_num_threads64_", "openblas_set_num_threads64_"),
            ("openblas_get_num_threads", "openblas_set_num_threads"))


@cache
def _controls() -> tuple[tuple[Callable[[], int], Callable[[int], None]], ...]:
    """The thread getters/setters of the OpenBLAS libraries vendored by numpy and scipy."""
    out = []
    for package in (numpy, scipy):
        # wheels keep their vendored libraries next to the package, in "<package>.libs"
        libdir = os.path.dirname(package.__file__) + ".libs"
        for path in sorted(glob.glob(os.path.join(libdir, "*openblas*"))):
            try:
                lib = ctypes.CDLL(path)  # already loaded: the same handle numpy uses
            except OSError:
                continue
            for get, put in _SYMBOLS:
                if hasattr(lib, get) and hasattr(lib, put):
                    getter, setter = getattr(lib, get), getattr(lib, put)
                    getter.restype, getter.argtypes = ctypes.c_int, []
                    setter.restype, setter.argtypes = None, [ctypes.c_int]
                    out.append((getter, setter))
                    break
    return tuple(out)


def blas_available() -> bool:
    """True when at least one bundled OpenBLAS thread pool can be controlled."""
    return bool(_controls())


@contextlib.contextmanager
def blas_threads(threads: int | None) -> Iterator[None]:
    """Run the block with ``threads`` BLAS threads (None: leave the setting alone)."""
    if threads is None:
        yield
        return
    controls = _controls()
    previous = [get() for get, _ in controls]
    for _, put in controls:
        put(int(threads))
    try:
        yield
    finally:
        for (_, put), count in zip(controls, previous, strict=True):
            put(count)
