"""The shared session store on a real PostgreSQL (the throw-away server of ``tests/conftest.py``):
the schema next to the ledger's in one database, sessions with owners and versions, read-only
links, and planning jobs' rows with a cancel flag; two registries serve one session."""

from __future__ import annotations

import pytest

from engine.ledger import Ledger
from explorer.planning.store import PlanStore
from explorer.server.persistence import SessionPersistence
from explorer.server.session_store import SessionStore, StoreError
from explorer.server.sessions import SessionRegistry
from explorer.server.uploads import UploadFiles
from explorer.session import Session


def test_the_store_shares_a_database_with_the_ledger(postgres_url: str) -> None:
    Ledger(postgres_url).close()
    store = SessionStore(postgres_url)
    SessionStore(postgres_url).close()  # a second open finds the schema current
    assert store.save("s1", "ann", {"eps": 1.0}) == 1
    assert store.save("s1", "ann", {"eps": 2.0}) == 2
    with pytest.raises(StoreError, match="another user"):
        store.save("s1", "bob", {"eps": 3.0})
    assert store.load("s1", "ann").state == {"eps": 2.0}
    assert store.load("s1", "bob") is None and store.version("s1") == 2
    store.put_shared("t1", {"domain": {}})
    assert store.shared("t1") == {"domain": {}}
    store.put_job("k", "laplace", state="running", total=3, done=1, current="h2", message="",
                  process="host:1")
    assert store.cancel_job("k", "laplace")
    row = store.job("k", "laplace")
    assert (row.state, row.total, row.done, row.current, row.cancel) == (
        "running", 3, 1, "h2", True)
    store.put_job("k", "laplace", state="cancelled", total=3, done=1, current=None,
                  message="", process="host:1")
    assert not store.cancel_job("k", "laplace")
    with Ledger(postgres_url) as ledger:  # the ledger's schema is untouched
        assert ledger.datasets() == []
    store.close()


def test_two_registries_serve_one_session_from_postgresql(postgres_url: str, tmp_path) -> None:
    plans = PlanStore()

    def factory(spec):
        return Session(spec, store=plans)

    def registry() -> SessionRegistry:
        return SessionRegistry(factory=factory, persistence=SessionPersistence(
            lambda: SessionStore(postgres_url), UploadFiles(tmp_path), factory, debounce=0.01))

    first, second = registry(), registry()
    sid, session = first.open(None, user="ann")
    session.privacy.epsilon = 0.25
    first.flush()
    same, other = second.open(sid, user="ann")
    assert same == sid
    assert other.privacy.epsilon == pytest.approx(0.25, rel=1e-12, abs=0)
    assert second.open(sid, user="bob")[0] != sid
