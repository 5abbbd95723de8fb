"""Several serving processes opening a new database at the same moment (``panel serve
--num-procs N`` starting on a fresh data directory) each find the schema missing; the upgrade
is serialised, so every process opens the store and the ledger, and each table exists once."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

OPEN_AT = """
import sys, time
from engine.ledger import Ledger
from explorer.server.session_store import SessionStore
url, start = sys.argv[1], float(sys.argv[2])
time.sleep(max(0.0, start - time.time()))
SessionStore(url).close()
Ledger(url).close()
"""
PROCESSES = 6


def open_together(url: str) -> list[str]:
    """Start :data:`PROCESSES` interpreters that open ``url`` at one instant; their errors."""
    start = time.time() + 4.0  # after every interpreter has imported the engine
    children = [subprocess.Popen([sys.executable, "-c", OPEN_AT, url, str(start)],
                                 stderr=subprocess.PIPE, text=True,
                                 cwd=Path(__file__).resolve().parents[3])
                for _ in range(PROCESSES)]
    failures = []
    for child in children:
        _, err = child.communicate(timeout=60)
        if child.returncode != 0:
            failures.append(err.strip().splitlines()[-1])
    return failures

@pytest.mark.slow
def test_processes_opening_a_new_sqlite_file_together_all_succeed(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    assert open_together(url) == []
    tables = sa.inspect(sa.create_engine(url)).get_table_names()
    assert {"explorer_sessions", "explorer_alembic_version", "alembic_version",
            "datasets"} <= set(tables)


@pytest.mark.slow
def test_processes_opening_a_new_postgresql_database_together_all_succeed(
        postgres_url: str) -> None:
    assert open_together(postgres_url) == []
