"""Randomness of a release: OS-entropy generators, seeds for teaching and tests, their label.

A release draws from :func:`release_rng` with no seed: numpy's PCG64 seeded from 128 bits of
the operating system's entropy. A seed makes a run reproducible, which is for teaching and
tests only; every output of such a run carries :data:`SEEDED_LABEL`.
"""

from __future__ import annotations

import secrets

import numpy as np

from engine.errors import SpecError

#: the label every seeded (reproducible) output carries
SEEDED_LABEL = "seeded: reproducible, not a private release"


def release_rng(seed: int | None = None) -> np.random.Generator:
    """A PCG64 generator: 128 bits of OS entropy when ``seed`` is None, else the seed.

    Args:
        seed: None for a private release; an integer only for teaching and tests.
    """
    if seed is None:
        return np.random.default_rng(secrets.randbits(128))
    return np.random.default_rng(seed)


def seed_from_text(text: str | None, field: str) -> int | None:
    """Parse a seed typed by a user: None/empty -> None, else a non-negative integer.

    Args:
        text: the seed as typed.
        field: the name the user knows the value by, for the error (``--seed`` on the
            command line).

    Raises:
        SpecError: one line naming ``field`` when the text is not such an integer.
    """
    if text is None or str(text).strip() == "":
        return None
    try:
        value = int(str(text).strip())
    except ValueError:
        raise SpecError(f"{field}: expected a non-negative integer, got {text!r}") from None
    if value < 0:
        raise SpecError(f"{field}: expected a non-negative integer, got {value}")
    return value


def seeded_label(seed: int | None) -> str | None:
    """:data:`SEEDED_LABEL` for a seeded run, None for an OS-entropy release."""
    return None if seed is None else SEEDED_LABEL
