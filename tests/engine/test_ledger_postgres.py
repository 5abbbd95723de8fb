"""The privacy budget ledger on a real PostgreSQL server (a throw-away one, see
``tests/conftest.py``): the Alembic schema, the ``SELECT ... FOR UPDATE`` path that serialises
the releases of one data set, and eight processes racing releases that admit exactly what the
budget allows (nothing lost, nothing double-counted)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from engine.ledger import Budget, BudgetExceeded, Cost, Ledger

ROOT = Path(__file__).resolve().parents[2]
FINGERPRINT = "cd" * 32


def test_schema_register_reserve_and_refuse_on_postgresql(postgres_url: str) -> None:
    ledger = Ledger(postgres_url)
    try:
        ledger.register("people", FINGERPRINT, Budget("rho", 1.0), domain={"age": 8})
        with ledger.reserve("people", Cost.zcdp(0.25), mechanism="identity") as first:
            first.record_path = "/releases/1"
        with pytest.raises(RuntimeError), ledger.reserve("people", Cost.zcdp(0.5),
                                                         mechanism="identity"):
            raise RuntimeError("the release crashed after its charge")
        with (pytest.raises(BudgetExceeded, match="people"),
              ledger.reserve("people", Cost.zcdp(0.8), mechanism="identity")):
            pass
        status = ledger.status("people")
        history = ledger.history("people", all_statuses=True)
    finally:
        ledger.close()
    assert status.releases == 1
    assert status.spent.spent == pytest.approx(0.25, rel=0, abs=1e-12)
    assert status.spent.remaining == pytest.approx(0.75, rel=0, abs=1e-12)
    assert [(r.status, r.record_path) for r in history] == [("released", "/releases/1"),
                                                            ("failed", None)]
    engine = sa.create_engine(postgres_url)
    with engine.connect() as conn:
        heads = conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalars().all()
    engine.dispose()
    assert len(heads) == 1


RACER = """
import sys, time, pathlib
from engine.ledger import BudgetExceeded, Cost, Ledger
url, go, attempts = sys.argv[1], pathlib.Path(sys.argv[2]), int(sys.argv[3])
ledger = Ledger(url)
while not go.exists():
    time.sleep(0.002)
outcomes = []
for _ in range(attempts):
    try:
        with ledger.reserve("people", Cost.zcdp(0.125), mechanism="identity"):
            outcomes.append("released")
    except BudgetExceeded:
        outcomes.append("refused")
ledger.close()
print(" ".join(outcomes))
"""


@pytest.mark.slow
def test_eight_processes_racing_releases_admit_exactly_the_budget(postgres_url: str,
                                                                  tmp_path: Path) -> None:
    # budget rho = 1 and 24 attempts of rho = 0.125 (exact in binary): exactly 8 fit
    ledger = Ledger(postgres_url)
    ledger.register("people", FINGERPRINT, Budget("rho", 1.0))
    ledger.close()
    go = tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1"}
    racers = [subprocess.Popen([sys.executable, "-c", RACER, postgres_url, str(go), "3"],
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
              for _ in range(8)]
    go.touch()
    outs = [racer.communicate(timeout=300) for racer in racers]
    assert all(r.returncode == 0 for r in racers), [err for _, err in outs]
    outcomes = [word for out, _ in outs for word in out.split()]
    assert len(outcomes) == 24
    assert outcomes.count("released") == 8
    assert outcomes.count("refused") == 16
    fresh = Ledger(postgres_url)  # a new connection pool sees what the racers committed
    try:
        status = fresh.status("people")
        history = fresh.history("people", all_statuses=True)
    finally:
        fresh.close()
    assert status.releases == 8
    assert status.spent.spent == pytest.approx(1.0, rel=0, abs=1e-12)
    assert status.spent.remaining == pytest.approx(0.0, rel=0, abs=1e-12)
    assert [r.status for r in history] == ["released"] * 8
