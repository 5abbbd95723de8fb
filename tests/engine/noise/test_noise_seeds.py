"""Release generators: OS entropy unless seeded, and the seed's parsing."""

from __future__ import annotations

import numpy as np
import pytest

from engine.errors import SpecError
from engine.noise import (
    SEEDED_LABEL,
    release_rng,
    seed_from_text,
    seeded_label,
)


def test_generators_use_os_entropy_unless_seeded() -> None:
    a, b = release_rng().integers(0, 2**62, 4), release_rng().integers(0, 2**62, 4)
    assert not np.array_equal(a, b)
    assert np.array_equal(release_rng(9).integers(0, 2**62, 4),
                          release_rng(9).integers(0, 2**62, 4))
    assert seeded_label(None) is None and seeded_label(0) == SEEDED_LABEL
    assert seed_from_text(None, "--seed") is None and seed_from_text(" 12 ", "--seed") == 12
    for bad in ("abc", "-1", "1.5"):
        with pytest.raises(SpecError, match=r"^--seed: expected a non-negative integer"):
            seed_from_text(bad, "--seed")

