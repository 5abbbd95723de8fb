"""Sessions in the shared store: two registries (two serving processes) over one database.

No browser and no server: each registry stands for one ``panel serve`` process; they share a
SQLite store in a temporary directory, a plan store (as the shared plan cache would) and the
uploads folder.
"""

from __future__ import annotations

import logging
import time

import pytest
from planning_fakes import PREFIX_SPEC

from explorer import app
from explorer.planning.store import PlanStore
from explorer.server.persistence import SessionPersistence
from explorer.server.session_store import SessionStore, StoreError
from explorer.server.sessions import SessionRegistry
from explorer.server.uploads import UploadFiles
from explorer.session import Session
from explorer.session.model import Upload


@pytest.fixture
def plans() -> PlanStore:
    return PlanStore()


def _registry(url: str, uploads: UploadFiles, plans: PlanStore,
              debounce: float = 0.01) -> SessionRegistry:
    def factory(spec):
        return Session(spec if spec is not None else PREFIX_SPEC, store=plans)

    return SessionRegistry(
        idle_seconds=60.0,
        factory=factory,
        persistence=SessionPersistence(
            lambda: SessionStore(url), uploads=uploads, factory=factory, debounce=debounce
        ),
    )


@pytest.fixture
def pair(tmp_path, plans) -> tuple[SessionRegistry, SessionRegistry]:
    """Two registries ("processes") over one store."""
    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    uploads = UploadFiles(tmp_path / "uploads")
    return _registry(url, uploads, plans), _registry(url, uploads, plans)


def test_a_session_opened_in_one_process_is_served_by_the_other(pair):
    a, b = pair
    sid, session = a.open(None)
    session.privacy.epsilon = 0.37
    session.mechanisms = ["h2"]
    a.flush()

    same, other = b.open(sid)
    assert same == sid and other is not session
    assert other.privacy.epsilon == pytest.approx(0.37, rel=1e-12, abs=0)
    assert other.mechanisms == ["h2"]
    assert other.export_spec() == session.export_spec()


def test_a_fresh_session_is_written_at_once_and_its_changes_after_the_debounce(tmp_path,
                                                                               plans):
    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    a = _registry(url, UploadFiles(tmp_path / "uploads"), plans, debounce=30.0)
    store = SessionStore(url)
    sid, session = a.open(None)
    deadline = time.monotonic() + 10.0  # the writer thread's turn: milliseconds
    while store.version(sid) is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert store.version(sid) == 1  # before the 30 s debounce
    session.privacy.epsilon = 0.37
    time.sleep(0.5)
    assert store.version(sid) == 1  # a change waits for the debounce
    a.flush()
    assert store.version(sid) == 2


def test_a_change_made_in_the_other_process_reaches_the_first(pair):
    a, b = pair
    sid, session = a.open(None)
    a.flush()
    _, other = b.open(sid)
    other.apply_text(other.draft_text.replace("size: 16", "size: 8"))
    other.privacy.epsilon = 2.5
    b.flush()

    again_sid, again = a.open(sid)  # the first process holds an older version: reloaded
    assert again_sid == sid and again is not session
    assert again.privacy.epsilon == pytest.approx(2.5, rel=1e-12, abs=0)
    assert again.workload.domain.shape == (8,)
    # nothing changed since: the session held is served as it is
    assert a.open(sid)[1] is again


def test_an_invalid_draft_comes_back_with_its_message_and_the_last_valid_scenario(pair):
    a, b = pair
    sid, session = a.open(None)
    message = session.apply_text("domain: {x: {size: -3}}\nworkload: []\n")
    assert message
    a.flush()
    _, other = b.open(sid)
    assert other.draft_text == "domain: {x: {size: -3}}\nworkload: []\n"
    assert other.draft_error == message
    assert other.workload.domain.shape == (16,)


def test_the_selected_mechanism_survives(pair, plans):
    a, b = pair
    sid, session = a.open(None)
    session.compare_now()
    best = session.selected
    other_name = next(n for n in ("identity", "h2") if n != best)
    session.selected = other_name
    a.flush()
    _, other = b.open(sid)
    assert other.selected == other_name
    assert other.row(other_name).rmse == pytest.approx(session.row(other_name).rmse,
                                                       rel=1e-12, abs=0)


def test_another_users_session_is_never_loaded(pair):
    a, b = pair
    sid, _ = a.open(None, user="ann")
    a.flush()
    assert b.open(sid, user="bob")[0] != sid
    assert b.open(sid, user=None)[0] != sid
    assert b.open(sid, user="ann")[0] == sid


def test_a_session_id_the_store_does_not_know_gets_a_fresh_session(pair):
    a, _ = pair
    sid, _ = a.open("made-up-id")
    assert sid != "made-up-id" and len(sid) == 22


def test_an_upload_is_kept_by_content_and_comes_back(pair, tmp_path):
    a, b = pair
    sid, session = a.open(None)
    session.upload = Upload("mine.csv", b"x\n1\n2\n")
    a.flush()
    digest = session.upload.sha256
    assert (tmp_path / "uploads" / digest).read_bytes() == b"x\n1\n2\n"
    _, other = b.open(sid)
    assert other.upload == Upload("mine.csv", b"x\n1\n2\n")


def test_a_damaged_upload_file_is_not_returned(tmp_path):
    files = UploadFiles(tmp_path)
    digest = files.put(b"a,b\n1,2\n")
    assert files.get(digest) == b"a,b\n1,2\n"
    (tmp_path / digest).write_bytes(b"a,b\n1,3\n")
    assert files.get(digest) is None
    assert files.get("../../etc/passwd") is None


def test_a_read_only_link_opens_in_any_process(pair):
    a, b = pair
    sid, session = a.open(None)
    session.privacy.epsilon = 0.5
    token = a.share(sid)
    new_sid, copy = b.open(None, shared=token)
    assert new_sid != sid and copy is not session
    assert copy.privacy.epsilon == pytest.approx(0.5, rel=1e-12, abs=0)


def test_a_read_only_database_is_one_line_and_the_server_keeps_serving(
    tmp_path, plans, caplog
):
    path = tmp_path / "store.sqlite"
    SessionStore(f"sqlite:///{path}").close()  # made, then opened read-only (as root too)
    url = f"sqlite:///file:{path}?mode=ro&uri=true"
    registry = _registry(url, UploadFiles(tmp_path / "uploads"), plans)
    with caplog.at_level(logging.WARNING, logger="explorer.sessions"):
        sid, session = registry.open(None)
        registry.flush()
        session.privacy.epsilon = 0.8
        registry.flush()
        assert registry.open(sid)[1] is session  # served from memory
    assert "readonly database" in registry.store_error
    assert "\n" not in registry.store_error
    assert sum(r.name == "explorer.sessions" for r in caplog.records) == 1


def test_an_unwritable_uploads_folder_is_one_line_and_the_session_goes_on(tmp_path, plans):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")  # a file where the folder should be: no write, even as root
    registry = _registry(f"sqlite:///{tmp_path / 's.sqlite'}", UploadFiles(blocker), plans)
    sid, session = registry.open(None)
    session.upload = Upload("mine.csv", b"x\n1\n")
    registry.flush()
    assert registry.store_error.startswith("uploads: cannot write")
    assert registry.open(sid)[1].upload == Upload("mine.csv", b"x\n1\n")


def test_a_store_that_cannot_be_written_is_reported_and_sessions_go_on(tmp_path, plans, caplog):
    def broken() -> SessionStore:
        raise StoreError("session store: cannot write '/x': attempt to write a readonly database")

    registry = SessionRegistry(
        factory=lambda spec: Session(PREFIX_SPEC, store=plans),
        persistence=SessionPersistence(broken, uploads=UploadFiles(tmp_path), debounce=0.01),
    )
    with caplog.at_level(logging.WARNING, logger="explorer.sessions"):
        sid, session = registry.open(None)
        registry.flush()
    assert registry.open(sid)[1] is session
    assert "readonly database" in registry.store_error
    assert sum(r.name == "explorer.sessions" for r in caplog.records) == 1


def test_the_store_keeps_shown_sessions_and_forgets_idle_ones(tmp_path):
    store = SessionStore(f"sqlite:///{tmp_path / 's.sqlite'}")
    store.save("a", None, {"x": 1})
    store.save("b", "ann", {"x": 2})
    assert store.save("b", "ann", {"x": 3}) == 2
    with pytest.raises(StoreError, match="another user"):
        store.save("b", "bob", {"x": 4})
    assert store.load("b", "ann").state == {"x": 3}
    assert store.load("b", None) is None
    assert store.forget_idle(3600) == 0
    store.touch(["a"])
    assert store.forget_idle(0) == 2
    assert store.load("a", None) is None


def test_planning_jobs_are_counted_per_signed_in_user(pair):
    a, _ = pair
    _, ann = a.open(None, user="ann")
    _, anonymous = a.open(None)
    assert a.owner_of(ann) == "ann"
    assert a.owner_of(anonymous) is anonymous
    assert a.owner_of("not a session") == "not a session"


def test_the_page_shows_a_store_problem_in_one_line(monkeypatch):
    assert app.REGISTRY.persistence is not None
    monkeypatch.setattr(app.REGISTRY.persistence, "error", "")
    monkeypatch.setattr(app.STORE.cache, "error", "")
    assert not app.store_problem().visible
    monkeypatch.setattr(app.REGISTRY.persistence, "error",
                        "session store: cannot write to '/d/ledger.sqlite': disk I/O error")
    shown = app.store_problem()
    assert shown.visible and shown.object == (
        "session store: cannot write to '/d/ledger.sqlite': disk I/O error")
