"""Fixtures shared by every test."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


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


def _alive(pid: int) -> bool:
    """True while process ``pid`` runs (a zombie counts as ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


@pytest.fixture
def children_outlive_a_killed_parent() -> Callable[[str], list[int]]:
    """Run a Python ``script`` that prints its worker processes' ids on one line and then
    waits; kill it with SIGKILL (no exit handler runs) and return the ids of the workers that
    are still running 60 s later (an empty list is what every pool should give)."""

    def run(script: str) -> list[int]:
        parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                                  text=True, env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)))
        with parent:
            workers = [int(pid) for pid in parent.stdout.readline().split()]
            assert workers and all(_alive(pid) for pid in workers)
            parent.send_signal(signal.SIGKILL)
        deadline = time.monotonic() + 60
        while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.2)
        return [pid for pid in workers if _alive(pid)]

    return run
