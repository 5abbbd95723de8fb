"""Fixtures shared by the mechanism tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

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
