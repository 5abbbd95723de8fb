"""Fixtures shared by every test."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture
def rng() -> np.random.Generator:
    """A seeded generator so that every random test is reproducible."""
    return np.random.default_rng(0)
