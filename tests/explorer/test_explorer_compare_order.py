"""Bound first, cheap first, estimates always: the compare page's planning order and its rules.

The estimates come from the engine's cost model (``Mechanism.estimate``); these tests check
that the explorer orders, labels and holds back mechanisms by them, and that the SVD bound is
stored before (and apart from) any planning job.
"""

from __future__ import annotations

import math
import threading

import pytest

from engine.analysis.svd_bound import svd_bound
from engine.mechanisms import get
from engine.scenario import Scenario
from engine.workflows.compare import Comparison, ComparisonRow
from explorer import planning
from explorer.pages.compare import bound_line, queue_table
from explorer.planning import (
    AUTO_START_SECONDS,
    OPERATIONS_PER_SECOND,
    Estimate,
    JobStatus,
    PlanStore,
    estimate_mechanism,
    plan_order,
    queue_rows,
    schedule,
)
from explorer.session import Session


def _scenario(size: int, mechanisms: list[str]) -> dict:
    return {
        "domain": {"x": {"size": size, "kind": "numeric"}},
        "workload": [{"product": {"x": "prefix"}}],
        "privacy": {"noise": "gaussian", "epsilon": 1.0, "delta": 1e-6},
        "mechanisms": mechanisms,
    }


@pytest.fixture
def prefix_2048():
    s = Scenario.from_spec(_scenario(2048, ["identity"]))
    return s.workload, s.privacy


def test_an_estimate_is_the_cost_models_planning_work_at_the_stated_rate(prefix_2048):
    workload, privacy = prefix_2048
    cost = get("hdmm-opt0").estimate(workload, privacy)
    e = estimate_mechanism("hdmm-opt0", workload, privacy)
    assert e.applicable
    assert e.operations == cost.plan_operations and e.bytes == cost.plan_bytes
    # OPT_0's dense model: 100 n**3 operations on the 2048 x 2048 Gram
    assert e.operations == pytest.approx(100.0 * 2048.0**3, rel=1e-12)
    assert e.seconds == pytest.approx(e.operations / OPERATIONS_PER_SECOND, rel=1e-12)
    assert e.seconds > AUTO_START_SECONDS and not e.starts_automatically


def test_a_refused_mechanism_is_ready_at_once_whatever_its_model_says():
    s = Scenario.from_spec(_scenario(16384, ["identity"]))  # over OPT_0's 8,192 cells
    e = estimate_mechanism("hdmm-opt0", s.workload, s.privacy)
    assert not e.applicable and e.seconds == 0.0 and e.starts_automatically
    assert e.describe() == "does not apply: ready at once"
    assert not estimate_mechanism("aim", s.workload, s.privacy).applicable  # data-dependent


def test_estimates_read_as_rough_figures(monkeypatch):
    monkeypatch.setattr(planning, "OPERATIONS_PER_SECOND", 1e9)
    assert (
        Estimate("m", 3.1e9, 120 * 2**20).describe()
        == "~3e9 operations, 120 MiB, about 3 s (estimate)"
    )
    assert (
        Estimate("m", 2e8, 512.0).describe() == "~2e8 operations, 512 bytes, under 1 s (estimate)"
    )
    minutes = Estimate("m", 600.0 * 1e9, 2**30)
    assert minutes.describe().endswith("1 GiB, about 10 min (estimate)")
    assert Estimate("m", 1e15, 0.0).describe().endswith("about 12 days (estimate)")
    assert Estimate("m", math.inf, math.inf).describe() == "no estimate"
    assert Estimate("m", math.inf, math.inf).seconds == math.inf


def test_plans_go_cheapest_first_and_ties_keep_their_order():
    a, b = Estimate("a", 5e9, 0.0), Estimate("b", 1e6, 0.0)
    c, d = Estimate("c", 1e6, 0.0), Estimate("d", 0.0, 0.0, applicable=False)
    unknown = Estimate("u", math.inf, math.inf)
    assert [e.mechanism for e in plan_order([unknown, a, b, c, d])] == ["d", "b", "c", "a", "u"]


def test_mechanisms_over_a_minute_are_held_until_asked_for(prefix_2048):
    workload, privacy = prefix_2048
    names = ["hdmm-opt0", "h2", "identity"]
    start, held = schedule(names, workload, privacy)
    assert [e.mechanism for e in held] == ["hdmm-opt0"]
    assert "hdmm-opt0" not in [e.mechanism for e in start]
    assert [e.mechanism for e in start] == ["h2", "identity"]
    seconds = [e.seconds for e in start]
    assert seconds == sorted(seconds)
    start, held = schedule(names, workload, privacy, allowed=["hdmm-opt0"])
    assert held == [] and start[-1].mechanism == "hdmm-opt0"


def test_queue_rows_say_where_each_mechanism_stands():
    estimates = {"a": Estimate("a", 2e9, 2**20), "b": Estimate("b", 4e9, 2**20)}
    slow = Estimate("c", 1e12, 2**30)
    running = JobStatus("running", 2, 0, "a", 0, math.nan, "", 0.0)
    rows = queue_rows(running, ["a", "b"], [slow], estimates)
    assert [r[:2] for r in rows] == [
        ("a", "planning now"),
        ("b", "queued: number 1 after the running one"),
        ("c", "not started: estimated over 60 s; press 'Plan anyway' to start it"),
    ]
    assert rows[0][2] == estimates["a"].describe() and rows[2][2] == slow.describe()
    # before the job starts (a page loading): the order they will start in
    assert [r[:2] for r in queue_rows(None, ["a", "b"], [], estimates)] == [
        ("a", "starts first"), ("b", "starts number 2")]
    queued = JobStatus("queued", 2, 0, "a", 0, math.nan, "", 0.0, position=3)
    assert queue_rows(queued, ["a"], [], estimates)[0][1] == (
        "waiting for a free planner (job number 3 in line)"
    )
    table = queue_table(rows)
    assert table.count("\n| ") == 4 and "estimated over 60 s wait for 'Plan anyway'" in table
    assert queue_table([]) == ""


def test_the_bound_is_stored_while_the_first_mechanism_still_plans(monkeypatch):
    started, release = threading.Event(), threading.Event()

    def slow_compare(workload, privacy, mechanisms, params=None, progress=None, on_row=None,
                     executor=None):
        started.set()
        assert release.wait(20)
        for name in mechanisms:
            on_row(ComparisonRow(name, name, None, "not applicable: x", 0.0))
        return Comparison(workload, privacy, svd_bound(workload), ())

    monkeypatch.setattr(planning, "compare", slow_compare)
    store = PlanStore()
    session = Session(_scenario(64, ["identity", "h2"]), store=store)
    job = session.request_comparison(background=True)
    assert started.wait(10)
    for _ in range(200):  # the bound thread: milliseconds for a prefix workload
        if store.bound(session.key) is not None:
            break
        threading.Event().wait(0.05)
    assert job.status().state == "running" and job.status().done == 0
    expected = svd_bound(session.workload).value
    assert store.bound(session.key).value == pytest.approx(expected, rel=1e-12)
    session.poll()  # the page picks it up without any row having finished
    assert session.comparison is not None and session.comparison.rows == ()
    assert session.comparison.bound_rmse == pytest.approx(
        svd_bound(session.workload).rmse(session.workload, session.privacy), rel=1e-12
    )
    assert bound_line(session.comparison).startswith(
        f"**SVD lower bound:** {session.comparison.bound_rmse:.4g} per count"
    )
    release.set()
    assert job.wait(10)


def test_bound_line_says_computing_or_why_there_is_none():
    assert bound_line(None) == "**SVD lower bound:** computing..."
    s = Scenario.from_spec(_scenario(16, ["identity"]))
    from engine.analysis.svd_bound import Bound

    pending = Comparison(s.workload, s.privacy, Bound(None, "pending", "still computing"), ())
    assert bound_line(pending) == "**SVD lower bound:** computing..."
    none = Comparison(s.workload, s.privacy, Bound(None, "none", "too large"), ())
    assert bound_line(none) == "**No SVD bound:** too large."


def test_a_session_holds_slow_mechanisms_and_plans_them_on_request(monkeypatch):
    # A rate so low that eigen-design's estimate on 64 cells exceeds a minute.
    s = Scenario.from_spec(_scenario(64, ["identity", "eigen-design"]))
    eigen_ops = get("eigen-design").estimate(s.workload, s.privacy).plan_operations
    identity_ops = get("identity").estimate(s.workload, s.privacy).plan_operations
    assert eigen_ops > identity_ops
    rate = eigen_ops / (2 * AUTO_START_SECONDS)  # eigen-design: 120 s
    assert identity_ops / rate <= AUTO_START_SECONDS
    monkeypatch.setattr(planning, "OPERATIONS_PER_SECOND", rate)
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


def test_a_page_being_built_can_wait_for_the_bound_and_it_is_computed_once(monkeypatch):
    calls = []
    real = planning.svd_bound

    def counted(workload):
        calls.append(workload)
        return real(workload)

    monkeypatch.setattr(planning, "svd_bound", counted)
    store = PlanStore()
    s = Scenario.from_spec(_scenario(32, ["identity"]))
    store.ensure_bound("k", s.workload, wait=10.0)
    assert store.bound("k").value == pytest.approx(real(s.workload).value, rel=1e-12)
    store.ensure_bound("k", s.workload, wait=10.0)
    store.ensure_bound("k", s.workload, background=False)
    assert len(calls) == 1
    store.ensure_bound("other", s.workload, background=False)  # notebooks: on the caller
    assert store.bound("other") is not None and len(calls) == 2
