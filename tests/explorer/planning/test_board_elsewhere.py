"""A planning job of another serving process, followed from the shared board.

A session's page reloaded in a process that does not run the session's job must show that
job's progress and cancel it there, and must not plan the same workload a second time; a job
whose process is gone is planned afresh. Another process is stood for by a board row written
under its name (``host:pid`` of a living ``sleep`` process, of a finished one, or of another
machine).
"""

from __future__ import annotations

import datetime as dt
import socket
import subprocess
import sys

import pytest

from engine.workflows.compare import Comparison, ComparisonRow
from explorer.components import progress
from explorer.components.progress import PlanningProgress
from explorer.planning import board, jobs
from explorer.planning.store import PlanStore, workload_key
from explorer.server.session_store import JobRow, SessionStore
from explorer.session import Session

SPEC = {
    "domain": {"x": {"size": 16, "kind": "numeric"}},
    "workload": [{"product": {"x": "prefix"}}],
    "privacy": {"noise": "laplace", "epsilon": 1.0},
    "mechanisms": ["identity", "h2"],
}


@pytest.fixture
def other_process():
    """``host:pid`` of a living process of this machine (ended after the test)."""
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield f"{socket.gethostname()}:{sleeper.pid}"
    sleeper.kill()
    sleeper.wait()


@pytest.fixture
def planned(monkeypatch):
    """Planning that finishes at once with one row per mechanism (names of the calls)."""
    calls: list[list[str]] = []

    def instant(workload, privacy, mechanisms, *args, progress=None, on_row=None, **kw):
        calls.append(list(mechanisms))
        for name in mechanisms:
            on_row(ComparisonRow(name, name, None, "not applicable: test", 0.0))
        return Comparison(workload, privacy, None, ())

    monkeypatch.setattr(jobs, "compare", instant)
    return calls


def write(shared: SessionStore, key: str, process: str, state: str, done: int = 1) -> None:
    shared.put_job(key, "laplace", state=state, total=2, done=done, current="h2",
                   message="", process=process)


def test_a_page_in_another_process_follows_the_job_and_cancels_it_there(
        tmp_path, monkeypatch, other_process, planned):
    monkeypatch.setattr(progress, "BOARD_POLL_S", 0.0)
    shared = SessionStore(f"sqlite:///{tmp_path / 'store.sqlite'}")
    here = PlanStore(board=SessionStore(shared.url))  # the process the page reloaded in
    session = Session(SPEC, store=here)
    key = workload_key(session.workload)
    write(shared, key, other_process, "running")

    assert session.request_comparison(background=False) is None  # not planned twice
    assert planned == []
    seen = session.job_elsewhere()
    assert (seen.state, seen.done, seen.total, seen.current) == ("running", 1, 2, "h2")
    view = PlanningProgress(session=session)
    assert view.status == "Planning h2 (2 of 2)..."
    assert view._layout.visible and view._skip.disabled and not view._cancel.disabled

    view.cancel()
    assert shared.job(key, "laplace").cancel  # the flag the other process reads
    assert view._cancel.disabled
    write(shared, key, other_process, "cancelled")
    view.tick()
    assert not view._layout.visible
    assert session.job_elsewhere() is None

    job = session.request_comparison(background=False)  # gone: this process plans it now
    assert job is not None and job.status().state == "done"
    assert planned == [["h2"]] or planned == [["identity", "h2"]]
    shared.close()


def test_a_job_whose_process_is_gone_is_planned_afresh(tmp_path, planned):
    finished = subprocess.Popen([sys.executable, "-c", "pass"])
    finished.wait()
    shared = SessionStore(f"sqlite:///{tmp_path / 'store.sqlite'}")
    session = Session(SPEC, store=PlanStore(board=SessionStore(shared.url)))
    key = workload_key(session.workload)
    write(shared, key, f"{socket.gethostname()}:{finished.pid}", "running")
    assert session.job_elsewhere() is None
    assert session.request_comparison(background=False) is not None
    assert len(planned) == 1
    shared.close()


def row(process: str, state: str, updated: dt.datetime) -> JobRow:
    return JobRow("k", "laplace", state, 2, 1, "h2", "", False, process, updated)


def test_another_machines_job_counts_while_it_writes_and_a_finished_one_never():
    now = dt.datetime(2026, 11, 28, 10, 0, tzinfo=dt.UTC)
    fresh = now - dt.timedelta(seconds=board.STALE_SECONDS - 1)
    stale = now - dt.timedelta(seconds=board.STALE_SECONDS + 1)
    assert board.running_elsewhere(row("another-host:12", "running", fresh), now)
    assert board.running_elsewhere(row("another-host:12", "queued", fresh), now)
    assert not board.running_elsewhere(row("another-host:12", "running", stale), now)
    assert not board.running_elsewhere(row("another-host:12", "done", fresh), now)
    assert not board.running_elsewhere(row(board.process_name(), "running", fresh), now)
    assert not board.running_elsewhere(None, now)
    assert board.process_alive(board.process_name()) is True
    assert board.process_alive("another-host:12") is None
