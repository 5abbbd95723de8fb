"""Fixtures shared by the mechanism tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from engine.mechanisms.hdmm.blas import blas_threads
from engine.noise import ExactNoise


def measure_noiseless(plan: Any, data: Any) -> Any:
    """The plan's measurement with zero noise, for checking that measuring and reconstructing
    are exact: the exact sampler's integers are zeroed during this call only, and answers go on
    the grid 2**-40, far below the tolerances."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ExactNoise, "integers", lambda self, size, rng: np.zeros(size, int))
        return plan.measure(data, np.random.default_rng(0), grid_exponent=40)


@pytest.fixture
def noiseless() -> Callable[[Any, Any], Any]:
    """:func:`measure_noiseless`, as a fixture."""
    return measure_noiseless


@pytest.fixture
def one_blas_thread() -> Iterator[None]:
    """One BLAS thread for the test: HDMM's optimisers make thousands of small BLAS calls,
    which a thread pool only slows down (badly on a busy machine)."""
    with blas_threads(1):
        yield
