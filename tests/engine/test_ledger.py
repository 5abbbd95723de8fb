"""The privacy budget ledger on a temporary SQLite file: exact composition in each unit,
refusal before anything is written, one winner among concurrent releases (threads and
processes), persistence across processes, one-line errors for broken or locked databases."""

from __future__ import annotations

import math
import os
import re
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from sqlalchemy.dialects import postgresql, sqlite

from engine.ledger import Budget, BudgetExceeded, Cost, Ledger, LedgerError, composed
from engine.ledger.store import lock_dataset_row
from engine.privacy import cdp_eps, cdp_rho

ROOT = Path(__file__).resolve().parents[2]
FINGERPRINT = "ab" * 32


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'ledger.sqlite'}"


def registered(url: str, budget: Budget, name: str = "people") -> Ledger:
    ledger = Ledger(url)
    ledger.register(name, FINGERPRINT, budget, domain={"age": 8})
    return ledger


# ----------------------------------------------------------------------------- composition
def test_rho_budget_adds_rho_and_converts_pure_eps() -> None:
    spent = composed(Budget("rho", 1.0), [Cost.zcdp(0.1), Cost.zcdp(0.25), Cost.pure(0.5)])
    assert spent.spent == pytest.approx(0.475, rel=0, abs=1e-12)  # 0.1 + 0.25 + 0.5**2 / 2
    assert spent.remaining == pytest.approx(0.525, rel=0, abs=1e-12)
    assert spent.remaining_rho == pytest.approx(0.525, rel=0, abs=1e-12)
    eps = spent.remaining_epsilon(1e-6)
    # CKS is tighter than the classical rho + 2 sqrt(rho ln(1/delta)), and above rho
    assert 0.525 < eps < 0.525 + 2 * math.sqrt(0.525 * math.log(1e6))
    assert cdp_rho(eps, 1e-6) == pytest.approx(0.525, rel=1e-9)


def test_pure_budget_adds_eps_and_refuses_zcdp() -> None:
    spent = composed(Budget("epsilon", 1.0), [Cost.pure(0.1), Cost.pure(0.2), Cost.pure(0.3)])
    assert spent.spent == pytest.approx(0.6, rel=0, abs=1e-12)
    assert spent.remaining == pytest.approx(0.4, rel=0, abs=1e-12)
    assert spent.remaining_rho == pytest.approx(0.08, rel=0, abs=1e-12)  # 0.4**2 / 2
    assert spent.remaining_epsilon(1e-9) == pytest.approx(0.4, rel=0, abs=1e-12)
    with pytest.raises(LedgerError, match="cannot be charged to a pure eps budget"):
        composed(Budget("epsilon", 1.0), [Cost.zcdp(0.1)])
    with pytest.raises(LedgerError, match="without a zCDP rho"):
        composed(Budget("rho", 1.0), [Cost.approx(0.5, 1e-7)])


def test_epsilon_delta_budget_basic_plus_converted_rho() -> None:
    budget = Budget("epsilon-delta", 4.0, 1e-6)
    costs = [Cost.pure(0.5), Cost.approx(0.25, 1e-7), Cost.zcdp(0.02), Cost.zcdp(0.03)]
    spent = composed(budget, costs)
    assert spent.basic_epsilon == pytest.approx(0.75, rel=0, abs=1e-12)
    assert spent.basic_delta == pytest.approx(1e-7, rel=0, abs=1e-20)
    assert spent.zcdp_rho == pytest.approx(0.05, rel=0, abs=1e-12)
    assert spent.spent == pytest.approx(0.75 + cdp_eps(0.05, 9e-7), rel=0, abs=1e-12)
    assert 0.8 < spent.spent < 0.8 + 2 * math.sqrt(0.05 * math.log(1 / 9e-7))
    # the remaining rho, spent by one more zCDP release, lands exactly on the total
    assert 0.75 + cdp_eps(0.05 + spent.remaining_rho, 9e-7) == pytest.approx(4.0, rel=1e-9)
    only_basic = composed(budget, [Cost.pure(0.5), Cost.approx(0.25, 1e-7)])
    assert only_basic.spent == pytest.approx(0.75, rel=0, abs=1e-12)


def test_budget_and_cost_reject_bad_values() -> None:
    with pytest.raises(LedgerError, match="^unit: unknown 'nats'"):
        Budget("nats", 1.0)
    with pytest.raises(LedgerError, match="^total: must be a positive number"):
        Budget("rho", -1.0)
    with pytest.raises(LedgerError, match="^delta: an epsilon-delta budget needs"):
        Budget("epsilon-delta", 1.0)
    with pytest.raises(LedgerError, match="^rho: must be a positive number"):
        Cost.zcdp(float("nan"))


# ------------------------------------------------------------------------- the database
def test_register_reserve_and_history(url: str) -> None:
    ledger = registered(url, Budget("rho", 1.0))
    with ledger.reserve("people", Cost.zcdp(0.25), mechanism="identity",
                        privacy={"noise": "zcdp", "rho": 0.25}, user="local:test") as r:
        r.record_path = "/releases/1"
        r.rounds = [{"charge": "round 1", "rho": 0.25}]
    with ledger.reserve(FINGERPRINT, Cost.pure(0.5), mechanism="hierarchical-pgsr"):
        pass
    status = ledger.status("people")
    assert status.spent.spent == pytest.approx(0.375, rel=0, abs=1e-12)
    assert status.releases == 2
    first, second = ledger.history("people")
    assert (first.mechanism, first.record_path, first.user) == ("identity", "/releases/1",
                                                                "local:test")
    assert first.rounds == [{"charge": "round 1", "rho": 0.25}]
    assert second.cost == Cost.pure(0.5) and second.status == "released"
    with pytest.raises(LedgerError, match="^name: 'people' is already registered"):
        ledger.register("people", "cd" * 32, Budget("rho", 1.0))
    with pytest.raises(LedgerError, match="^name: the data set is already registered as"):
        ledger.register("other", FINGERPRINT, Budget("rho", 1.0))
    with pytest.raises(LedgerError, match=r"^dataset: 'nobody' is not registered \(registered: "
                                          r"people\)"):
        ledger.status("nobody")


def test_over_budget_is_refused_and_nothing_is_written(url: str) -> None:
    ledger = registered(url, Budget("rho", 1.0))
    with ledger.reserve("people", Cost.zcdp(0.6), mechanism="identity"):
        pass
    ran = []
    with (pytest.raises(BudgetExceeded) as refused,
          ledger.reserve("people", Cost.zcdp(0.5), mechanism="identity")):
        ran.append(True)  # the release body never runs: no noise is drawn
    message = str(refused.value)
    left = cdp_eps(0.4, 1e-6)
    assert 4.5 < left < 4.7  # 0.4 + 2 sqrt(0.4 ln 1e6) = 5.10 is the looser bound
    assert message == ("budget: refused: data set 'people' has spent 0.6 / requested 0.5 "
                       "(rho=0.5) / total 1 (rho); nothing was released; remaining: rho = 0.4 "
                       f"= eps {left:.6g} at delta = 1e-06")
    assert ledger.refusal("people", Cost.zcdp(0.5)) == message  # the preview, nothing written
    assert ledger.refusal("people", Cost.zcdp(0.4)) is None
    assert ledger.refusal("people", Cost.zcdp(0.5), at_delta=1e-9).endswith(
        f"remaining: rho = 0.4 = eps {cdp_eps(0.4, 1e-9):.6g} at delta = 1e-09")
    assert ran == [] and len(ledger.history("people", all_statuses=True)) == 1
    with ledger.reserve("people", Cost.zcdp(0.4), mechanism="identity"):  # exactly the rest
        pass
    assert ledger.status("people").spent.remaining == pytest.approx(0.0, abs=1e-12)


def test_a_failed_release_is_not_counted(url: str) -> None:
    ledger = registered(url, Budget("epsilon", 1.0))
    with pytest.raises(RuntimeError), ledger.reserve("people", Cost.pure(0.7), mechanism="x"):
        raise RuntimeError("the mechanism failed before publishing anything")
    (failed,) = ledger.history("people", all_statuses=True)
    assert failed.status == "failed" and ledger.history("people") == []
    assert ledger.status("people").spent.spent == 0.0


def test_threads_exactly_one_of_eight_passes(url: str) -> None:
    registered(url, Budget("rho", 1.0)).close()
    barrier = threading.Barrier(8)
    outcomes: list[str] = []

    def release() -> None:
        ledger = Ledger(url)  # one connection pool per "user"
        barrier.wait()
        try:
            with ledger.reserve("people", Cost.zcdp(0.6), mechanism="identity"):
                outcomes.append("released")
        except BudgetExceeded:
            outcomes.append("refused")
        finally:
            ledger.close()

    threads = [threading.Thread(target=release) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["refused"] * 7 + ["released"]
    assert len(Ledger(url).history("people", all_statuses=True)) == 1


CHILD = """
import sys, time, pathlib
from engine.ledger import BudgetExceeded, Cost, Ledger
url, go = sys.argv[1], pathlib.Path(sys.argv[2])
ledger = Ledger(url)
while not go.exists():
    time.sleep(0.005)
try:
    with ledger.reserve("people", Cost.zcdp(0.6), mechanism="identity"):
        print("released")
except BudgetExceeded:
    print("refused")
"""


def test_processes_exactly_one_of_four_passes_and_it_survives_restart(url: str,
                                                                      tmp_path: Path) -> None:
    registered(url, Budget("rho", 1.0)).close()
    go = tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1"}
    children = [subprocess.Popen([sys.executable, "-c", CHILD, url, str(go)], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for _ in range(4)]
    go.touch()
    outs = [c.communicate(timeout=120) for c in children]
    assert all(c.returncode == 0 for c in children), [err for _, err in outs]
    assert sorted(out.strip() for out, _ in outs) == ["refused"] * 3 + ["released"]
    # a new process (this one, a fresh Ledger) sees what the children wrote
    status = Ledger(url).status("people")
    assert status.releases == 1
    assert status.spent.spent == pytest.approx(0.6, rel=0, abs=1e-12)


def test_schema_is_at_the_alembic_head(url: str, tmp_path: Path) -> None:
    Ledger(url).close()
    Ledger(url).close()  # opening again is a no-op upgrade
    with sqlite3.connect(tmp_path / "ledger.sqlite") as conn:
        assert conn.execute("select version_num from alembic_version").fetchall() == [("0002",)]
        tables = {r[0] for r in conn.execute("select name from sqlite_master where type='table'")}
    assert {"datasets", "releases", "alembic_version"} <= tables


def test_corrupted_file_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "ledger.sqlite"
    bad.write_bytes(b"this is not a database file " * 100)
    with pytest.raises(LedgerError) as caught:
        Ledger(f"sqlite:///{bad}")
    assert str(caught.value) == (f"ledger: cannot open {str(bad)!r}: file is not a database")


def test_locked_file_is_one_line(url: str, tmp_path: Path) -> None:
    registered(url, Budget("rho", 1.0)).close()
    holder = sqlite3.connect(tmp_path / "ledger.sqlite", isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(LedgerError) as caught:
            Ledger(url, timeout=0.2)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert str(caught.value).endswith(": database is locked")
    assert "\n" not in str(caught.value)


def test_server_databases_lock_the_data_set_row() -> None:
    query = lock_dataset_row(7)
    assert str(query.compile(dialect=postgresql.dialect())).endswith("FOR UPDATE")
    assert "FOR UPDATE" not in str(query.compile(dialect=sqlite.dialect()))


def test_epsilon_delta_refusal_states_the_unit(url: str) -> None:
    ledger = registered(url, Budget("epsilon-delta", 1.0, 1e-6))
    with ledger.reserve("people", Cost.pure(0.75), mechanism="hierarchical-pgsr"):
        pass
    with (pytest.raises(BudgetExceeded) as refused,
          ledger.reserve("people", Cost.pure(0.5), mechanism="hierarchical-pgsr")):
        pass
    assert str(refused.value) == ("budget: refused: data set 'people' has spent 0.75 / requested "
                                  "0.5 (eps=0.5) / total 1 (eps at delta=1e-06); nothing was "
                                  "released; remaining: eps = 0.25 at delta = 1e-06")
    rest = ledger.status("people").spent.remaining_rho
    assert cdp_eps(rest, 1e-6) == pytest.approx(0.25, rel=1e-9)
    with ledger.reserve("people", Cost.zcdp(rest * (1 - 1e-9)), mechanism="identity"):
        pass
    assert ledger.status("people").spent.remaining == pytest.approx(0.0, abs=1e-8)


def test_owner_and_archive(url: str) -> None:
    with Ledger(url) as ledger:
        mine = ledger.register("mine", FINGERPRINT, Budget("rho", 1.0), user="alice")
        anon = ledger.register("demo", "cd" * 32, Budget("rho", 1.0))
        assert (mine.owner, anon.owner, anon.archived) == ("alice", "anonymous", None)
        with pytest.raises(LedgerError, match="^archive: 'mine' belongs to alice; only its "
                                              "owner can archive it$"):
            ledger.archive("mine", user="bob")
        with ledger.reserve("mine", Cost.zcdp(0.25), mechanism="identity"):
            pass
        archived = ledger.archive("mine", user="alice")
        assert archived.archived is not None and ledger.archive("demo").archived is not None
        message = ("dataset: 'mine' is archived (its history is kept as evidence; it takes no "
                   "new release)")
        with (pytest.raises(LedgerError, match=re.escape(message)),
              ledger.reserve("mine", Cost.zcdp(0.25), mechanism="identity")):
            pass
        assert ledger.refusal("mine", Cost.zcdp(0.1)) == message
        assert len(ledger.history("mine", all_statuses=True)) == 1  # history kept
        assert ledger.status("mine").as_json()["archived"] is True


def test_migration_0002_gives_old_rows_an_owner(url: str, tmp_path: Path) -> None:
    import sqlalchemy as sa
    from alembic import command
    from alembic.config import Config

    from engine.ledger.store import MIGRATIONS

    engine = sa.create_engine(url)
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["version_table"] = "alembic_version"
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, "0001")
        for name, by in (("old", "local:carol"), ("older", None)):
            conn.execute(sa.text(
                "insert into datasets (name, fingerprint, budget_unit, budget_total, created, "
                "created_by) values (:n, :f, 'rho', 1.0, '2026-11-24 00:00:00', :by)"),
                {"n": name, "f": name * 8, "by": by})
    engine.dispose()
    with Ledger(url) as ledger:
        assert [(d.name, d.owner, d.archived) for d in ledger.datasets()] == [
            ("old", "local:carol", None), ("older", "anonymous", None)]
