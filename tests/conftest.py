"""Fixtures shared by every test."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture
def rng() -> np.random.Generator:
    """A seeded generator so that every random test is reproducible."""
    return np.random.default_rng(0)


@pytest.fixture(autouse=True)
def ledger_data_dir(tmp_path_factory: pytest.TempPathFactory,
                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test's budget ledger lives in a temporary data directory, never the user's."""
    monkeypatch.setenv("DPWB_DATA_DIR", str(tmp_path_factory.mktemp("dpwb-data")))
    monkeypatch.delenv("DPWB_LEDGER_URL", raising=False)
