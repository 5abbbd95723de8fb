"""The session's planning: what waits for the user, and rows held back while a page loads.
"""

from __future__ import annotations

import threading

import pytest
from planning_fakes import PREFIX_SPEC, fake_compare

from engine.mechanisms import get
from engine.scenario import Scenario
from explorer.planning import jobs
from explorer.planning import schedule as schedule_module
from explorer.planning.schedule import AUTO_START_SECONDS
from explorer.planning.store import PlanStore
from explorer.session import Session, queue


@pytest.fixture
def store() -> PlanStore:
    return PlanStore()


def test_rows_wait_while_a_page_of_the_session_loads_in_a_browser(store, monkeypatch):
    release = threading.Event()

    def behaviour(name, progress):  # each row waits for the test's go
        release.wait(10)
        return None

    monkeypatch.setattr(jobs, "compare", fake_compare(behaviour))

    def shown(session):
        comparison = session.comparison
        return [] if comparison is None else sorted(r.mechanism for r in comparison.rows)

    session = Session(PREFIX_SPEC, store=store)
    job = session.request_comparison(background=True)
    session.page_loading("compare page")  # its browser has not reported it loaded yet
    release.set()
    assert job.wait(10) and shown(session) == []
    session.poll()  # e.g. the poll of the page the user is leaving
    assert shown(session) == [] and session.job is job
    # every row is in the store, none on show: the headline must not say planning is over
    assert session.missing() == [] and not session.complete
    session.page_loaded("compare page")
    session.poll()
    assert shown(session) == ["h2", "identity"] and session.job is None
    assert session.complete
    session.page_loaded("compare page")  # a second report (the tab closing) changes nothing

    # a browser that never reports its page loaded holds the session back for a while only
    release.clear()
    other = Session(dict(PREFIX_SPEC, mechanisms=["wavelet"]), store=store)
    job = other.request_comparison(background=True)
    other.page_loading("never loads")
    release.set()
    assert job.wait(10)
    other.poll()
    assert shown(other) == []
    monkeypatch.setattr(queue, "LOAD_PATIENCE", 0.0)
    other.poll()
    assert shown(other) == ["wavelet"]


def _scenario(size: int, mechanisms: list[str]) -> dict:
    return {
        "domain": {"x": {"size": size, "kind": "numeric"}},
        "workload": [{"product": {"x": "prefix"}}],
        "privacy": {"noise": "gaussian", "epsilon": 1.0, "delta": 1e-6},
        "mechanisms": mechanisms,
    }


def test_a_session_holds_slow_mechanisms_and_plans_them_on_request(monkeypatch):
    # A rate so low that eigen-design's estimate on 64 cells exceeds a minute.
    s = Scenario.from_spec(_scenario(64, ["identity", "eigen-design"]))
    eigen_ops = get("eigen-design").estimate(s.workload, s.privacy).plan_operations
    identity_ops = get("identity").estimate(s.workload, s.privacy).plan_operations
    assert eigen_ops > identity_ops
    rate = eigen_ops / (2 * AUTO_START_SECONDS)  # eigen-design: 120 s
    assert identity_ops / rate <= AUTO_START_SECONDS
    monkeypatch.setattr(schedule_module, "OPERATIONS_PER_SECOND", rate)
    session = Session(_scenario(64, ["identity", "eigen-design"]), store=PlanStore())
    # while a page loads, before anything starts: the plan and its estimates
    session.preview_queue()
    assert session.job is None and session.comparison is None
    assert [row[:2] for row in session.queue] == [
        ("identity", "starts first"),
        ("eigen-design", "not started: estimated over 60 s; press 'Plan anyway' to start it")]
    assert session.queue[1][2].endswith("about 2 min (estimate)")
    assert [e.mechanism for e in session.held] == ["eigen-design"]
    session.request_comparison(background=False)
    assert [e.mechanism for e in session.held] == ["eigen-design"]
    assert [r.mechanism for r in session.comparison.rows] == ["identity"]
    assert session.complete  # nothing left but what waits for the user
    assert [row[0] for row in session.queue] == ["eigen-design"]
    assert session.queue[0][2].endswith("about 2 min (estimate)")
    session.request_comparison(background=False)  # automatic runs keep holding it
    assert [e.mechanism for e in session.held] == ["eigen-design"]
    session.request_comparison(background=False, include_slow=True)
    assert session.held == [] and session.queue == []
    assert {r.mechanism for r in session.comparison.rows} == {"identity", "eigen-design"}
