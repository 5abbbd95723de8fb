"""Server-side sessions: server-issued ids, tab counts, expiry and read-only links."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from explorer.planning import jobs
from explorer.planning.store import PlanStore
from explorer.server import log as serverlog
from explorer.server import process as serverprocess
from explorer.server import sessions
from explorer.server.sessions import SessionRegistry, watchers_added
from explorer.session import Session

PREFIX_SPEC = {
    "domain": {"x": {"size": 16, "kind": "numeric"}},
    "workload": [{"product": {"x": "prefix"}}],
    "privacy": {"noise": "laplace", "epsilon": 1.0},
    "mechanisms": ["identity", "h2"],
}


class Clock:
    """A hand-moved monotonic clock (seconds)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def registry(clock) -> SessionRegistry:
    store = PlanStore()
    return SessionRegistry(
        idle_seconds=60.0, clock=clock, factory=lambda spec: Session(spec, store=store)
    )


def test_ids_are_issued_by_the_server_and_unguessable(registry):
    sid, first = registry.open(None)
    assert len(sid) == 22 and sid.replace("-", "").replace("_", "").isalnum()
    assert registry.open(sid) == (sid, first)  # the pages of one user share it
    made_up, other = registry.open("made-up-id")
    assert other is not first and made_up not in (sid, "made-up-id")
    assert len({registry.open(None)[0] for _ in range(50)}) == 50


def test_a_session_belongs_to_the_signed_in_user_who_opened_it(registry):
    sid, alice = registry.open(None, user="alice")
    assert registry.open(sid, user="alice")[1] is alice
    other_sid, bob = registry.open(sid, user="bob")
    assert bob is not alice and other_sid != sid


def test_sessions_expire_only_when_no_tab_is_connected(registry, clock):
    sid, session = registry.open(None)
    registry.connect(sid)
    clock.now += 3600.0
    assert registry.expire() == []  # a connected tab keeps it however long it idles
    assert registry.open(sid)[1] is session

    registry.disconnect(sid)
    clock.now += 59.0
    assert registry.expire() == [] and registry.tabs(sid) == 0
    clock.now += 2.0
    assert registry.expire() == [sid]
    new_sid, fresh = registry.open(sid)
    assert fresh is not session and new_sid != sid


def test_idle_sessions_are_swept_without_any_page_being_opened(monkeypatch):
    releases = []
    monkeypatch.setattr(serverprocess, "release_memory", lambda: releases.append(1) or True)
    store = PlanStore()
    registry = SessionRegistry(idle_seconds=0.5, factory=lambda spec: Session(spec, store=store))
    idle, _ = registry.open(None)
    registry.connect(idle)
    registry.disconnect(idle)
    connected, _ = registry.open(None)
    registry.connect(connected)
    stop = threading.Event()
    thread = serverprocess.expire_sessions(registry, stop)
    try:
        deadline = time.monotonic() + 10.0
        while len(registry) > 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(registry) == 1 and registry.tabs(connected) == 1
        assert registry.open(idle)[0] != idle  # gone: its id now gets a fresh session
    finally:
        stop.set()
        thread.join(5.0)
    assert not thread.is_alive()
    assert 1 <= len(releases) <= 2  # after each sweep that dropped a session (one or both)


def test_memory_is_handed_back_to_the_system_on_glibc():
    assert serverprocess.release_memory() is True  # Debian's glibc has malloc_trim


def test_the_idle_time_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv("EXPLORER_SESSION_IDLE_SECONDS", raising=False)
    assert sessions.idle_seconds_from_environment() == sessions.IDLE_SECONDS == 1800
    monkeypatch.setenv("EXPLORER_SESSION_IDLE_SECONDS", "90")
    assert sessions.idle_seconds_from_environment() == 90.0
    for bad in ("soon", "0", "-5", "nan", "inf"):
        monkeypatch.setenv("EXPLORER_SESSION_IDLE_SECONDS", bad)
        with pytest.raises(SystemExit, match=f"EXPLORER_SESSION_IDLE_SECONDS: '{bad}' is not"):
            sessions.idle_seconds_from_environment()


def test_many_page_loads_never_evict_a_connected_session(registry):
    sid, session = registry.open(None)
    registry.connect(sid)
    for _ in range(300):
        registry.open(None)
    assert registry.open(sid)[1] is session and len(registry) == 301


def test_closing_the_last_tab_cancels_a_job_nobody_else_waits_for(registry, monkeypatch):
    started = threading.Event()

    def endless(workload, privacy, mechanisms, params=None, progress=None, on_row=None,
             executor=None):
        started.set()
        for i in range(100_000):
            threading.Event().wait(0.001)
            progress.report(i, 1.0)
        raise AssertionError("the job was never stopped")

    monkeypatch.setattr(jobs, "compare", endless)
    sid, session = registry.open(None)
    registry.connect(sid)
    registry.connect(sid)  # two tabs
    job = session.request_comparison()
    assert started.wait(10)
    registry.disconnect(sid)
    assert not job.wait(0.2) and session.job is job  # the other tab still waits
    registry.disconnect(sid)
    assert session.job is None
    assert job.wait(10) and job.status().state == "cancelled"


def test_a_closed_tab_takes_its_pages_watchers_off_the_session(registry):
    """A page's bindings on the session must not keep the page alive (and recomputing) once
    its tab closed; the session's own watchers and another tab's stay."""

    def count(session: Session) -> int:
        return sum(
            len(watchers)
            for owner in (session, session.privacy)
            for by_kind in owner.param.watchers.values()
            for watchers in by_kind.values()
        )

    sid, session = registry.open(None)
    own = count(session)
    calls = []
    with watchers_added(session, session.privacy) as first:
        session.param.watch(lambda event: calls.append("first"), "comparison")
        session.privacy.param.watch(lambda event: calls.append("first eps"), "epsilon")
    with watchers_added(session, session.privacy) as second:
        session.privacy.param.watch(lambda event: calls.append("second eps"), "epsilon")
    assert [len(first), len(second), count(session)] == [2, 1, own + 3]
    registry.connect(sid)
    registry.connect(sid)

    registry.tab_closed(sid, first)(None)
    assert count(session) == own + 1 and registry.tabs(sid) == 1
    session.privacy.epsilon = 0.5
    assert calls == ["second eps"]
    registry.tab_closed(sid, second)(None)
    assert count(session) == own and registry.tabs(sid) == 0
    registry.tab_closed(sid, first)(None)  # a second close of the same page changes nothing
    assert count(session) == own


def test_a_read_only_link_opens_a_copy_never_the_session(registry):
    sid, session = registry.open(None)
    session.apply_draft(PREFIX_SPEC)
    token = registry.share(sid)
    copy_sid, copy = registry.open(None, shared=token)
    assert copy is not session and copy_sid != sid
    assert copy.scenario.workload.num_queries == 16 and copy.mechanisms == ["identity", "h2"]
    copy.privacy.epsilon = 3.0  # the copy's changes stay in the copy
    assert session.privacy.epsilon == 1.0
    assert registry.open(None, shared="not-a-token")[1].scenario.workload.num_queries == 96
    with pytest.raises(KeyError, match="session: 'nope' is not an open session"):
        registry.share("nope")


def _record(logger: str, error: BaseException) -> logging.LogRecord:
    try:
        raise error
    except BaseException as raised:
        exc_info = (type(raised), raised, raised.__traceback__)
    return logging.LogRecord(logger, logging.ERROR, __file__, 1, "failed", (), exc_info)


def test_closed_tab_noise_is_dropped_and_every_other_error_kept():
    from tornado.websocket import WebSocketClosedError

    closed_tab = serverlog.ClosedTabFilter()
    assert not closed_tab.filter(_record("asyncio", WebSocketClosedError()))
    assert closed_tab.filter(_record("asyncio", ValueError("a real failure")))
    assert closed_tab.filter(_record("tornado.application", AssertionError("ours")))
    # Bokeh's own assertion, raised where a closing websocket asks for its missing session.
    from bokeh.server.connection import ServerConnection

    connection = object.__new__(ServerConnection)
    connection._session = None
    try:
        connection.session  # noqa: B018 (the property raises)
    except AssertionError as bokeh_assert:
        record = logging.LogRecord(
            "tornado.application",
            logging.ERROR,
            __file__,
            1,
            "Uncaught exception",
            (),
            (AssertionError, bokeh_assert, bokeh_assert.__traceback__),
        )
    assert not closed_tab.filter(record)
    assert closed_tab.filter(logging.LogRecord("x", logging.INFO, __file__, 1, "hi", (), None))
